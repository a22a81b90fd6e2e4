//! tcp_info for every TCP socket of a network namespace via NETLINK_SOCK_DIAG.
//!
//! A netlink socket answers for the namespace it was created in, so for each
//! namespace a short-lived helper thread enters it (setns affects only the
//! calling thread), opens the socket and leaves; the socket is then reused on
//! every tick. This is what per-rank network numbers need: /proc/<pid>/net/snmp
//! is shared by every rank of a pod.

use super::inet_diag::{messages, Answer};
use super::tcp_table::SocketTable;
use foldhash::HashMapExt;
use netlink_packet_core::{NetlinkHeader, NetlinkMessage, NLM_F_DUMP, NLM_F_REQUEST};
use netlink_packet_sock_diag::{
    constants::{AF_INET, AF_INET6, IPPROTO_TCP},
    inet::{ExtensionFlags, InetRequest, SocketId, StateFlags},
    SockDiagMessage,
};
use netlink_sys::{protocols::NETLINK_SOCK_DIAG, Socket, SocketAddr};
use std::collections::HashMap;
use std::path::Path;

/// Why sock_diag could not answer.
#[derive(Debug, thiserror::Error)]
pub enum SockDiagError {
    #[error("sock_diag {0}: {1}")]
    Io(&'static str, std::io::Error),
    #[error("open netns: {0}")]
    Netns(std::io::Error),
    #[error("setns: {0} (needs CAP_SYS_ADMIN)")]
    Setns(std::io::Error),
    #[error("sock_diag: {0}")]
    Kernel(String),
    #[error("sock_diag decode: {0}")]
    Decode(String),
    #[error("netns helper thread panicked")]
    Helper,
}

type Result<T> = std::result::Result<T, SockDiagError>;

/// One open sock_diag socket per network namespace, with the socket ids
/// learnt from its last full dump.
#[derive(Default)]
pub struct SockDiag {
    by_netns: HashMap<u64, Ns>,
}

struct Ns {
    sock: Socket,
    /// The receive buffer, kept: a fresh zeroed 64 KiB a call was 1.4 % of `record`.
    rx: Vec<u8>,
    /// inode -> its exact lookup (a request for its full id, cookie
    /// included), built once from the last full dump.
    ids: HashMap<u64, Vec<u8>>,
    /// Wanted inodes the last dump did not have: not TCP (unix, udp) or listening.
    absent: std::collections::HashSet<u64>,
    dumped_at: Option<std::time::Instant>,
}

/// A full dump walks every bucket of the kernel's TCP hash (tens of ms on a
/// large table), so it runs only when a rank has a socket not seen before, and
/// otherwise, for sockets of unknown kind, once a minute to recheck those
/// that were not TCP-connected yet. In between, the watched sockets are
/// looked up one by one (a hash lookup each).
const FULL_DUMP_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

/// What the wanted sockets are known to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wanted {
    /// Any socket (the fd links say only "socket"): unix and UDP sockets,
    /// listeners, and TCP sockets not yet connected are not in a dump;
    /// one of them may connect later, so they are looked for again once
    /// a minute.
    AnySocket,
    /// TCP sockets that were connecting, connected or closing when the fd
    /// walk saw them: one the dump did not have closed since, and no
    /// later dump would find it (one that connects later is wanted anew).
    ConnectableTcp,
}

/// Requests per batch: the answers must fit the netlink receive buffer.
const BATCH: usize = 64;
/// The netlink receive buffer's size.
const RX_BUF: usize = 64 * 1024;
/// Room for one exact lookup's answer when they are taken several to a
/// call (~400 bytes today: the socket, its tcp_info, a few attributes).
const ANSWER_ROOM: usize = 4096;
/// Answers taken by one `recvmmsg`: as many as the receive buffer has room for.
const ANSWERS_PER_CALL: usize = RX_BUF / ANSWER_ROOM;

