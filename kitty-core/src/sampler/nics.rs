//! The RDMA phase of a tick: every port's counters as rates against the
//! previous tick (a counter that went backwards gives no rate), the port's
//! health (down, slower or narrower than the node's other ports, flapping),
//! which ports each rank uses, and the rank's RDMA signals summed over its
//! ports, so the analysis compares ranks on them like on any signal.

use super::procs::Sample;
use crate::model::rates::rate;
use crate::model::{Event, EventKind, NicFrame, RankFrame, Sig, Signals, SourceStatus, Text};
use crate::sources::rdma::{self, hca, PortSample};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::Path;
use std::time::Duration;

/// A link that went down this often in this window is flapping.
const FLAP_WINDOW: Duration = Duration::from_secs(300);
/// How often the uverbs -> device table is read again.
const UVERBS_EVERY: Duration = Duration::from_secs(5);

/// A NIC signal from counter rates: the sum of the named counters' rates
/// times a scale (port_xmit_data counts 4-octet words).
struct Sum {
    sig: Sig,
    counters: &'static [&'static str],
    scale: f64,
}

const fn sum(sig: Sig, counters: &'static [&'static str], scale: f64) -> Sum {
    Sum {
        sig,
        counters,
        scale,
    }
}

const SUMS: &[Sum] = &[
    sum(Sig::RdmaXmitWaitPerS, &["port_xmit_wait"], 1.0),
    sum(Sig::RdmaCnpPerS, &["np_cnp_sent", "rp_cnp_handled"], 1.0),
    sum(Sig::RdmaEcnMarkedPerS, &["np_ecn_marked_roce_packets"], 1.0),
    sum(
        Sig::RdmaRetransPerS,
        &[
            "out_of_sequence",
            "packet_seq_err",
            "local_ack_timeout_err",
            "rnr_nak_retry_err",
            "roce_adp_retrans",
            "retrans_pkts",
        ],
        1.0,
    ),
    sum(
        Sig::RdmaErrorsPerS,
        &[
            "port_rcv_errors",
            "symbol_error",
            "link_error_recovery",
            "local_link_integrity_errors",
            "excessive_buffer_overrun_errors",
        ],
        1.0,
    ),
    sum(
        Sig::RdmaDiscardsPerS,
        &["port_xmit_discards", "rx_drops"],
        1.0,
    ),
    sum(Sig::RdmaOutOfBufferPerS, &["out_of_buffer"], 1.0),
    sum(Sig::RdmaTxBytesPerS, &["port_xmit_data"], 4.0),
    sum(Sig::RdmaTxBytesPerS, &["tx_bytes"], 1.0),
    sum(Sig::RdmaRxBytesPerS, &["port_rcv_data"], 4.0),
    sum(Sig::RdmaRxBytesPerS, &["rx_bytes"], 1.0),
    sum(
        Sig::RdmaTxPacketsPerS,
        &["port_xmit_packets", "tx_pkts"],
        1.0,
    ),
    sum(
        Sig::RdmaRxPacketsPerS,
        &["port_rcv_packets", "rx_pkts"],
        1.0,
    ),
];

struct PortPrev {
    mono: u64,
    counters: BTreeMap<String, u64>,
}

/// Each owner pid's (device, port) pairs.
type QpsByPid = HashMap<u32, Vec<(String, Option<u32>)>>;

#[derive(Default)]
pub struct Nics {
    prev: HashMap<String, PortPrev>,
    /// (mono, times the link went down) per port, over the flap window.
    downs: HashMap<String, VecDeque<(u64, u64)>>,
    /// The problem each port had at the previous tick.
    problems: HashMap<String, String>,
    uverbs: BTreeMap<u32, String>,
    uverbs_ns: Option<u64>,
    /// Queue pairs by owner pid (RDMA netlink), and why the kernel gave
    /// none when it could not.
    qps: QpsByPid,
    qps_error: Option<String>,
    status: Option<SourceStatus>,
    /// When sysfs last had no RDMA class (no driver loaded): looked for
    /// again every [`ABSENT_RECHECK_NS`], not every tick.
    absent_at: Option<u64>,
}

