//! Bytes per (process, socket) from the kernel's per-CPU flow map, as
//! rates per tick, shown per (process, local endpoint, remote endpoint); the
//! flows active in the last `ACTIVE_NS` go into the frame (a connection that
//! opened and closed between two polls included), and `flow_coverage_pct`
//! says how much of this namespace's interface traffic the flows explain
//! (seed 002 reconciles attributed bytes against switch counters the same
//! way). The kernel counts by socket cookie and writes a socket's endpoints
//! once into a map of their own: read here once per socket.

use crate::load::{self, objects, ProbeError};
use crate::map_batch::{pod, MapBatch};
use aya::maps::{HashMap as BpfHashMap, IterableMap, MapData, PerCpuArray, PerCpuHashMap};
use aya::Ebpf;
use kitty_core::model::addr::addr_text;
use kitty_core::model::{FlowFrame, Frame, Sig, Text};
// Seeded per process, and several times faster than SipHash on these keys.
use foldhash::{HashMap, HashMapExt};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// A flow stays in the frame this long after its last byte.
const ACTIVE_NS: u64 = 10_000_000_000;
/// And in the kernel map this long (then it is removed).
const REAP_NS: u64 = 60_000_000_000;

/// Must match `struct flow_key` in bpf/flow.bpf.c.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FlowKey {
    /// The socket's cookie (never reused while the kernel runs).
    pub cookie: u64,
    pub tgid: u32,
    pub pad: u32,
}
// SAFETY: repr(C) plain data without implicit padding.
unsafe impl aya::Pod for FlowKey {}

/// Must match `struct flow_ends` in bpf/flow.bpf.c: where a socket was at
/// its first byte.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowEnds {
    pub netns: u32,
    pub family: u16,
    pub protocol: u16,
    pub lport: u16,
    pub rport: u16,
    pub laddr: [u8; 16],
    pub raddr: [u8; 16],
}
// SAFETY: repr(C) plain data without implicit padding (44 bytes, 4-aligned).
unsafe impl aya::Pod for FlowEnds {}

impl FlowEnds {
    pub fn local(&self) -> SocketAddr {
        addr(self.family, &self.laddr, self.lport)
    }

    pub fn remote(&self) -> SocketAddr {
        addr(self.family, &self.raddr, self.rport)
    }

    /// The order flows keep in the frame: by process (outside), namespace,
    /// protocol, then endpoints by their numbers.
    fn order(&self) -> (u32, u16, u16, [u8; 16], u16, [u8; 16], u16) {
        (
            self.netns,
            self.protocol,
            self.family,
            self.laddr,
            self.lport,
            self.raddr,
            self.rport,
        )
    }
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct FlowBytes {
    pub tx: u64,
    pub rx: u64,
}
// SAFETY: repr(C) plain data.
unsafe impl aya::Pod for FlowBytes {}

fn sum(per_cpu: impl Iterator<Item = FlowBytes>) -> FlowBytes {
    per_cpu.fold(FlowBytes::default(), |a, b| FlowBytes {
        tx: a.tx + b.tx,
        rx: a.rx + b.rx,
    })
}

fn addr(family: u16, raw: &[u8; 16], port: u16) -> SocketAddr {
    let ip = if family == libc::AF_INET as u16 {
        IpAddr::V4(Ipv4Addr::new(raw[0], raw[1], raw[2], raw[3]))
    } else {
        IpAddr::V6(Ipv6Addr::from(*raw))
    };
    SocketAddr::new(ip, port)
}

fn is_loopback(a: &SocketAddr) -> bool {
    match a.ip() {
        IpAddr::V4(v) => v.is_loopback(),
        IpAddr::V6(v) => v.is_loopback() || v.to_ipv4_mapped().is_some_and(|m| m.is_loopback()),
    }
}

struct Seen {
    bytes: FlowBytes,
    last_change_ns: u64,
    /// When the kernel's map last had it (it may evict an entry itself).
    last_read_ns: u64,
    rate: (f64, f64),
    /// Its endpoints (None where the kernel's map lost them: only when
    /// thousands of sockets open within a tick), and as the frame shows
    /// them (printed once per socket, not every tick).
    ends: Option<FlowEnds>,
    local: Text,
    remote: Text,
}

impl Seen {
    fn new(ends: Option<FlowEnds>, now: u64) -> Seen {
        let text = |a: Option<SocketAddr>| a.map_or_else(|| Text::from("?"), |a| addr_text(&a));
        Seen {
            bytes: FlowBytes::default(),
            last_change_ns: now,
            last_read_ns: now,
            rate: (0.0, 0.0),
            ends,
            local: text(ends.map(|e| e.local())),
            remote: text(ends.map(|e| e.remote())),
        }
    }
}

pub struct FlowProbe {
    _ebpf: Ebpf,
    flows: PerCpuHashMap<MapData, FlowKey, FlowBytes>,
    /// The flow map read in one call a tick (else why: it is then read
    /// entry by entry, two bpf() calls an entry).
    flows_batch: Result<MapBatch, ProbeError>,
    /// Each socket's endpoints by cookie, looked up at its first sight.
    ends: BpfHashMap<MapData, u64, FlowEnds>,
    closed: PerCpuArray<MapData, u64>,
    seen: HashMap<FlowKey, Seen>,
    prev_closed: Option<u64>,
    own_netns: Option<u32>,
    prev_ifaces: Option<u64>,
}

fn own_netns() -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self/ns/net")
        .ok()
        .map(|m| m.ino() as u32)
}