impl SockDiag {
    fn ns(&mut self, netns: u64, pid_dir: &Path) -> Result<&mut Ns> {
        Ok(match self.by_netns.entry(netns) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => v.insert(Ns {
                sock: open_in_netns(pid_dir)?,
                rx: vec![0u8; RX_BUF],
                ids: HashMap::new(),
                absent: Default::default(),
                dumped_at: None,
            }),
        })
    }

    /// All TCP sockets (v4 and v6) of the namespace that `pid_dir`'s process lives in.
    pub fn dump(&mut self, netns: u64, pid_dir: &Path) -> Result<SocketTable> {
        let ns = self.ns(netns, pid_dir)?;
        let mut out = SocketTable::new();
        let mut ids = HashMap::new();
        for family in [AF_INET, AF_INET6] {
            if let Err(e) = dump_family(&mut ns.sock, &mut ns.rx, family, &mut out, &mut ids) {
                // A broken socket is reopened next tick.
                self.by_netns.remove(&netns);
                return Err(e);
            }
        }
        ns.ids = ids;
        ns.dumped_at = Some(std::time::Instant::now());
        Ok(out)
    }

    /// The TCP sockets among `wanted` (inodes), cheaply: exact lookups of
    /// sockets known from the last dump, and a full dump only when a wanted
    /// socket is new or the last dump is old. Non-TCP inodes are ignored.
    pub fn sockets(
        &mut self,
        netns: u64,
        pid_dir: &Path,
        wanted: &[u64],
        kinds: Wanted,
    ) -> Result<SocketTable> {
        let ns = self.ns(netns, pid_dir)?;
        let fresh = ns
            .dumped_at
            .is_some_and(|t| kinds == Wanted::ConnectableTcp || t.elapsed() < FULL_DUMP_EVERY);
        let new_socket = wanted
            .iter()
            .any(|i| !ns.ids.contains_key(i) && !ns.absent.contains(i));
        if !fresh || new_socket {
            let mut all = self.dump(netns, pid_dir)?;
            all.retain(|inode, _| wanted.contains(inode));
            let ns = self
                .by_netns
                .get_mut(&netns)
                .expect("dump keeps the namespace");
            ns.absent = wanted
                .iter()
                .filter(|i| !all.contains_key(i))
                .copied()
                .collect();
            return Ok(all);
        }
        let ids: Vec<&[u8]> = wanted
            .iter()
            .filter_map(|i| ns.ids.get(i).map(Vec::as_slice))
            .collect();
        let mut out = SocketTable::with_capacity(ids.len());
        for chunk in ids.chunks(BATCH) {
            if let Err(e) = query_exact(&mut ns.sock, &mut ns.rx, chunk, &mut out) {
                self.by_netns.remove(&netns);
                return Err(e);
            }
        }
        Ok(out)
    }

    /// Forgets namespaces no watched process lives in any more.
    pub fn retain(&mut self, live: &[u64]) {
        self.by_netns.retain(|ns, _| live.contains(ns));
    }
}

fn new_socket() -> Result<Socket> {
    let mut s = Socket::new(NETLINK_SOCK_DIAG).map_err(|e| SockDiagError::Io("socket", e))?;
    s.bind_auto().map_err(|e| SockDiagError::Io("bind", e))?;
    s.connect(&SocketAddr::new(0, 0))
        .map_err(|e| SockDiagError::Io("connect", e))?;
    Ok(s)
}

/// Opens a sock_diag socket inside the network namespace of a process.
pub fn open_in_netns(pid_dir: &Path) -> Result<Socket> {
    use super::process::{in_netns_of, NetnsError};
    match in_netns_of(pid_dir, new_socket) {
        Ok(r) => r,
        Err(NetnsError::Open(e)) => Err(SockDiagError::Netns(e)),
        Err(NetnsError::Setns(e)) => Err(SockDiagError::Setns(e)),
        Err(NetnsError::Helper) => Err(SockDiagError::Helper),
    }
}

fn dump_family(
    sock: &mut Socket,
    rx: &mut [u8],
    family: u8,
    out: &mut SocketTable,
    ids: &mut HashMap<u64, Vec<u8>>,
) -> Result<()> {
    let socket_id = if family == AF_INET {
        SocketId::new_v4()
    } else {
        SocketId::new_v6()
    };
    let buf = request(family, socket_id, NLM_F_REQUEST | NLM_F_DUMP);
    sock.send(&buf, 0)
        .map_err(|e| SockDiagError::Io("send", e))?;

    receive(sock, rx, |answer| match answer {
        Answer::Done => Some(Ok(())),
        Answer::Error(code) => Some(Err(SockDiagError::Kernel(
            std::io::Error::from_raw_os_error(-code).to_string(),
        ))),
        Answer::Socket(raw, id) => {
            ids.insert(raw.inode, request(family, id, NLM_F_REQUEST));
            out.insert(raw.inode, raw);
            None
        }
        Answer::Other => None,
    })
}