/// How often a node without an RDMA driver is looked at again: a driver
/// loaded while kitty runs shows within this (a failed sysfs lookup cost
/// ~1 % of `record` when made every tick).
const ABSENT_RECHECK_NS: u64 = 10_000_000_000;

impl Nics {
    /// Reads every port and builds its frame (rates, health, events).
    pub fn read(
        &mut self,
        sys: &Path,
        mono: u64,
        wall: u64,
        events: &mut Vec<Event>,
    ) -> Vec<NicFrame> {
        // Pause counters only from netdevs this sysfs shows and this
        // namespace has (a stand-in tree names none).
        let mut pause = |nd: &str| {
            if sys.join("class/net").join(nd).exists() {
                rdma::ethtool::pause_stats(nd)
            } else {
                BTreeMap::new()
            }
        };
        if self
            .absent_at
            .is_some_and(|t| mono.saturating_sub(t) < ABSENT_RECHECK_NS)
        {
            return Vec::new();
        }
        let Some(ports) = rdma::read_ports(sys, &mut pause) else {
            self.status = Some(SourceStatus::unavailable(format!(
                "no RDMA devices: {} does not exist (no InfiniBand/RDMA driver loaded)",
                sys.join("class/infiniband").display()
            )));
            self.prev.clear();
            self.absent_at = Some(mono);
            return Vec::new();
        };
        self.absent_at = None;
        let owners = match (&self.qps_error, self.qps.len()) {
            (Some(_), _) => "; no RDMA netlink: ranks by uverbs fds and NCCL_IB_HCA".into(),
            (None, 0) => String::new(),
            (None, n) => format!("; QP owners over RDMA netlink ({n} processes)"),
        };
        let has_ports = !ports.is_empty();
        self.status = Some(if ports.is_empty() {
            SourceStatus::unavailable(format!(
                "no RDMA ports under {}",
                sys.join("class/infiniband").display()
            ))
        } else {
            SourceStatus::ok().with_strategy(format!("sysfs, {} ports{owners}", ports.len()))
        });
        let best = best_links(&ports);
        let mut next = HashMap::new();
        let mut frames = Vec::with_capacity(ports.len());
        for p in ports {
            let id = p.id();
            let prev = self.prev.get(&id);
            let dt = prev.map(|q| mono.saturating_sub(q.mono) as f64 / 1e9);
            let mut signals = Signals::new();
            if let (Some(q), Some(dt)) = (prev, dt) {
                counter_signals(&q.counters, &p.counters, dt, &mut signals);
            }
            let flaps = self.flaps(&id, mono, p.counters.get("link_downed").copied());
            signals.set_opt(Sig::RdmaRateGbps, p.rate_gbps);
            signals.set_opt(Sig::RdmaWidth, p.width.map(f64::from));
            if let Some((code, _)) = &p.state {
                signals.set(Sig::RdmaActive, if *code == 4 { 1.0 } else { 0.0 });
            }
            signals.set_opt(Sig::RdmaFlaps, flaps.map(|n| n as f64));
            let problem = problem(&p, &best, flaps);
            signals.set(
                Sig::RdmaPortDegraded,
                if problem.is_some() { 1.0 } else { 0.0 },
            );
            self.announce(&id, problem.as_deref(), wall, events);
            frames.push(NicFrame {
                device: Text::new(&p.device),
                port: p.port,
                link_layer: p.link_layer.as_deref().map(Text::new),
                state: p.state.as_ref().map(|(_, s)| Text::new(s)),
                phys_state: p.phys_state.as_ref().map(|(_, s)| Text::new(s)),
                netdev: p.netdev.as_deref().map(Text::new),
                numa_node: p.numa_node,
                counters: p.counters.iter().map(|(k, v)| (Text::new(k), *v)).collect(),
                signals,
                problem: problem.map(Text::message),
                pids: Vec::new(),
            });
            next.insert(
                id,
                PortPrev {
                    mono,
                    counters: p.counters,
                },
            );
        }
        self.prev = next;
        self.downs.retain(|k, _| self.prev.contains_key(k));
        self.problems.retain(|k, _| self.prev.contains_key(k));
        if self
            .uverbs_ns
            .is_none_or(|t| mono.saturating_sub(t) >= UVERBS_EVERY.as_nanos() as u64)
        {
            self.uverbs = rdma::uverbs_devices(sys);
            self.uverbs_ns = Some(mono);
            // The kernel's own account of who owns which queue pair, on a
            // node that has ports (a cheap dump, as often as the uverbs map).
            if has_ports {
                self.qps.clear();
                self.qps_error = None;
                match rdma::netlink::qp_owners() {
                    Ok(owners) => {
                        for o in owners {
                            let e = self.qps.entry(o.pid).or_default();
                            if !e.contains(&(o.device.clone(), o.port)) {
                                e.push((o.device, o.port));
                            }
                        }
                    }
                    Err(e) => self.qps_error = Some(e),
                }
            }
        }
        frames
    }

