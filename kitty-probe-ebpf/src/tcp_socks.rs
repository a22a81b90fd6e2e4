//! The watched processes' TCP sockets in one run a tick: the open-files
//! walk (`kitty_task_files`) gives each socket's address with its inode;
//! kitty lists the TCP ones in a mapped array, and `kitty_tcp_walk`
//! (bpf/tasks.bpf.c, linked to kitty's own main thread) reads each from
//! the socket itself into another: what sock_diag's answer says of it
//! (addresses, state, queues, tcp_info's numbers), with no netlink request
//! and answer per socket and no namespace to enter. A socket closed since
//! the walk is found out (its file's inode is not the one listed) and left
//! out.

use crate::iter_link::{IterLink, Target};
use crate::load::{self, ProbeError};
use crate::mapped::MappedArray;
use aya::programs::Iter;
use aya::Ebpf;
use foldhash::HashMapExt;
use kitty_core::model::TcpInfo;
use kitty_core::sources::tasks::TcpSockets;
use kitty_core::sources::tcp_table::{state_name, SocketRaw};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::AsFd;

const PROGRAM: &str = "kitty_tcp_walk";

/// Must match `struct tcp_row` in bpf/tasks.bpf.c.
const TCP_ROW: usize = 160;
/// Sockets one run reads (`SOCKS_MAX` in bpf/tasks.bpf.c); those listed
/// after them are left to sock_diag.
pub const SOCKS_MAX: usize = 4096;

const AF_INET6: u16 = 10;
const TCP_CLOSE: u8 = 7;
const TCP_LISTEN: u8 = 10;

/// The kernel's tick rates on the architectures kitty runs on (x86_64 and
/// arm64: kernel/Kconfig.hz).
const HZ_CHOICES: [u64; 4] = [100, 250, 300, 1000];

/// The run's link, its mapped arrays (the sockets listed, their count,
/// their rows), and the kernel's tick rate once two runs have shown it.
pub struct TcpSocks {
    link: IterLink,
    refs: MappedArray<[u64; 2]>,
    count: MappedArray<u32>,
    rows: MappedArray<[u8; TCP_ROW]>,
    hz: Hz,
}

/// The kernel's HZ, which the chrono times (busy, window and buffer
/// limited) are counted in: learnt from the jiffies and the clock that
/// rows carry, at the first row and at one at least [`Hz::SPAN_NS`] later.
/// There is no other way to ask it that every kernel has (its config may
/// not be readable); until then the socket phase asks sock_diag.
#[derive(Default)]
struct Hz {
    first: Option<(u64, u64)>,
    known: Option<u64>,
}

impl Hz {
    /// Long enough for one jiffy more or less to leave the rates apart
    /// (at 100 Hz, 20 ± 1 jiffies).
    const SPAN_NS: u64 = 200_000_000;

    /// Learns from a row's jiffies and clock; the rate, once known.
    fn learn(&mut self, jiffies: u64, now_ns: u64) -> Option<u64> {
        if self.known.is_some() {
            return self.known;
        }
        let (j0, t0) = *self.first.get_or_insert((jiffies, now_ns));
        let span = now_ns.saturating_sub(t0);
        if span >= Self::SPAN_NS {
            let rate = jiffies.saturating_sub(j0) as f64 * 1e9 / span as f64;
            self.known = HZ_CHOICES
                .into_iter()
                .find(|&hz| (rate - hz as f64).abs() <= hz as f64 * 0.1);
        }
        self.known
    }
}

impl TcpSocks {
    /// Loads the run, maps its arrays and links it to kitty's own main
    /// thread, then runs it once over no socket: a kernel that loads it
    /// but cannot run it is found here.
    pub fn start(ebpf: &mut Ebpf, btf: &aya::Btf) -> Result<TcpSocks, ProbeError> {
        let at = "iter/task (TCP sockets)";
        let refs = MappedArray::of(ebpf, "sock_refs")?;
        let mut count = MappedArray::of(ebpf, "sock_count")?;
        let rows = MappedArray::of(ebpf, "tcp_rows")?;
        let p: &mut Iter = load::program(ebpf, PROGRAM)?;
        p.load("task", btf).map_err(|e| load::reason(&e).at(at))?;
        let prog = p.fd().map_err(|e| load::reason(&e))?;
        let mut link = IterLink::new(prog.as_fd(), Target::Thread(std::process::id()))
            .map_err(|e| e.at(at))?;
        count.set(0, 0);
        let _nothing = link.read(1).map_err(|e| e.at(at))?;
        Ok(TcpSocks {
            link,
            refs,
            count,
            rows,
            hz: Hz::default(),
        })
    }

