//! The RTT map read in one batch a tick: every watched connection that
//! carried data has its p50, and the entries of connections no longer
//! watched leave the map (a batch read would copy them every tick).
mod support;
use kitty_core::model::{Frame, ProcKey, RankFrame, Sig, SocketFrame};
use kitty_probe_ebpf::rtt::{RttProbe, SockKey};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;

/// Requests and echoes: the client's data is ACKed many times.
fn talk(c: &mut TcpStream, s: &mut TcpStream) {
    let mut b = [0u8; 512];
    for _ in 0..50 {
        c.write_all(&b).unwrap();
        s.read_exact(&mut b).unwrap();
        s.write_all(&b).unwrap();
        c.read_exact(&mut b).unwrap();
    }
}

fn inode(fd: &impl AsRawFd) -> u64 {
    // SAFETY: libc::stat is plain data; all zeroes is a value of it.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a live fd, and a stat to write into.
    assert_eq!(unsafe { libc::fstat(fd.as_raw_fd(), &mut st) }, 0);
    st.st_ino
}

fn netns() -> u64 {
    kitty_core::sources::process::read_netns(std::path::Path::new("/proc/self")).unwrap()
}

/// One rank (this process) with these client sockets.
fn frame_of(clients: &[&TcpStream]) -> Frame {
    let sockets = clients
        .iter()
        .map(|c| SocketFrame {
            inode: inode(*c),
            local: c.local_addr().unwrap().to_string().into(),
            remote: c.peer_addr().unwrap().to_string().into(),
            state: "ESTABLISHED".into(),
            ..Default::default()
        })
        .collect();
    Frame {
        interval_ms: 500,
        ranks: vec![RankFrame {
            key: ProcKey {
                pid: std::process::id(),
                start_time: 0,
            },
            netns: Some(netns()),
            sockets,
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn key_of(c: &TcpStream) -> SockKey {
    SockKey::new(netns(), &c.local_addr().unwrap(), &c.peer_addr().unwrap())
}

#[test]
fn each_talking_socket_has_its_rtt_and_a_socket_no_longer_watched_leaves_the_map() {
    if !support::can_load_bpf() {
        return;
    }
    let mut probe = RttProbe::start().expect("the RTT probe attaches here");
    if !probe.reads_by_batch() {
        // Batch lookups on hash maps came with Linux 5.6.
        eprintln!("skipped: no batch lookups on this kernel");
        return;
    }
    let (mut c1, mut s1) = support::loopback_pair();
    let (mut c2, mut s2) = support::loopback_pair();
    // The first enrich sets the port filter: samples count from then.
    probe.enrich(&mut frame_of(&[&c1, &c2]));
    talk(&mut c1, &mut s1);
    talk(&mut c2, &mut s2);
    let mut f = frame_of(&[&c1, &c2]);
    probe.enrich(&mut f);
    for s in &f.ranks[0].sockets {
        let p50 = s.signals.get(Sig::RttP50Us);
        assert!(p50.is_some_and(|v| v > 0.0), "{}: {p50:?}", s.local);
    }
    assert!(f.ranks[0].signals.get(Sig::RttP99Us).is_some());
    let in_map = probe.keys_in_map();
    assert!(in_map.contains(&key_of(&c1)) && in_map.contains(&key_of(&c2)));

    // The second connection is no longer watched: its entry goes.
    probe.enrich(&mut frame_of(&[&c1]));
    let in_map = probe.keys_in_map();
    assert!(in_map.contains(&key_of(&c1)), "{in_map:?}");
    assert!(!in_map.contains(&key_of(&c2)), "{in_map:?}");

    // The first still reads, from its own entry.
    talk(&mut c1, &mut s1);
    let mut f = frame_of(&[&c1]);
    probe.enrich(&mut f);
    assert!(f.ranks[0].sockets[0].signals.get(Sig::RttP50Us).is_some());
}