    pub fn status(&self) -> Option<SourceStatus> {
        self.status.clone()
    }

    /// The ports each rank uses, by pid.
    pub fn rank_ports(&self, nics: &[NicFrame], samples: &[Sample]) -> HashMap<u32, Vec<String>> {
        let all: Vec<(String, u32)> = nics
            .iter()
            .map(|n| (n.device.to_string(), n.port))
            .collect();
        samples
            .iter()
            .map(|(w, s)| {
                let opened: Vec<String> = s
                    .uverbs
                    .iter()
                    .filter_map(|n| self.uverbs.get(n).cloned())
                    .collect();
                let qps = self.qps.get(&w.key.pid).map_or(&[][..], Vec::as_slice);
                (w.key.pid, hca::rank_ports(&all, qps, &opened, &w.nccl))
            })
            .collect()
    }

    /// Times the link went down within the flap window (None until a
    /// second reading).
    fn flaps(&mut self, id: &str, mono: u64, downed: Option<u64>) -> Option<u64> {
        let downed = downed?;
        let h = self.downs.entry(id.to_string()).or_default();
        h.push_back((mono, downed));
        let window = FLAP_WINDOW.as_nanos() as u64;
        while h.len() > 2
            && h.front()
                .is_some_and(|(t, _)| mono.saturating_sub(*t) > window)
        {
            h.pop_front();
        }
        let (_, first) = *h.front()?;
        // A reset counter (driver reload) starts the window again.
        if downed < first {
            h.clear();
            h.push_back((mono, downed));
            return Some(0);
        }
        (h.len() > 1).then_some(downed - first)
    }

    fn announce(&mut self, id: &str, problem: Option<&str>, wall: u64, events: &mut Vec<Event>) {
        let before = self.problems.get(id).cloned();
        match (before.as_deref(), problem) {
            (b, Some(p)) if b != Some(p) => {
                events.push(Event::new(
                    wall,
                    EventKind::PortDegraded,
                    format!("RDMA port {id}: {p}"),
                ));
                self.problems.insert(id.to_string(), p.to_string());
            }
            (Some(_), None) => {
                events.push(Event::new(
                    wall,
                    EventKind::PortRecovered,
                    format!("RDMA port {id} is healthy again"),
                ));
                self.problems.remove(id);
            }
            _ => {}
        }
    }
}

