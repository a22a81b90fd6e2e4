//! Causes: one answer per straggler. After the verdicts are judged:
//!
//! - **consequences**: a network symptom (retransmits, RTT, queues) that lies
//!   on connections to a rank with a verdict of its own (CPU, throttling,
//!   GPU, its own slow link) is that rank's effect on its neighbour: the
//!   verdict is marked a consequence of it, with the connection, and never
//!   counts as a straggler;
//! - **culprits**: for run-queue verdicts, who held the rank's CPUs while it
//!   waited (the probe's charges over the verdict's life, or, without the
//!   probe, the busiest processes allowed on its CPUs, marked a guess);
//! - **details**: a throttled rank's cgroup quota against its use; the
//!   busiest process on a slow rank's link.
//!
//! Then each verdict's sentence is written, and verdicts are ordered: the
//! stragglers by score (a run-queue delay after its rank's CFS throttling,
//! its cause), their consequences after them.

use super::verdicts::base_message;
use crate::model::format::{bytes, number};
use crate::model::{
    BusyProcess, Cause, Culprit, Frame, ProcKey, RankFrame, Severity, Sig, Text, Verdict,
};
use foldhash::{HashMap, HashMapExt};

/// Network symptoms: what a neighbour's trouble can cause on this rank.
const SYMPTOMS: &[Sig] = &[
    Sig::RetransPerS,
    Sig::RttP50Us,
    Sig::RttP99Us,
    Sig::SrttMaxUs,
    Sig::TxQueueBytes,
];

/// Verdicts whose waits have culprits.
const WAITS: &[Sig] = &[Sig::RunDelayMsPerS, Sig::RunqP99Us];

/// A consequence needs at least this share of the symptom on connections
/// to the cause.
const CONSEQUENCE_SHARE: f64 = 0.5;
/// Culprits named per verdict, and the smallest share named.
const CULPRITS: usize = 3;
const CULPRIT_MIN_PCT: f64 = 5.0;

/// Per rank: the waits charged to each task while a run-queue verdict lasts.
#[derive(Default)]
pub struct Causes {
    charged: HashMap<ProcKey, HashMap<u32, Charge>>,
    /// The last scan of busy non-rank processes (scans come every few s).
    busy: Vec<BusyProcess>,
    /// Verdicts found to be a consequence stay one for their life (their
    /// symptom outlasts the cause by the hysteresis; a tick whose socket
    /// inventory missed the link does not make them a straggler).
    consequence: HashMap<(u32, Sig), Cause>,
}

#[derive(Debug, Clone, Default)]
struct Charge {
    comm: Text,
    wait_ms: f64,
    cpu: u32,
    pod_uid: Option<Text>,
    container_id: Option<Text>,
}