impl FlowProbe {
    pub fn start() -> Result<FlowProbe, ProbeError> {
        let mut ebpf = load::load_object(objects::FLOW, &[])?;
        load::attach_all(
            &mut ebpf,
            &[
                ("flow_send", "sock_send_length"),
                ("flow_recv", "sock_recv_length"),
                ("flow_state", "inet_sock_set_state"),
            ],
        )?;
        let flows: PerCpuHashMap<MapData, FlowKey, FlowBytes> = load::take_map(&mut ebpf, "flows")?;
        let flows_batch = MapBatch::new(IterableMap::map(&flows));
        let ends = load::take_map(&mut ebpf, "ends")?;
        let closed = load::take_map(&mut ebpf, "closed")?;
        Ok(FlowProbe {
            _ebpf: ebpf,
            flows,
            flows_batch,
            ends,
            closed,
            seen: HashMap::new(),
            prev_closed: None,
            own_netns: own_netns(),
            prev_ifaces: None,
        })
    }

    /// What it attached and how it reads the flow map, as `doctor` says.
    pub fn strategy(&self) -> String {
        let hooks = "tp_btf/sock_send_length+sock_recv_length";
        match &self.flows_batch {
            Ok(_) => format!("{hooks}, flows by batch lookup"),
            Err(why) => format!("{hooks}, flows by lookups (batch lookup: {why})"),
        }
    }

    /// Every flow's bytes, summed over the CPUs: in one batch lookup,
    /// else (or when it fails) entry by entry.
    fn entries(&mut self) -> Vec<(FlowKey, FlowBytes)> {
        self.entries_by_batch()
            .unwrap_or_else(|| self.entries_by_lookups())
    }

    /// None where this kernel has no batch lookups for the map.
    #[doc(hidden)]
    pub fn entries_by_batch(&mut self) -> Option<Vec<(FlowKey, FlowBytes)>> {
        let batch = self.flows_batch.as_mut().ok()?;
        let parts = batch.parts();
        let rows = batch.read().ok()?;
        // Room for every row at once (a collect through the filter grew
        // the vector by doubling).
        let mut out = Vec::with_capacity(rows.len());
        out.extend(rows.filter_map(|(k, v)| Some((pod(k)?, sum(parts.of(v).filter_map(pod))))));
        Some(out)
    }

    #[doc(hidden)]
    pub fn entries_by_lookups(&self) -> Vec<(FlowKey, FlowBytes)> {
        self.flows
            .iter()
            .filter_map(Result::ok)
            .map(|(k, per_cpu)| (k, sum(per_cpu.iter().copied())))
            .collect()
    }

    /// A socket's endpoints as the kernel wrote them at its first byte.
    #[doc(hidden)]
    pub fn ends_of(&self, cookie: u64) -> Option<FlowEnds> {
        self.ends.get(&cookie, 0).ok()
    }

