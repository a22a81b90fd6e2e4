//! Bytes per (process, local endpoint, remote endpoint) from the kernel's
//! per-CPU flow map, as rates per tick; the flows active in the last
//! `ACTIVE_NS` go into the frame (a connection that opened and closed between
//! two polls included), and `flow_coverage_pct` says how much of this
//! namespace's interface traffic the flows explain (seed 002 reconciles
//! attributed bytes against switch counters the same way).

use crate::load::{self, objects, ProbeError};
use crate::map_batch::{pod, MapBatch};
use aya::maps::{IterableMap, MapData, PerCpuArray, PerCpuHashMap};
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
    pub tgid: u32,
    pub netns: u32,
    pub family: u16,
    pub protocol: u16,
    pub lport: u16,
    pub rport: u16,
    pub laddr: [u8; 16],
    pub raddr: [u8; 16],
}
// SAFETY: repr(C) plain data without implicit padding.
unsafe impl aya::Pod for FlowKey {}

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
    rate: (f64, f64),
    /// Its endpoints as the frame shows them (printed once per flow, not
    /// every tick).
    local: Text,
    remote: Text,
}

pub struct FlowProbe {
    _ebpf: Ebpf,
    flows: PerCpuHashMap<MapData, FlowKey, FlowBytes>,
    /// The flow map read in one call a tick (else why: it is then read
    /// entry by entry, two bpf() calls an entry).
    flows_batch: Result<MapBatch, ProbeError>,
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
        let closed = load::take_map(&mut ebpf, "closed")?;
        Ok(FlowProbe {
            _ebpf: ebpf,
            flows,
            flows_batch,
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
        Some(
            rows.filter_map(|(k, v)| Some((pod(k)?, sum(parts.of(v).filter_map(pod)))))
                .collect(),
        )
    }

    #[doc(hidden)]
    pub fn entries_by_lookups(&self) -> Vec<(FlowKey, FlowBytes)> {
        self.flows
            .iter()
            .filter_map(Result::ok)
            .map(|(k, per_cpu)| (k, sum(per_cpu.iter().copied())))
            .collect()
    }

    pub fn enrich(&mut self, frame: &mut Frame) {
        let now = frame.mono_ns;
        let secs = frame.interval_ms.max(1) as f64 / 1000.0;
        let mut reap = Vec::new();
        let mut attributed_ext = 0u64;
        for (k, b) in self.entries() {
            let entry = self.seen.entry(k).or_insert_with(|| Seen {
                bytes: FlowBytes::default(),
                last_change_ns: now,
                rate: (0.0, 0.0),
                local: addr_text(&addr(k.family, &k.laddr, k.lport)),
                remote: addr_text(&addr(k.family, &k.raddr, k.rport)),
            });
            let (dtx, drx) = (
                b.tx.saturating_sub(entry.bytes.tx),
                b.rx.saturating_sub(entry.bytes.rx),
            );
            entry.rate = (dtx as f64 / secs, drx as f64 / secs);
            if dtx + drx > 0 {
                entry.last_change_ns = now;
            }
            entry.bytes = b;
            let remote = addr(k.family, &k.raddr, k.rport);
            if Some(k.netns) == self.own_netns && !is_loopback(&remote) {
                attributed_ext += dtx + drx;
            }
            if now.saturating_sub(entry.last_change_ns) > REAP_NS {
                reap.push(k);
            }
        }
        for k in reap {
            let _ = self.flows.remove(&k);
            self.seen.remove(&k);
        }
        let comm: HashMap<u32, &Text> = frame.ranks.iter().map(|r| (r.key.pid, &r.comm)).collect();
        // The same flows in the same places from frame to frame (not by
        // rate, which reorders them every tick): a recording's delta then
        // pairs each flow with itself. Who is busiest is analysis's to say.
        // By the numbers of process, namespace, protocol and endpoints (a
        // sort of their text was a fifth of this at 1,000 flows).
        let mut active: Vec<(&FlowKey, &Seen)> = self
            .seen
            .iter()
            .filter(|(_, s)| now.saturating_sub(s.last_change_ns) <= ACTIVE_NS)
            .collect();
        active.sort_unstable_by_key(|(k, _)| {
            (
                k.tgid, k.netns, k.protocol, k.family, k.laddr, k.lport, k.raddr, k.rport,
            )
        });
        let out: Vec<FlowFrame> = active
            .into_iter()
            .map(|(k, s)| FlowFrame {
                pid: k.tgid,
                comm: comm.get(&k.tgid).map(|c| (*c).clone()),
                netns: k.netns as u64,
                protocol: if k.protocol == libc::IPPROTO_UDP as u16 {
                    "udp"
                } else {
                    "tcp"
                }
                .into(),
                local: s.local.clone(),
                remote: s.remote.clone(),
                tx_bytes: s.bytes.tx,
                rx_bytes: s.bytes.rx,
                tx_bytes_per_s: s.rate.0,
                rx_bytes_per_s: s.rate.1,
            })
            .collect();
        frame.flows = out;
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