impl Causes {
    /// `pending`: outliers on their way to a verdict (they can already be
    /// a cause: a neighbour's symptom often crosses the bar first).
    pub fn apply(&mut self, frame: &Frame, verdicts: &mut [Verdict], pending: &[(ProcKey, Sig)]) {
        if !frame.host.busy.is_empty() || frame.seq == 0 {
            self.busy = frame.host.busy.clone();
        }
        self.charge(frame, verdicts);
        consequences(frame, verdicts, pending);
        self.consequence
            .retain(|k, _| verdicts.iter().any(|v| (v.pid, v.signal) == *k));
        for v in verdicts.iter_mut() {
            match &v.consequence_of {
                Some(c) => {
                    self.consequence.insert((v.pid, v.signal), c.clone());
                }
                None => {
                    if let Some(c) = self.consequence.get(&(v.pid, v.signal)) {
                        v.consequence_of = Some(c.clone());
                        v.severity = Severity::Warning;
                    }
                }
            }
        }
        for v in verdicts.iter_mut() {
            let Some(rank) = frame.rank_by_pid(v.pid) else {
                continue;
            };
            if v.consequence_of.is_some() {
                continue;
            }
            if WAITS.contains(&v.signal) {
                v.culprits = self.culprits(frame, rank);
            }
            if v.signal == Sig::CfsThrottledMsPerS {
                v.detail = rank.cgroup_cpu.as_ref().map(|c| {
                    let cpus = |x: Option<f64>| x.map_or("?".into(), number);
                    Text::message(format!(
                        "cgroup {}: quota {} CPU, used {} CPU",
                        c.path,
                        cpus(c.quota_cpus),
                        cpus(c.used_cpus)
                    ))
                });
            }
            if SYMPTOMS.contains(&v.signal) {
                v.detail = busiest_on_link(frame, rank);
            }
        }
        for v in verdicts.iter_mut() {
            v.message = Text::message(sentence(v));
        }
        // A cgroup's CFS throttling is the cause of its run-queue delay (a
        // throttled task counts as waiting to run): on a rank with both,
        // the throttling heads its verdicts whichever scores higher (the
        // two scores swap from run to run on one quota).
        let throttled: Vec<u32> = verdicts
            .iter()
            .filter(|v| v.signal == Sig::CfsThrottledMsPerS && !v.is_consequence())
            .map(|v| v.pid)
            .collect();
        let explained = |v: &Verdict| WAITS.contains(&v.signal) && throttled.contains(&v.pid);
        verdicts.sort_by(|a, b| {
            a.is_consequence()
                .cmp(&b.is_consequence())
                .then(explained(a).cmp(&explained(b)))
                .then(b.severity.cmp(&a.severity))
                .then(b.score.total_cmp(&a.score))
        });
    }

    /// Adds this tick's charges of ranks with a run-queue verdict; forgets
    /// ranks without one.
    fn charge(&mut self, frame: &Frame, verdicts: &[Verdict]) {
        let waiting: Vec<ProcKey> = verdicts
            .iter()
            .filter(|v| WAITS.contains(&v.signal))
            .filter_map(|v| frame.rank_by_pid(v.pid).map(|r| r.key))
            .collect();
        self.charged.retain(|k, _| waiting.contains(k));
        let secs = frame.interval_ms.max(1) as f64 / 1000.0;
        for r in frame.ranks.iter().filter(|r| waiting.contains(&r.key)) {
            let acc = self.charged.entry(r.key).or_default();
            for w in r.ran_instead.iter().filter(|w| w.pid != 0) {
                let c = acc.entry(w.pid).or_default();
                c.comm = w.comm.clone();
                c.wait_ms += w.wait_ms_per_s * secs;
                c.cpu = w.cpu;
                c.pod_uid = w.pod_uid.clone();
                c.container_id = w.container_id.clone();
            }
        }
    }

    fn culprits(&self, frame: &Frame, rank: &RankFrame) -> Vec<Culprit> {
        let rank_of = |pid: u32| frame.rank_by_pid(pid).and_then(|r| r.labels.rank);
        if let Some(acc) = self.charged.get(&rank.key).filter(|a| !a.is_empty()) {
            let total: f64 = acc.values().map(|c| c.wait_ms).sum();
            let mut list: Vec<Culprit> = acc
                .iter()
                .map(|(pid, c)| Culprit {
                    pid: *pid,
                    comm: c.comm.clone(),
                    rank: rank_of(*pid),
                    share_pct: c.wait_ms * 100.0 / total.max(f64::MIN_POSITIVE),
                    cpu: Some(c.cpu),
                    pod_uid: c.pod_uid.clone(),
                    container_id: c.container_id.clone(),
                    guess: false,
                })
                .filter(|c| c.share_pct >= CULPRIT_MIN_PCT)
                .collect();
            list.sort_by(|a, b| b.share_pct.total_cmp(&a.share_pct));
            list.truncate(CULPRITS);
            return list;
        }
        // No probe: the busiest processes allowed on the rank's CPUs.
        if frame
            .sources
            .get(crate::model::Source::EbpfRunq)
            .is_some_and(|s| s.is_ok())
        {
            return Vec::new();
        }
        let mut list: Vec<Culprit> = self
            .busy
            .iter()
            .filter(|b| overlaps(&b.affinity, &rank.affinity))
            .map(|b| Culprit {
                pid: b.pid,
                comm: b.comm.clone(),
                rank: None,
                share_pct: b.cpu_pct,
                cpu: None,
                pod_uid: b.pod_uid.clone(),
                container_id: b.container_id.clone(),
                guess: true,
            })
            .collect();
        list.truncate(CULPRITS);
        list
    }
}