/// Reads netlink messages and hands each one to `on`, until `on` says it
/// is done (Some) or the socket fails.
fn receive(
    sock: &mut Socket,
    rx: &mut [u8],
    mut on: impl FnMut(Answer) -> Option<Result<()>>,
) -> Result<()> {
    loop {
        let n = sock
            .recv(&mut &mut rx[..], 0)
            .map_err(|e| SockDiagError::Io("recv", e))?;
        for m in messages(&rx[..n.min(rx.len())]) {
            if let Some(done) = on(m.map_err(SockDiagError::Decode)?) {
                return done;
            }
        }
    }
}

fn request(family: u8, socket_id: SocketId, flags: u16) -> Vec<u8> {
    let mut hdr = NetlinkHeader::default();
    hdr.flags = flags;
    let mut msg = NetlinkMessage::new(
        hdr,
        SockDiagMessage::InetRequest(InetRequest {
            family,
            protocol: IPPROTO_TCP,
            extensions: ExtensionFlags::INFO,
            states: StateFlags::all() & !(StateFlags::LISTEN | StateFlags::TIME_WAIT),
            socket_id,
        })
        .into(),
    );
    msg.finalize();
    let mut buf = vec![0u8; msg.buffer_len()];
    msg.serialize(&mut buf);
    buf
}

/// Looks up each socket by its full id (addresses, ports, cookie), with
/// the requests built at the dump: one send for the batch, one answer
/// (or an error for a closed socket) each, counted, not matched by number.
/// The kernel answers every request within the send, so the answers are
/// taken many to a `recvmmsg` (a `recv` each was 16 syscalls a tick for the
/// 8-rank ring).
fn query_exact(
    sock: &mut Socket,
    rx: &mut [u8],
    requests: &[&[u8]],
    out: &mut SocketTable,
) -> Result<()> {
    let buf = requests.concat();
    sock.send(&buf, 0)
        .map_err(|e| SockDiagError::Io("send", e))?;
    let mut answers = 0;
    while answers < requests.len() {
        let (lens, got) = receive_many(sock, rx, requests.len() - answers)?;
        for (i, &len) in lens[..got].iter().enumerate() {
            let at = i * ANSWER_ROOM;
            for m in messages(&rx[at..at + len]) {
                answers += 1;
                // An error answer means the socket closed since the dump.
                if let Answer::Socket(raw, _) = m.map_err(SockDiagError::Decode)? {
                    out.insert(raw.inode, raw);
                }
            }
        }
    }
    Ok(())
}

/// Up to `n` datagrams into `rx` (of [`RX_BUF`] bytes), the i-th at
/// `i * ANSWER_ROOM`, in one call that waits for the first only: their
/// lengths, and how many came.
fn receive_many(
    sock: &Socket,
    rx: &mut [u8],
    n: usize,
) -> Result<([usize; ANSWERS_PER_CALL], usize)> {
    // SAFETY: iovec is plain data; all zeros is an empty one.
    let mut iov: [libc::iovec; ANSWERS_PER_CALL] = unsafe { std::mem::zeroed() };
    // SAFETY: mmsghdr is plain data; all zeros is an empty header.
    let mut msgs: [libc::mmsghdr; ANSWERS_PER_CALL] = unsafe { std::mem::zeroed() };
    let chunks = rx.chunks_exact_mut(ANSWER_ROOM);
    let n = n.clamp(1, chunks.len().min(ANSWERS_PER_CALL));
    for ((v, m), c) in iov.iter_mut().zip(msgs.iter_mut()).zip(chunks).take(n) {
        v.iov_base = c.as_mut_ptr().cast();
        v.iov_len = c.len();
        m.msg_hdr.msg_iov = v;
        m.msg_hdr.msg_iovlen = 1;
    }
    // SAFETY: the first `n` headers each point at their own iovec, which
    // points into `rx` (disjoint chunks of ANSWER_ROOM bytes); both arrays
    // outlive the call.
    let got = unsafe {
        libc::recvmmsg(
            std::os::fd::AsRawFd::as_raw_fd(sock),
            msgs.as_mut_ptr(),
            n as libc::c_uint,
            libc::MSG_WAITFORONE,
            std::ptr::null_mut(),
        )
    };
    if got < 0 {
        return Err(SockDiagError::Io(
            "recvmmsg",
            std::io::Error::last_os_error(),
        ));
    }
    let got = got as usize;
    let mut lens = [0; ANSWERS_PER_CALL];
    for (len, m) in lens.iter_mut().zip(&msgs[..got]) {
        if m.msg_hdr.msg_flags & libc::MSG_TRUNC != 0 {
            return Err(SockDiagError::Kernel(format!(
                "an answer longer than {ANSWER_ROOM} bytes"
            )));
        }
        *len = (m.msg_len as usize).min(ANSWER_ROOM);
    }
    Ok((lens, got))
}