    /// The sockets listed (address, inode) that are still theirs and
    /// connecting, connected or closing, by inode, as sock_diag would give
    /// them (the first [`SOCKS_MAX`] listed: sock_diag answers for the
    /// rest, as for any socket not here); None until the kernel's tick
    /// rate is known (a run at least 0.2 s after the first row).
    pub fn read<'a>(
        &mut self,
        listed: impl IntoIterator<Item = &'a (u64, u64)>,
    ) -> Result<Option<TcpSockets>, ProbeError> {
        let mut n = 0;
        for (sk, ino) in listed.into_iter().take(SOCKS_MAX) {
            self.refs.set(n as u32, [*sk, *ino]);
            n += 1;
        }
        self.count.set(0, n as u32);
        let _nothing = self.link.read(1)?;
        let mut out = TcpSockets::with_capacity(n);
        for b in self.rows.written(n) {
            let row = TcpRow(b);
            if row.u64(0) == 0 {
                continue;
            }
            let Some(hz) = self.hz.learn(row.u64(8), row.u64(16)) else {
                return Ok(None);
            };
            if let Some(raw) = row.socket(hz) {
                out.insert(raw.inode, raw);
            }
        }
        Ok(self.hz.known.map(|_| out))
    }
}

/// One `struct tcp_row`, as the kernel wrote it (native endian): ino,
/// jiffies, now_ns, bytes acked, received, sent, retransmitted, delivery
/// rate (u64 each, from 0); rtt, rttvar, cwnd, total retrans, segs out,
/// segs in, notsent, min rtt, rqueue, wqueue, chrono start and stats[3]
/// (u32 each, from 64); source and destination addresses (16 bytes each,
/// from 120); ports, family (u16 each, from 152); state, chrono type (158).
struct TcpRow<'a>(&'a [u8]);