/// The counter sums of one port over one interval, and the pause counters.
fn counter_signals(
    prev: &BTreeMap<String, u64>,
    cur: &BTreeMap<String, u64>,
    dt: f64,
    out: &mut Signals,
) {
    let r = |name: &str| -> Option<Option<f64>> {
        let (p, c) = (prev.get(name)?, cur.get(name)?);
        Some(rate(*p, *c, dt))
    };
    for s in SUMS {
        if out.contains(s.sig) {
            continue;
        }
        let parts: Vec<Option<f64>> = s.counters.iter().filter_map(|c| r(c)).collect();
        // Absent when the device has none of them; no rate when one went
        // backwards (a reset), not a partial sum.
        if !parts.is_empty() && parts.iter().all(Option::is_some) {
            out.set(s.sig, parts.iter().flatten().sum::<f64>() * s.scale);
        }
    }
    let pause = |dur: bool| -> Option<f64> {
        let names: Vec<&String> = cur
            .keys()
            .filter(|k| k.starts_with("eth.") && k.contains("prio") && k.contains("_pause"))
            .filter(|k| k.ends_with("_duration") == dur)
            .collect();
        let parts: Vec<Option<f64>> = names.iter().filter_map(|k| r(k)).collect();
        (!parts.is_empty() && parts.iter().all(Option::is_some))
            .then(|| parts.iter().flatten().sum())
    };
    out.set_opt(Sig::RdmaPausePerS, pause(false));
    out.set_opt(Sig::RdmaPauseUsPerS, pause(true));
}

/// The best rate and width among the node's active ports, per link layer.
fn best_links(ports: &[PortSample]) -> HashMap<Option<String>, (f64, u32)> {
    let mut best: HashMap<Option<String>, (f64, u32)> = HashMap::new();
    for p in ports
        .iter()
        .filter(|p| p.state.as_ref().is_some_and(|(c, _)| *c == 4))
    {
        let e = best.entry(p.link_layer.clone()).or_insert((0.0, 0));
        e.0 = e.0.max(p.rate_gbps.unwrap_or(0.0));
        e.1 = e.1.max(p.width.unwrap_or(0));
    }
    best
}

/// Why a port is degraded, if it is.
fn problem(
    p: &PortSample,
    best: &HashMap<Option<String>, (f64, u32)>,
    flaps: Option<u64>,
) -> Option<String> {
    let mut why = Vec::new();
    if let Some((code, name)) = &p.state {
        if *code != 4 {
            why.push(format!("state {name}"));
        }
    }
    if let Some((code, name)) = &p.phys_state {
        if *code != 5 && p.state.as_ref().is_none_or(|(c, _)| *c == 4) {
            why.push(format!("physical state {name}"));
        }
    }
    let active = p.state.as_ref().is_some_and(|(c, _)| *c == 4);
    if let (true, Some(&(rate, width))) = (active, best.get(&p.link_layer)) {
        if let Some(r) = p.rate_gbps.filter(|r| *r < rate) {
            why.push(format!(
                "rate {r} Gb/s where the node's other ports run {rate} Gb/s"
            ));
        }
        if let Some(w) = p.width.filter(|w| *w < width) {
            why.push(format!(
                "width {w}X where the node's other ports are {width}X"
            ));
        }
    }
    if let Some(n) = flaps.filter(|n| *n > 0) {
        why.push(format!("link went down {n} times in 5 minutes"));
    }
    (!why.is_empty()).then(|| why.join("; "))
}