/// Do two CPU lists (inclusive ranges) share a CPU? An empty list is unknown.
pub fn overlaps(a: &[(u32, u32)], b: &[(u32, u32)]) -> bool {
    a.iter()
        .any(|(a0, a1)| b.iter().any(|(b0, b1)| a0 <= b1 && b0 <= a1))
}

/// Marks the network verdicts that are another rank's effect.
fn consequences(frame: &Frame, verdicts: &mut [Verdict], pending: &[(ProcKey, Sig)]) {
    // Who owns each connection end: (local, remote) -> rank index.
    let mut owner: HashMap<(&str, &str), usize> = HashMap::new();
    for (i, r) in frame.ranks.iter().enumerate() {
        for s in &r.sockets {
            owner.insert((s.local.as_str(), s.remote.as_str()), i);
        }
    }
    // The ranks with a verdict of their own, and its most severe one.
    let causes: HashMap<u32, (Sig, f64)> = {
        let mut m: HashMap<u32, (Sig, f64)> = HashMap::new();
        for v in verdicts.iter().filter(|v| is_cause(frame, v)) {
            let e = m.entry(v.pid).or_insert((v.signal, v.score));
            if v.score > e.1 {
                *e = (v.signal, v.score);
            }
        }
        // Own-trouble outliers not raised yet (never a bare symptom: that
        // would make two neighbours each other's cause).
        for (k, sig) in pending.iter().filter(|(_, s)| !SYMPTOMS.contains(s)) {
            m.entry(k.pid).or_insert((*sig, 0.0));
        }
        m
    };
    for v in verdicts.iter_mut() {
        if !SYMPTOMS.contains(&v.signal) || is_cause(frame, v) {
            continue;
        }
        let Some(rank) = frame.rank_by_pid(v.pid) else {
            continue;
        };
        // The symptom per connection, and to whom each connection goes.
        let mut total = 0.0;
        let mut by_peer: HashMap<usize, (f64, String, f64)> = HashMap::new();
        for s in &rank.sockets {
            let w = symptom(v.signal, s);
            if w <= 0.0 {
                continue;
            }
            total += w;
            let Some(&peer) = owner.get(&(s.remote.as_str(), s.local.as_str())) else {
                continue;
            };
            let e = by_peer.entry(peer).or_insert((0.0, String::new(), 0.0));
            e.0 += w;
            if w > e.2 {
                e.1 = format!("{} -> {}", s.local, s.remote);
                e.2 = w;
            }
        }
        let best = by_peer
            .into_iter()
            .filter(|(p, _)| causes.contains_key(&frame.ranks[*p].key.pid))
            .max_by(|a, b| a.1 .0.total_cmp(&b.1 .0));
        if let Some((peer, (w, via, _))) = best {
            if total > 0.0 && w / total >= CONSEQUENCE_SHARE {
                let p = &frame.ranks[peer];
                v.consequence_of = Some(Cause {
                    rank: p.labels.rank,
                    pid: p.key.pid,
                    signal: causes[&p.key.pid].0,
                    via: Text::new(&via),
                });
                v.severity = Severity::Warning;
            }
        }
    }
}

/// A verdict that is the rank's own trouble: CPU, throttling, GPU, or a
/// network verdict its own link confirmed.
fn is_cause(frame: &Frame, v: &Verdict) -> bool {
    if v.consequence_of.is_some() {
        return false;
    }
    if !SYMPTOMS.contains(&v.signal) {
        return true;
    }
    let confirmed = super::rules::rule_for(v.signal).is_some_and(|r| r.confirm_by.is_some());
    confirmed
        && frame
            .rank_by_pid(v.pid)
            .is_some_and(|r| r.signal(Sig::LinkRttUs).is_some())
}