impl TcpRow<'_> {
    fn u64(&self, o: usize) -> u64 {
        u64::from_ne_bytes(self.0[o..o + 8].try_into().unwrap())
    }
    fn u32(&self, o: usize) -> u32 {
        u32::from_ne_bytes(self.0[o..o + 4].try_into().unwrap())
    }
    fn u16(&self, o: usize) -> u16 {
        u16::from_ne_bytes(self.0[o..o + 2].try_into().unwrap())
    }

    fn addr(&self, o: usize, family: u16) -> IpAddr {
        let a: [u8; 16] = self.0[o..o + 16].try_into().unwrap();
        match family {
            AF_INET6 => IpAddr::V6(Ipv6Addr::from(a)),
            _ => IpAddr::V4(Ipv4Addr::new(a[0], a[1], a[2], a[3])),
        }
    }

    /// The socket as sock_diag's answer gives it, or None for one it
    /// would not find (listening, or closed and out of the kernel's
    /// tables while its fd is still open).
    fn socket(&self, hz: u64) -> Option<SocketRaw> {
        let (state, chrono_type) = (self.0[158], self.0[159]);
        if matches!(state, TCP_CLOSE | TCP_LISTEN) {
            return None;
        }
        let family = self.u16(156);
        // tcp_get_info_chrono_stats: each chrono's jiffies, the running
        // one's up to now, in microseconds a jiffy as the kernel counts.
        let jiffies = self.u64(8) as u32;
        let start = self.u32(104);
        let mut stats = [0u64; 3];
        for (i, s) in stats.iter_mut().enumerate() {
            let mut j = u64::from(self.u32(108 + 4 * i));
            if usize::from(chrono_type) == i + 1 {
                j += u64::from(jiffies.wrapping_sub(start));
            }
            *s = j * (1_000_000 / hz);
        }
        Some(SocketRaw {
            inode: self.u64(0),
            local: SocketAddr::new(self.addr(120, family), self.u16(152)),
            remote: SocketAddr::new(self.addr(136, family), self.u16(154)),
            state: state_name(state),
            tx_queue: u64::from(self.u32(100)),
            rx_queue: u64::from(self.u32(96)),
            info: Some(TcpInfo {
                rtt_us: self.u32(64),
                rttvar_us: self.u32(68),
                snd_cwnd: self.u32(72),
                total_retrans: self.u32(76),
                segs_out: Some(self.u32(80)),
                segs_in: Some(self.u32(84)),
                notsent_bytes: Some(self.u32(88)),
                min_rtt_us: Some(self.u32(92)),
                bytes_acked: Some(self.u64(24)),
                bytes_received: Some(self.u64(32)),
                bytes_sent: Some(self.u64(40)),
                bytes_retrans: Some(self.u64(48)),
                delivery_rate: Some(self.u64(56)),
                busy_time_us: Some(stats.iter().sum()),
                rwnd_limited_us: Some(stats[1]),
                sndbuf_limited_us: Some(stats[2]),
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tick_rate_is_learnt_from_two_rows_far_enough_apart() {
        let mut hz = Hz::default();
        let (j0, t0) = (4_294_000_000u64, 5_000_000_000u64);
        assert_eq!(hz.learn(j0, t0), None, "one row says nothing");
        assert_eq!(
            hz.learn(j0 + 40, t0 + 150_000_000),
            None,
            "0.15 s is too short"
        );
        // 50 jiffies in 0.2 s, and one more or less: 250 Hz.
        for (dj, want) in [
            (50, 250),
            (51, 250),
            (49, 250),
            (20, 100),
            (60, 300),
            (200, 1000),
        ] {
            let mut hz = Hz::default();
            hz.learn(j0, t0);
            assert_eq!(hz.learn(j0 + dj, t0 + 200_000_000), Some(want), "{dj}");
            assert_eq!(hz.learn(j0, t0), Some(want), "kept once known");
        }
        // A rate that is none of the kernel's choices is not taken.
        let mut hz = Hz::default();
        hz.learn(j0, t0);
        assert_eq!(hz.learn(j0 + 35, t0 + 200_000_000), None);
    }

    /// A row as the kernel writes it: inode 7, jiffies 1,000, cwnd 10,
    /// chrono start 900 and stats (busy 100, rwnd 20, sndbuf 0 jiffies).
    fn row(family: u16, state: u8, chrono_type: u8) -> [u8; TCP_ROW] {
        let mut b = [0u8; TCP_ROW];
        let mut put = |o: usize, v: &[u8]| b[o..o + v.len()].copy_from_slice(v);
        put(0, &7u64.to_ne_bytes());
        put(8, &1_000u64.to_ne_bytes());
        put(24, &123_456u64.to_ne_bytes());
        put(64, &250u32.to_ne_bytes());
        put(72, &10u32.to_ne_bytes());
        put(96, &3u32.to_ne_bytes());
        put(100, &5u32.to_ne_bytes());
        put(104, &900u32.to_ne_bytes());
        put(108, &100u32.to_ne_bytes());
        put(112, &20u32.to_ne_bytes());
        match family {
            AF_INET6 => put(120, &Ipv6Addr::LOCALHOST.octets()),
            _ => put(120, &[10, 0, 0, 1]),
        }
        put(136, &[10, 0, 0, 2]);
        put(152, &5_000u16.to_ne_bytes());
        put(154, &6_000u16.to_ne_bytes());
        put(156, &family.to_ne_bytes());
        put(158, &[state, chrono_type]);
        b
    }

    #[test]
    fn a_row_reads_as_sock_diag_gives_the_socket() {
        let b = row(2, 1, 1);
        let raw = TcpRow(&b).socket(250).unwrap();
        assert_eq!(raw.inode, 7);
        assert_eq!(raw.local, "10.0.0.1:5000".parse().unwrap());
        assert_eq!(raw.remote, "10.0.0.2:6000".parse().unwrap());
        assert_eq!(
            (raw.state, raw.rx_queue, raw.tx_queue),
            ("ESTABLISHED", 3, 5)
        );
        let info = raw.info.unwrap();
        assert_eq!((info.rtt_us, info.snd_cwnd), (250, 10));
        assert_eq!(info.bytes_acked, Some(123_456));
        // Busy now (chrono type 1): its 100 jiffies and the 100 since it
        // started, 4,000 us a jiffy at 250 Hz; the busy time is all three.
        assert_eq!(info.rwnd_limited_us, Some(80_000));
        assert_eq!(info.sndbuf_limited_us, Some(0));
        assert_eq!(info.busy_time_us, Some(800_000 + 80_000));
        // Window limited now: its time runs on instead.
        let info = TcpRow(&row(2, 1, 2)).socket(250).unwrap().info.unwrap();
        assert_eq!(info.rwnd_limited_us, Some(480_000));
        assert_eq!(info.busy_time_us, Some(400_000 + 480_000));
        // IPv6: the whole addresses.
        let raw = TcpRow(&row(AF_INET6, 1, 0)).socket(250).unwrap();
        assert_eq!(raw.local.ip(), IpAddr::V6(Ipv6Addr::LOCALHOST));
    }

    #[test]
    fn listening_and_closed_sockets_are_not_what_sock_diag_finds() {
        assert!(TcpRow(&row(2, TCP_LISTEN, 0)).socket(250).is_none());
        assert!(TcpRow(&row(2, TCP_CLOSE, 0)).socket(250).is_none());
        assert!(TcpRow(&row(2, 8, 0)).socket(250).is_some(), "CLOSE_WAIT");
    }
}