/// Writes each rank's ports and RDMA signals, and each port's ranks.
pub fn join(nics: &mut [NicFrame], ranks: &mut [RankFrame], map: &HashMap<u32, Vec<String>>) {
    for r in ranks.iter_mut() {
        let Some(ids) = map.get(&r.key.pid).filter(|v| !v.is_empty()) else {
            continue;
        };
        r.nics = ids.iter().map(|i| Text::new(i)).collect();
        let mine: Vec<&mut NicFrame> = nics.iter_mut().filter(|n| ids.contains(&n.id())).collect();
        // Rates add up over the rank's ports; a flag is the worst port's.
        for sig in Sig::from_rdma_ports() {
            let vals: Vec<f64> = mine.iter().filter_map(|n| n.signals.get(sig)).collect();
            if vals.is_empty() {
                continue;
            }
            let v = if sig.unit() == crate::model::Unit::Flag {
                vals.iter().copied().fold(0.0, f64::max)
            } else {
                vals.iter().sum()
            };
            r.signals.set(sig, v);
        }
        for n in mine {
            n.pids.push(r.key.pid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::rdma::standin::{Kind, Tree};

    const S: u64 = 1_000_000_000;

    fn port<'a>(nics: &'a [NicFrame], id: &str) -> &'a NicFrame {
        nics.iter().find(|n| n.id() == id).expect(id)
    }

    #[test]
    fn a_node_without_rdma_is_looked_at_again_every_ten_seconds() {
        let d = tempfile::tempdir().unwrap();
        let mut n = Nics::default();
        let mut ev = Vec::new();
        assert!(n.read(d.path(), S, 0, &mut ev).is_empty());
        let said = n.status.clone();
        assert!(said.is_some(), "the source says why");
        // The driver loads: seen at the next look, not before.
        let t = Tree::new(d.path());
        t.add_device("mlx5_0", Kind::Mlx5Ib, 1, "200 Gb/sec (4X HDR)", 0)
            .unwrap();
        assert!(n.read(d.path(), 5 * S, 0, &mut ev).is_empty());
        assert_eq!(n.status, said, "the status stays between looks");
        let f = n.read(d.path(), 11 * S, 0, &mut ev);
        assert_eq!(f.len(), 1, "found at the 10 s look");
        assert_eq!(n.read(d.path(), 12 * S, 0, &mut ev).len(), 1);
    }

    #[test]
    fn counter_rates_and_counters_that_go_backwards() {
        let d = tempfile::tempdir().unwrap();
        let t = Tree::new(d.path());
        t.add_device("mlx5_0", Kind::Mlx5Ib, 1, "200 Gb/sec (4X HDR)", 0)
            .unwrap();
        let mut n = Nics::default();
        let mut ev = Vec::new();
        let first = n.read(d.path(), S, 0, &mut ev);
        assert!(port(&first, "mlx5_0/1")
            .signals
            .get(Sig::RdmaXmitWaitPerS)
            .is_none());
        t.set("mlx5_0", 1, "counters/port_xmit_wait", "500000")
            .unwrap();
        t.set("mlx5_0", 1, "counters/port_xmit_data", "250")
            .unwrap();
        t.set("mlx5_0", 1, "hw_counters/np_cnp_sent", "30").unwrap();
        t.set("mlx5_0", 1, "hw_counters/rp_cnp_handled", "20")
            .unwrap();
        let f = n.read(d.path(), 3 * S, 0, &mut ev);
        let p = port(&f, "mlx5_0/1");
        assert_eq!(p.signals.get(Sig::RdmaXmitWaitPerS), Some(250_000.0));
        assert_eq!(
            p.signals.get(Sig::RdmaTxBytesPerS),
            Some(500.0),
            "4-octet words"
        );
        assert_eq!(p.signals.get(Sig::RdmaCnpPerS), Some(25.0));
        assert_eq!(p.signals.get(Sig::RdmaPortDegraded), Some(0.0));
        // A driver reload resets the counters: no rate, not a huge one.
        t.set("mlx5_0", 1, "counters/port_xmit_wait", "7").unwrap();
        t.set("mlx5_0", 1, "hw_counters/np_cnp_sent", "0").unwrap();
        let f = n.read(d.path(), 4 * S, 0, &mut ev);
        let p = port(&f, "mlx5_0/1");
        assert_eq!(p.signals.get(Sig::RdmaXmitWaitPerS), None);
        assert_eq!(p.signals.get(Sig::RdmaCnpPerS), None, "one part went back");
        assert_eq!(p.signals.get(Sig::RdmaTxBytesPerS), Some(0.0));
        assert!(ev.is_empty(), "{ev:?}");
    }

    #[test]
    fn a_device_without_hw_counters_has_absent_signals() {
        let d = tempfile::tempdir().unwrap();
        let t = Tree::new(d.path());
        t.add_device("mlx4_0", Kind::Plain, 1, "56 Gb/sec (4X FDR)", 0)
            .unwrap();
        let mut n = Nics::default();
        let mut ev = Vec::new();
        n.read(d.path(), S, 0, &mut ev);
        let f = n.read(d.path(), 2 * S, 0, &mut ev);
        let p = port(&f, "mlx4_0/1");
        assert_eq!(p.signals.get(Sig::RdmaXmitWaitPerS), Some(0.0));
        for sig in [
            Sig::RdmaCnpPerS,
            Sig::RdmaEcnMarkedPerS,
            Sig::RdmaRetransPerS,
            Sig::RdmaPausePerS,
        ] {
            assert_eq!(p.signals.get(sig), None, "{sig} must be absent, not 0");
        }
        let strategy = n.status().unwrap().strategy.unwrap_or_default();
        assert!(strategy.starts_with("sysfs, 1 ports"), "{strategy}");
    }

    #[test]
    fn down_slow_narrow_and_flapping_ports_are_degraded() {
        let d = tempfile::tempdir().unwrap();
        let t = Tree::new(d.path());
        for dev in ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"] {
            t.add_device(dev, Kind::Mlx5Ib, 1, "400 Gb/sec (4X NDR)", 0)
                .unwrap();
        }
        let mut n = Nics::default();
        let mut ev = Vec::new();
        n.read(d.path(), S, 0, &mut ev);
        t.set("mlx5_0", 1, "state", "1: DOWN").unwrap();
        t.set("mlx5_0", 1, "phys_state", "3: Disabled").unwrap();
        t.set("mlx5_1", 1, "rate", "200 Gb/sec (4X HDR)").unwrap();
        t.set("mlx5_2", 1, "rate", "100 Gb/sec (1X NDR)").unwrap();
        t.set("mlx5_3", 1, "counters/link_downed", "2").unwrap();
        let f = n.read(d.path(), 2 * S, 7, &mut ev);
        let why = |id| {
            port(&f, id)
                .problem
                .as_ref()
                .map(|p| p.to_string())
                .unwrap_or_default()
        };
        assert_eq!(why("mlx5_0/1"), "state DOWN");
        assert!(why("mlx5_1/1").contains("rate 200 Gb/s where the node's other ports run 400"));
        assert!(why("mlx5_2/1").contains("width 1X where the node's other ports are 4X"));
        assert!(why("mlx5_3/1").contains("link went down 2 times"));
        assert_eq!(port(&f, "mlx5_0/1").signals.get(Sig::RdmaActive), Some(0.0));
        assert_eq!(ev.len(), 4);
        assert!(ev.iter().all(|e| e.kind == EventKind::PortDegraded));
        t.set("mlx5_0", 1, "state", "4: ACTIVE").unwrap();
        t.set("mlx5_0", 1, "phys_state", "5: LinkUp").unwrap();
        ev.clear();
        let f = n.read(d.path(), 3 * S, 8, &mut ev);
        assert!(port(&f, "mlx5_0/1").problem.is_none());
        assert_eq!(ev.len(), 1);
        assert_eq!(ev[0].kind, EventKind::PortRecovered);
    }

    #[test]
    fn ranks_get_their_ports_signals() {
        let mut nics: Vec<NicFrame> = ["mlx5_0", "mlx5_1"]
            .iter()
            .map(|d| {
                let mut s = Signals::new();
                s.set(Sig::RdmaXmitWaitPerS, 1000.0);
                s.set(
                    Sig::RdmaPortDegraded,
                    if *d == "mlx5_1" { 1.0 } else { 0.0 },
                );
                NicFrame {
                    device: Text::new(d),
                    port: 1,
                    signals: s,
                    ..Default::default()
                }
            })
            .collect();
        let mut ranks = vec![RankFrame::default(), RankFrame::default()];
        ranks[0].key.pid = 10;
        ranks[1].key.pid = 11;
        let map = HashMap::from([(10, vec!["mlx5_0/1".to_string(), "mlx5_1/1".to_string()])]);
        join(&mut nics, &mut ranks, &map);
        assert_eq!(ranks[0].signals.get(Sig::RdmaXmitWaitPerS), Some(2000.0));
        assert_eq!(ranks[0].signals.get(Sig::RdmaPortDegraded), Some(1.0));
        assert_eq!(ranks[0].nics.len(), 2);
        assert!(ranks[1].signals.get(Sig::RdmaXmitWaitPerS).is_none());
        assert_eq!(nics[1].pids, vec![10]);
    }
}