/// How much of a symptom one connection carries.
fn symptom(sig: Sig, s: &crate::model::SocketFrame) -> f64 {
    match sig {
        Sig::RetransPerS => s.signals.get(Sig::RetransPerS).unwrap_or(0.0),
        Sig::RttP50Us | Sig::RttP99Us => s.signals.get(Sig::RttP50Us).unwrap_or(0.0),
        Sig::SrttMaxUs => s.info.as_ref().map_or(0.0, |i| i.rtt_us as f64),
        Sig::TxQueueBytes => s.tx_queue as f64,
        _ => 0.0,
    }
}

/// The busiest other process on the rank's link (its local addresses),
/// from the flow probe.
fn busiest_on_link(frame: &Frame, rank: &RankFrame) -> Option<Text> {
    let ip = |a: &str| a.rsplit_once(':').map(|(h, _)| h.to_string());
    let mine: Vec<String> = rank.sockets.iter().filter_map(|s| ip(&s.local)).collect();
    let mut per_pid: HashMap<u32, (f64, String)> = HashMap::new();
    for f in frame
        .flows
        .iter()
        .filter(|f| f.pid != rank.key.pid && Some(f.netns) == rank.netns)
        .filter(|f| ip(&f.local).is_some_and(|l| mine.contains(&l)))
    {
        let e = per_pid.entry(f.pid).or_insert((0.0, String::new()));
        e.0 += f.tx_bytes_per_s + f.rx_bytes_per_s;
        e.1 = f.comm.as_deref().unwrap_or("").to_string();
    }
    let (pid, (rate, comm)) = per_pid
        .into_iter()
        .max_by(|a, b| a.1 .0.total_cmp(&b.1 .0))?;
    (rate > 0.0).then(|| {
        let who = if comm.is_empty() {
            format!("pid {pid}")
        } else {
            format!("pid {pid} ({comm})")
        };
        Text::message(format!("busiest on its link: {who} at {}/s", bytes(rate)))
    })
}

/// How a culprit is named: another rank, or a process with its container.
fn culprit_name(c: &Culprit) -> String {
    let mut s = match c.rank {
        Some(r) => format!("rank {r} (pid {})", c.pid),
        None => format!("`{}` (pid {}, not a rank", c.comm, c.pid),
    };
    if c.rank.is_none() {
        if let Some(id) = &c.container_id {
            s.push_str(&format!(", container {}", &id[..id.len().min(12)]));
        }
        if let Some(p) = &c.pod_uid {
            s.push_str(&format!(", pod {p}"));
        }
        s.push(')');
    }
    s
}

/// The verdict's full sentence: what, and why.
fn sentence(v: &Verdict) -> String {
    let mut s = base_message(v);
    if let Some(c) = &v.consequence_of {
        let who = match c.rank {
            Some(r) => format!("rank {r}"),
            None => format!("pid {}", c.pid),
        };
        s.push_str(&format!(
            ": a consequence of {who}'s {} (on {})",
            c.signal.label(),
            c.via
        ));
        return s;
    }
    match v.culprits.first() {
        Some(c) if c.guess => {
            let names: Vec<String> = v
                .culprits
                .iter()
                .map(|c| format!("{} at {:.0} % CPU", culprit_name(c), c.share_pct))
                .collect();
            s.push_str(&format!(
                "; busiest on its CPUs (a guess without the run-queue probe): {}",
                names.join(", ")
            ));
        }
        Some(c) => {
            s.push_str(&format!(
                "; {} ran {:.0} % of that time{}",
                culprit_name(c),
                c.share_pct,
                c.cpu.map_or(String::new(), |cpu| format!(" on CPU {cpu}"))
            ));
            for o in v.culprits.iter().skip(1) {
                s.push_str(&format!(", {} {:.0} %", culprit_name(o), o.share_pct));
            }
        }
        None => {}
    }
    if let Some(d) = &v.detail {
        s.push_str(&format!("; {d}"));
    }
    s
}
