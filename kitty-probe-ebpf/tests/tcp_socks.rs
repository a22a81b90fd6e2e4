//! The run that reads the TCP sockets the open-files walk found gives what
//! sock_diag gives for the same sockets of a live process (IPv4 and IPv6;
//! one whose peer has data it has not read, one with data it could not
//! send yet, one idle), and a socket closed since is left out.
mod support;
use kitty_core::sources::sockdiag::{SockDiag, Wanted};
use kitty_core::sources::tasks::{TaskCounters, TcpSockets};
use kitty_core::sources::tcp_table::SocketRaw;
use kitty_probe_ebpf::tasks::TaskIter;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A process with five connected TCP pairs: 4 MB sent and read over IPv4,
/// the same over IPv6, 64 KB sent and left unread by the peer, one idle,
/// and one whose peer never reads, its client stuck with data to send
/// (its send queue and unsent bytes). It says its connected
/// sockets' inodes; on a line of its stdin it closes the idle pair, and it
/// exits when its stdin closes.
const HOLDER: &str = r#"
import os, socket, sys, threading, time
def pair(host, fam):
    l = socket.socket(fam); l.bind((host, 0)); l.listen()
    c = socket.create_connection(l.getsockname()[:2]); a, _ = l.accept(); l.close()
    return c, a
def through(c, a, n):
    sender = threading.Thread(target=c.sendall, args=(b"x" * n,)); sender.start()
    got = 0
    while got < n:
        got += len(a.recv(1 << 20))
    sender.join()
v4 = pair("127.0.0.1", socket.AF_INET); through(*v4, 4 << 20)
v6 = pair("::1", socket.AF_INET6); through(*v6, 4 << 20)
unread = pair("127.0.0.1", socket.AF_INET); unread[0].sendall(b"y" * 65536)
idle = pair("127.0.0.1", socket.AF_INET)
stuck = pair("127.0.0.1", socket.AF_INET)
stuck[0].setblocking(False)
left = b"z" * (64 << 20)
while True:
    try:
        left = left[stuck[0].send(left):]
    except BlockingIOError:
        break
time.sleep(0.3)
socks = [s for p in (v4, v6, unread, idle, stuck) for s in p]
print("ready", *[os.fstat(s.fileno()).st_ino for s in socks], flush=True)
sys.stdin.readline()
idle[0].close(); idle[1].close()
print("closed", flush=True)
sys.stdin.read()
"#;

fn netns_of(pid: u32) -> u64 {
    let link = std::fs::read_link(format!("/proc/{pid}/ns/net")).unwrap();
    let s = link.to_string_lossy();
    s.trim_start_matches("net:[")
        .trim_end_matches(']')
        .parse()
        .unwrap()
}

/// The walk's sockets once it knows the kernel's tick rate (its second
/// read at least 0.2 s after the first row).
fn walked(it: &mut TaskIter) -> TcpSockets {
    let until = Instant::now() + Duration::from_secs(3);
    loop {
        if let Some(got) = it.tcp_sockets() {
            return got.expect("the walk reads");
        }
        assert!(Instant::now() < until, "the tick rate is learnt in 0.2 s");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The two answers for one socket agree: every field the same but the
/// chrono times, which run on between the two reads (by a jiffy or two).
fn agree(walk: &SocketRaw, diag: &SocketRaw) {
    let (w, d) = (walk.info.clone().unwrap(), diag.info.clone().unwrap());
    let what = format!("socket {} {:?} / {:?}", walk.inode, walk, diag);
    assert_eq!(
        (
            walk.local,
            walk.remote,
            walk.state,
            walk.tx_queue,
            walk.rx_queue
        ),
        (
            diag.local,
            diag.remote,
            diag.state,
            diag.tx_queue,
            diag.rx_queue
        ),
        "{what}"
    );
    let counters = |i: &kitty_core::model::TcpInfo| {
        (
            (
                i.rtt_us,
                i.rttvar_us,
                i.snd_cwnd,
                i.total_retrans,
                i.min_rtt_us,
            ),
            (
                i.bytes_acked,
                i.bytes_received,
                i.bytes_sent,
                i.bytes_retrans,
            ),
            (i.segs_out, i.segs_in, i.notsent_bytes, i.delivery_rate),
        )
    };
    assert_eq!(counters(&w), counters(&d), "{what}");
    let near = |a: Option<u64>, b: Option<u64>| a.unwrap().abs_diff(b.unwrap()) <= 20_000;
    assert!(near(w.busy_time_us, d.busy_time_us), "{what}");
    assert!(near(w.rwnd_limited_us, d.rwnd_limited_us), "{what}");
    assert!(near(w.sndbuf_limited_us, d.sndbuf_limited_us), "{what}");
}

#[test]
fn the_socket_walk_and_sock_diag_agree_on_a_live_process() {
    if !support::can_load_bpf() {
        return;
    }
    let mut child = Command::new("python3")
        .args(["-c", HOLDER])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let inodes: Vec<u64> = line
        .trim()
        .strip_prefix("ready ")
        .expect("ready and ten inodes")
        .split(' ')
        .map(|i| i.parse().unwrap())
        .collect();
    assert_eq!(inodes.len(), 10);
    let pid = child.id();

    let mut it = TaskIter::start().expect("the task iterator loads here");
    assert!(
        it.strategy().contains("TCP sockets read in one run"),
        "{}",
        it.strategy()
    );
    // The open-files walk finds the process's TCP sockets.
    let inv = it.open_files(pid).unwrap().unwrap();
    let mut tcp = inv.tcp_inodes.clone().unwrap();
    tcp.sort();
    let mut want = inodes.clone();
    want.sort();
    assert_eq!(tcp, want, "every connected socket is a TCP one to ask for");

    let walk = walked(&mut it);
    let mut diag = SockDiag::default();
    let proc_dir = format!("/proc/{pid}");
    let answer = diag
        .sockets(
            netns_of(pid),
            Path::new(&proc_dir),
            &want,
            Wanted::ConnectableTcp,
        )
        .unwrap();
    for inode in &want {
        let (w, d) = (&walk[inode], &answer[inode]);
        agree(w, d);
    }
    // The cases are what they say: IPv6, data left unread, unsent.
    let [_, _, v6c, _, _, unread_a, _, _, stuck_c, _] = inodes[..] else {
        unreachable!()
    };
    assert!(walk[&v6c].local.is_ipv6());
    assert!(walk[&unread_a].rx_queue >= 65_536, "{:?}", walk[&unread_a]);
    let stuck = &walk[&stuck_c];
    assert!(stuck.tx_queue > 0 && stuck.info.as_ref().unwrap().notsent_bytes > Some(0));
    // Only the process's sockets.
    assert!(walk.keys().all(|i| want.contains(i)), "{:?}", walk.keys());

    // The idle pair closed: the run finds that its sockets are not the ones
    // listed any more.
    let idle = [inodes[6], inodes[7]];
    child.stdin.as_mut().unwrap().write_all(b"close\n").unwrap();
    line.clear();
    out.read_line(&mut line).unwrap();
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let now = it.tcp_sockets().unwrap().unwrap();
        if idle.iter().all(|i| !now.contains_key(i)) {
            assert!(now.contains_key(&inodes[0]), "the others stay");
            break;
        }
        assert!(Instant::now() < until, "closed sockets leave the walk");
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(child.stdin.take());
    child.wait().unwrap();
}