#[cfg(test)]
mod tests {
    use super::super::inet_diag::decode_tcp_info;
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;

    /// A real dump of this namespace's sockets (a few v4 and v6
    /// connections held open), decoded by hand and by the crate: the same
    /// sockets, ids and tcp_info.
    #[test]
    fn the_hand_decoder_reads_a_real_dump_as_the_crate_does() {
        use netlink_packet_core::NetlinkPayload;
        use netlink_packet_sock_diag::inet::nlas::Nla;
        let mut held = Vec::new();
        for host in ["127.0.0.1:0", "[::1]:0"] {
            let Ok(l) = std::net::TcpListener::bind(host) else {
                continue; // no IPv6 here
            };
            for _ in 0..3 {
                let mut c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
                c.write_all(&[1u8; 10_000]).unwrap();
                held.push((c, l.accept().unwrap().0));
            }
            held.push((
                std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap(),
                l.accept().unwrap().0,
            ));
        }
        let sock = new_socket().unwrap();
        let mut rx = vec![0u8; RX_BUF];
        let mut compared = 0;
        for family in [AF_INET, AF_INET6] {
            let id = if family == AF_INET {
                SocketId::new_v4()
            } else {
                SocketId::new_v6()
            };
            sock.send(&request(family, id, NLM_F_REQUEST | NLM_F_DUMP), 0)
                .unwrap();
            'dump: loop {
                let n = sock.recv(&mut &mut rx[..], 0).unwrap();
                let mut off = 0;
                let mut mine = messages(&rx[..n]);
                while off < n {
                    let m = NetlinkMessage::<SockDiagMessage>::deserialize(&rx[off..n]).unwrap();
                    off += m.header.length as usize;
                    let got = mine.next().expect("as many messages").unwrap();
                    match m.payload {
                        NetlinkPayload::Done(_) => {
                            assert_eq!(got, Answer::Done);
                            break 'dump;
                        }
                        NetlinkPayload::InnerMessage(SockDiagMessage::InetResponse(r)) => {
                            let Answer::Socket(raw, id) = got else {
                                panic!("{got:?} for a socket")
                            };
                            let h = &r.header;
                            assert_eq!(id, h.socket_id);
                            assert_eq!(raw.inode, h.inode as u64);
                            assert_eq!(
                                raw.local,
                                std::net::SocketAddr::new(id.source_address, id.source_port)
                            );
                            assert_eq!(raw.state, super::super::tcp_table::state_name(h.state));
                            assert_eq!(
                                (raw.tx_queue, raw.rx_queue),
                                (h.send_queue as u64, h.recv_queue as u64)
                            );
                            let info = r.nlas.iter().find_map(|nla| match nla {
                                Nla::TcpInfo(b) => Some(decode_tcp_info(b)),
                                _ => None,
                            });
                            assert_eq!(raw.info, info);
                            compared += 1;
                        }
                        other => panic!("{other:?} in a dump"),
                    }
                }
                assert!(
                    mine.next().is_none(),
                    "no more messages than the crate found"
                );
            }
        }
        assert!(compared >= 8, "{compared} sockets compared");
    }

    #[test]
    fn live_loopback_connection_has_tcp_info() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut a, _) = l.accept().unwrap();
        c.write_all(&[7u8; 100_000]).unwrap();
        let mut got = vec![0u8; 100_000];
        a.read_exact(&mut got).unwrap();
        let inode = {
            let link = std::fs::read_link(format!("/proc/self/fd/{}", c.as_raw_fd())).unwrap();
            super::super::process::parse_socket_link(link.to_str().unwrap()).unwrap()
        };
        let mut sd = SockDiag::default();
        let netns = super::super::process::read_netns(Path::new("/proc/self")).unwrap();
        let all = sd
            .dump(netns, Path::new("/proc/self"))
            .expect("sock_diag works in own netns");
        let s = all.get(&inode).expect("our socket is in the dump");
        assert_eq!(s.local, c.local_addr().unwrap());
        assert_eq!(s.state, "ESTABLISHED");
        let info = s.info.as_ref().expect("tcp_info present");
        assert!(info.bytes_acked.unwrap() >= 100_000, "{info:?}");
        assert!(info.segs_out.unwrap() > 0);

        // Exact lookups (after the dump) answer the same for the wanted socket,
        // and a closed socket simply drops out.
        let l2 = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c2 = std::net::TcpStream::connect(l2.local_addr().unwrap()).unwrap();
        let inode2 = {
            let link = std::fs::read_link(format!("/proc/self/fd/{}", c2.as_raw_fd())).unwrap();
            super::super::process::parse_socket_link(link.to_str().unwrap()).unwrap()
        };
        let first = sd
            .sockets(
                netns,
                Path::new("/proc/self"),
                &[inode, inode2],
                Wanted::AnySocket,
            )
            .unwrap();
        assert_eq!(first.len(), 2, "a new socket triggers a dump that finds it");
        c.write_all(&[1u8; 5000]).unwrap();
        a.read_exact(&mut got[..5000]).unwrap();
        drop(c2);
        let again = sd
            .sockets(
                netns,
                Path::new("/proc/self"),
                &[inode, inode2],
                Wanted::AnySocket,
            )
            .unwrap();
        let s2 = again.get(&inode).expect("exact lookup finds the socket");
        assert_eq!(s2.local, s.local);
        assert!(
            s2.info.as_ref().unwrap().bytes_acked.unwrap() >= 105_000,
            "fresh counters, not the dump's"
        );
        assert!(
            again.get(&inode2).is_none_or(|x| x.state != "ESTABLISHED"),
            "closed socket is gone or closing"
        );
    }

    #[test]
    fn exact_lookups_of_more_sockets_than_one_call_takes_answer_each() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let per_call = ANSWERS_PER_CALL;
        // Both ends of each connection are sockets of this process.
        let pairs: Vec<_> = (0..per_call + 5)
            .map(|_| {
                let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
                (c, l.accept().unwrap().0)
            })
            .collect();
        let inode = |fd: i32| {
            let link = std::fs::read_link(format!("/proc/self/fd/{fd}")).unwrap();
            super::super::process::parse_socket_link(link.to_str().unwrap()).unwrap()
        };
        let mut wanted: Vec<u64> = pairs
            .iter()
            .flat_map(|(c, a)| [inode(c.as_raw_fd()), inode(a.as_raw_fd())])
            .collect();
        assert!(wanted.len() > 2 * per_call);
        let me = Path::new("/proc/self");
        let netns = super::super::process::read_netns(me).unwrap();
        let mut sd = SockDiag::default();
        let dumped = sd.sockets(netns, me, &wanted, Wanted::AnySocket).unwrap();
        assert_eq!(dumped.len(), wanted.len(), "the first call dumps");
        // A closed one among them answers with an error, counted too.
        let (gone_c, gone_a) = (inode(pairs[0].0.as_raw_fd()), inode(pairs[0].1.as_raw_fd()));
        let mut pairs = pairs;
        pairs.remove(0);
        let looked_up = sd.sockets(netns, me, &wanted, Wanted::AnySocket).unwrap();
        wanted.retain(|i| *i != gone_c && *i != gone_a);
        for i in &wanted {
            let s = looked_up.get(i).expect("each open socket answered");
            assert_eq!(s.state, "ESTABLISHED");
            assert!(s.info.is_some());
        }
        assert!(looked_up.len() <= wanted.len() + 2);
    }

    #[test]
    fn only_sockets_of_unknown_kind_are_looked_for_again_by_a_dump_each_minute() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let link = std::fs::read_link(format!("/proc/self/fd/{}", c.as_raw_fd())).unwrap();
        let inode = super::super::process::parse_socket_link(link.to_str().unwrap()).unwrap();
        // A socket no dump has (a listener): it stays wanted and absent.
        let link = std::fs::read_link(format!("/proc/self/fd/{}", l.as_raw_fd())).unwrap();
        let listener = super::super::process::parse_socket_link(link.to_str().unwrap()).unwrap();
        let me = Path::new("/proc/self");
        let netns = super::super::process::read_netns(me).unwrap();
        let mut sd = SockDiag::default();
        let wanted = [inode, listener];
        let got = sd.sockets(netns, me, &wanted, Wanted::AnySocket).unwrap();
        assert!(got.contains_key(&inode) && !got.contains_key(&listener));
        let a_minute_ago = std::time::Instant::now() - FULL_DUMP_EVERY * 2;
        let mut dumped_again = |kinds| {
            sd.by_netns.get_mut(&netns).unwrap().dumped_at = Some(a_minute_ago);
            let got = sd.sockets(netns, me, &wanted, kinds).unwrap();
            assert!(got.contains_key(&inode), "{kinds:?}");
            sd.by_netns[&netns].dumped_at != Some(a_minute_ago)
        };
        assert!(!dumped_again(Wanted::ConnectableTcp));
        assert!(dumped_again(Wanted::AnySocket));
    }
}