    pub fn enrich(&mut self, frame: &mut Frame) {
        let now = frame.mono_ns;
        let secs = frame.interval_ms.max(1) as f64 / 1000.0;
        let mut reap = Vec::new();
        let mut attributed_ext = 0u64;
        for (k, b) in self.entries() {
            let ends = &self.ends;
            let entry = self
                .seen
                .entry(k)
                .or_insert_with(|| Seen::new(ends.get(&k.cookie, 0).ok(), now));
            let (dtx, drx) = (
                b.tx.saturating_sub(entry.bytes.tx),
                b.rx.saturating_sub(entry.bytes.rx),
            );
            entry.rate = (dtx as f64 / secs, drx as f64 / secs);
            if dtx + drx > 0 {
                entry.last_change_ns = now;
            }
            entry.bytes = b;
            entry.last_read_ns = now;
            if let Some(e) = entry.ends {
                if Some(e.netns) == self.own_netns && !is_loopback(&e.remote()) {
                    attributed_ext += dtx + drx;
                }
            }
            if now.saturating_sub(entry.last_change_ns) > REAP_NS {
                reap.push(k);
            }
        }
        for k in &reap {
            let _ = self.flows.remove(k);
            self.seen.remove(k);
        }
        if !reap.is_empty() {
            // Their endpoints too, unless another process uses the socket.
            let in_use: foldhash::HashSet<u64> = self.seen.keys().map(|k| k.cookie).collect();
            for k in reap.iter().filter(|k| !in_use.contains(&k.cookie)) {
                let _ = self.ends.remove(&k.cookie);
            }
        }
        forget_evicted(&mut self.seen, now);
        frame.flows = active_flows(&self.seen, frame, now);
        // Closed connections per second, and coverage of the interfaces.
        let closed: u64 = self.closed.get(&0, 0).map(|v| v.iter().sum()).unwrap_or(0);
        if let Some(p) = self.prev_closed {
            frame
                .host
                .signals
                .set(Sig::TcpClosedPerS, closed.saturating_sub(p) as f64 / secs);
        }
        self.prev_closed = Some(closed);
        let ifaces: u64 = frame
            .host
            .interfaces
            .iter()
            .filter(|i| i.name != "lo")
            .map(|i| i.rx_bytes + i.tx_bytes)
            .sum();
        if let Some(p) = self.prev_ifaces {
            let d = ifaces.saturating_sub(p);
            // Below 64 KiB/s the ratio is mostly headers and ARP: not shown.
            if d as f64 / secs > 65_536.0 {
                frame.host.signals.set(
                    Sig::FlowCoveragePct,
                    (attributed_ext as f64 / d as f64 * 100.0).min(100.0),
                );
            }
        }
        self.prev_ifaces = Some(ifaces);
    }
}

/// Forgets the flows the kernel's map has not had for `REAP_NS`: it
/// evicted them (an LRU map full of sockets opened faster than they are
/// reaped), and they would otherwise stay here for good. Not at once: a read
/// that fails for a tick must not make every flow new (its bytes would all
/// count as that tick's).
fn forget_evicted(seen: &mut HashMap<FlowKey, Seen>, now: u64) {
    seen.retain(|_, s| now.saturating_sub(s.last_read_ns) <= REAP_NS);
}

/// The flows with a byte in the last `ACTIVE_NS`, one a process and
/// pair of endpoints (sockets of one process that had the same
/// endpoints one after the other are summed), in the same places from
/// frame to frame (not by rate, which reorders them every tick): a
/// recording's delta then pairs each flow with itself. Who is busiest
/// is analysis's to say. By the numbers of process, namespace, protocol
/// and endpoints (a sort of their text was a fifth of this at 1,000
/// flows).
fn active_flows(seen: &HashMap<FlowKey, Seen>, frame: &Frame, now: u64) -> Vec<FlowFrame> {
    let comm: HashMap<u32, &Text> = frame.ranks.iter().map(|r| (r.key.pid, &r.comm)).collect();
    let mut active: Vec<(&FlowKey, &Seen)> = seen
        .iter()
        .filter(|(_, s)| now.saturating_sub(s.last_change_ns) <= ACTIVE_NS)
        .collect();
    active.sort_unstable_by_key(|(k, s)| (k.tgid, s.ends.unwrap_or_default().order(), k.cookie));
    let mut out: Vec<FlowFrame> = Vec::with_capacity(active.len());
    let mut last: Option<(u32, Option<FlowEnds>)> = None;
    for (k, s) in active {
        if last == Some((k.tgid, s.ends)) {
            if let Some(f) = out.last_mut() {
                f.tx_bytes += s.bytes.tx;
                f.rx_bytes += s.bytes.rx;
                f.tx_bytes_per_s += s.rate.0;
                f.rx_bytes_per_s += s.rate.1;
                continue;
            }
        }
        last = Some((k.tgid, s.ends));
        let protocol = match s.ends.map(|e| e.protocol as i32) {
            Some(libc::IPPROTO_UDP) => "udp",
            Some(_) => "tcp",
            None => "?",
        };
        out.push(FlowFrame {
            pid: k.tgid,
            comm: comm.get(&k.tgid).map(|c| (*c).clone()),
            netns: s.ends.map_or(0, |e| e.netns as u64),
            protocol: Text::of_static(protocol),
            local: s.local.clone(),
            remote: s.remote.clone(),
            tx_bytes: s.bytes.tx,
            rx_bytes: s.bytes.rx,
            tx_bytes_per_s: s.rate.0,
            rx_bytes_per_s: s.rate.1,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ends(lport: u16, rport: u16) -> FlowEnds {
        FlowEnds {
            netns: 4026531840,
            family: libc::AF_INET as u16,
            protocol: libc::IPPROTO_TCP as u16,
            lport,
            rport,
            laddr: [10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            raddr: [10, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        }
    }

    fn seen(ends: Option<FlowEnds>, tx: u64, last_change_ns: u64) -> Seen {
        let mut s = Seen::new(ends, last_change_ns);
        s.bytes = FlowBytes { tx, rx: 1 };
        s.rate = (tx as f64, 1.0);
        s
    }

    fn key(cookie: u64, tgid: u32) -> FlowKey {
        FlowKey {
            cookie,
            tgid,
            pad: 0,
        }
    }

    #[test]
    fn sockets_of_one_process_with_the_same_endpoints_are_one_flow() {
        let now = 100 * ACTIVE_NS;
        let mut by_key = HashMap::new();
        // Process 7: two sockets one after the other on one port pair, and
        // one on another; process 3 on the first pair; process 9 idle.
        by_key.insert(key(11, 7), seen(Some(ends(5000, 80)), 100, now));
        by_key.insert(key(12, 7), seen(Some(ends(5000, 80)), 20, now));
        by_key.insert(key(13, 7), seen(Some(ends(4000, 80)), 5, now));
        by_key.insert(key(14, 3), seen(Some(ends(5000, 80)), 1, now));
        by_key.insert(key(15, 9), seen(Some(ends(6000, 80)), 1, 0));
        // Endpoints the kernel's map lost.
        by_key.insert(key(16, 3), seen(None, 2, now));
        let flows = active_flows(&by_key, &Frame::default(), now);
        let rows: Vec<(u32, &str, &str, u64, f64)> = flows
            .iter()
            .map(|f| {
                let row = (f.pid, f.local.as_str(), f.remote.as_str(), f.tx_bytes);
                (row.0, row.1, row.2, row.3, f.tx_bytes_per_s)
            })
            .collect();
        assert_eq!(
            rows,
            [
                (3, "?", "?", 2, 2.0),
                (3, "10.0.0.1:5000", "10.0.0.2:80", 1, 1.0),
                (7, "10.0.0.1:4000", "10.0.0.2:80", 5, 5.0),
                (7, "10.0.0.1:5000", "10.0.0.2:80", 120, 120.0),
            ]
        );
        assert_eq!(flows[0].protocol.as_str(), "?");
        assert_eq!(flows[1].protocol.as_str(), "tcp");
        assert_eq!(flows[3].rx_bytes, 2);
    }

    #[test]
    fn flows_the_kernel_evicted_are_forgotten_after_a_while() {
        let now = 1000 * REAP_NS;
        let mut by_key = HashMap::new();
        let mut read_at = |cookie, at| {
            let mut s = seen(Some(ends(5000, 80)), 1, at);
            s.last_read_ns = at;
            by_key.insert(key(cookie, 7), s);
        };
        read_at(1, now);
        read_at(2, now - REAP_NS / 2);
        read_at(3, now - REAP_NS - 1);
        forget_evicted(&mut by_key, now);
        let mut left: Vec<u64> = by_key.keys().map(|k| k.cookie).collect();
        left.sort();
        assert_eq!(left, [1, 2]);
    }
}
