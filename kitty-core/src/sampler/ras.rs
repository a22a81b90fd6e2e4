//! The NCCL RAS phase: a thread of its own asks each RAS port the ranks
//! name (NCCL_RAS_ADDR, else localhost:28028) for its report every few
//! seconds (a port that does not answer less and less often), from inside
//! the rank's network namespace (RAS listens on the rank's localhost); each
//! tick applies the latest report to the ranks it names: missing or
//! unresponsive (a flag), collectives behind the most advanced rank of the
//! communicator (a count), with an event per rank that goes missing.

use super::procs::Sample;
use crate::model::{Event, EventKind, ProcKey, RankFrame, Sig, Signals, SourceStatus};
use crate::sources::nccl_ras::{self, Report, DEFAULT_ADDR};
use crate::sources::process::in_netns_of;
use crate::sources::Roots;
use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How often each RAS port is asked (a report costs RAS a collective
/// across the job's nodes).
const POLL_EVERY: Duration = Duration::from_secs(5);
/// A port that failed is asked again after twice as long each time, up to
/// this (a job without RAS, or with NCCL before 2.28, is not asked every
/// 5 s for its whole life; RAS matters once a job hangs, minutes in).
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// Connection and per-step timeout, and the time RAS may wait for peers.
const TIMEOUT: Duration = Duration::from_secs(3);
const RAS_TIMEOUT_S: u32 = 5;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Target {
    addr: String,
    /// The rank's process directory and its network namespace's inode.
    ns: Option<(PathBuf, u64)>,
}

/// A report and the addresses of the namespace it was asked from (the
/// report's `host` of a rank on this node is one of them).
type Answer = Result<(Report, Vec<IpAddr>), String>;

#[derive(Default)]
struct Shared {
    targets: Vec<Target>,
    answers: HashMap<Target, Answer>,
}

#[derive(Default)]
pub struct Ras {
    shared: Arc<Mutex<Shared>>,
    started: bool,
    /// The processes and namespaces the targets were made for: the same
    /// ones ask the same ports (a process's RAS address is read once).
    asked: Vec<(ProcKey, Option<u64>)>,
    /// (communicator, rank) pairs reported missing at the last tick.
    missing: HashSet<(String, u32)>,
}

impl Ras {
    /// Tells the poller which ports to ask (starting it on first use).
    pub fn targets(&mut self, roots: &Roots, samples: &[Sample]) {
        let same = self.asked.len() == samples.len()
            && (self.asked.iter().zip(samples)).all(|(a, (w, _))| *a == (w.key, w.netns));
        if same && (self.started || samples.is_empty()) {
            return;
        }
        self.asked = samples.iter().map(|(w, _)| (w.key, w.netns)).collect();
        let mut t: Vec<Target> = samples
            .iter()
            .map(|(w, _)| {
                let addr = w
                    .nccl
                    .iter()
                    .find(|(k, _)| k == "NCCL_RAS_ADDR")
                    .map(|(_, v)| v.trim().to_string())
                    .filter(|v| !v.is_empty())
                    .unwrap_or_else(|| DEFAULT_ADDR.to_string());
                let ns = w.netns.map(|i| (roots.pid_dir(w.key.pid), i));
                Target { addr, ns }
            })
            .collect();
        // One query per port and namespace, whichever rank leads there.
        let mut seen = HashSet::new();
        t.retain(|x| seen.insert((x.addr.clone(), x.ns.as_ref().map(|n| n.1))));
        self.lock().targets = t;
        if !self.started && !samples.is_empty() {
            self.started = true;
            let shared = self.shared.clone();
            let _ = std::thread::Builder::new()
                .name("kitty-nccl-ras".into())
                .spawn(move || poll_loop(shared));
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reads the latest reports for this tick's ranks: their RAS signals
    /// by pid, and the source status.
    pub fn judge(
        &mut self,
        samples: &[Sample],
        wall: u64,
        events: &mut Vec<Event>,
    ) -> (PerRank, SourceStatus) {
        let mut ranks = PerRank::new();
        let sh = self.lock();
        if sh.targets.is_empty() {
            return (
                ranks,
                SourceStatus::unavailable("no ranks to ask NCCL RAS about"),
            );
        }
        let own: HashMap<u32, u32> = samples
            .iter()
            .map(|(w, s)| (s.own_pid, w.key.pid))
            .collect();
        let mut missing_now = HashSet::new();
        let mut errors = Vec::new();
        let mut ok = 0;
        let mut new_events = Vec::new();
        for t in &sh.targets {
            match sh.answers.get(t) {
                None => {}
                Some(Err(e)) => errors.push(e.clone()),
                Some(Ok((report, ips))) => {
                    ok += 1;
                    let local = |host: &str, pid: u32| -> Option<u32> {
                        let here = ips.is_empty()
                            || host.parse::<IpAddr>().is_ok_and(|h| ips.contains(&h));
                        here.then(|| own.get(&pid).copied()).flatten()
                    };
                    for c in &report.communicators {
                        let most = c.ranks.iter().map(|r| r.collectives()).max().unwrap_or(0);
                        for r in &c.ranks {
                            if let Some(pid) = local(&r.host, r.pid) {
                                set_max(
                                    &mut ranks,
                                    pid,
                                    Sig::NcclCollsBehind,
                                    (most - r.collectives()) as f64,
                                );
                                set_max(&mut ranks, pid, Sig::NcclRasMissing, 0.0);
                            }
                        }
                        for m in &c.missing_ranks {
                            let key = (c.hash.clone(), m.rank);
                            if !self.missing.contains(&key) && !missing_now.contains(&key) {
                                let how = if m.status.considered_dead {
                                    "considered dead"
                                } else if m.status.unresponsive {
                                    "unresponsive"
                                } else {
                                    "missing"
                                };
                                new_events.push(Event::new(
                                    wall,
                                    EventKind::NcclRas,
                                    format!(
                                        "NCCL RAS: rank {} of communicator {} (pid {} on {}) is {how}",
                                        m.rank, c.hash, m.pid, m.host
                                    ),
                                ));
                            }
                            missing_now.insert(key);
                            if let Some(pid) = local(&m.host, m.pid) {
                                set_max(&mut ranks, pid, Sig::NcclRasMissing, 1.0);
                            }
                        }
                    }
                }
            }
        }
        drop(sh);
        events.extend(new_events);
        self.missing = missing_now;
        let status = match (ok, errors.first()) {
            (0, None) => SourceStatus::degraded("waiting for the first NCCL RAS report"),
            (0, Some(e)) => {
                SourceStatus::unavailable(format!("{e} (NCCL before 2.24, or NCCL_RAS_ENABLE=0)"))
            }
            (n, None) => SourceStatus::ok().with_strategy(format!("{n} RAS ports")),
            (n, Some(e)) => SourceStatus::degraded(format!("{n} RAS ports answer; {e}")),
        };
        (ranks, status)
    }
}

/// RAS signals by rank pid.
pub type PerRank = HashMap<u32, Signals>;

/// Writes the RAS signals into the rank frames.
pub fn apply(ranks: &mut [RankFrame], per: &PerRank) {
    for r in ranks {
        if let Some(s) = per.get(&r.key.pid) {
            for (sig, v) in s.iter() {
                r.signals.set(sig, v);
            }
        }
    }
}

/// Sets a rank signal to the larger of its value and `v` (a rank in
/// several communicators is as far behind as its worst one).
fn set_max(ranks: &mut PerRank, pid: u32, sig: Sig, v: f64) {
    let s = ranks.entry(pid).or_default();
    let cur = s.get(sig).unwrap_or(f64::MIN);
    s.set(sig, cur.max(v));
}

fn poll_loop(shared: Arc<Mutex<Shared>>) {
    let mut backoff = Backoff::default();
    loop {
        let targets = shared
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .targets
            .clone();
        let now = std::time::Instant::now();
        let mut asked = Vec::new();
        for t in &targets {
            if !backoff.due(t, now) {
                continue;
            }
            let a = ask(t);
            backoff.answered(t, a.is_ok(), now);
            asked.push((t.clone(), a));
        }
        backoff.keep_only(&targets);
        let mut sh = shared.lock().unwrap_or_else(|e| e.into_inner());
        // A port not asked this time keeps its last answer.
        sh.answers.retain(|t, _| targets.contains(t));
        sh.answers.extend(asked);
        drop(sh);
        std::thread::sleep(POLL_EVERY);
    }
}

/// When each port that failed is due again: [`POLL_EVERY`] doubled per
/// failure in a row, at most [`MAX_BACKOFF`].
#[derive(Default)]
struct Backoff(HashMap<Target, (u32, std::time::Instant)>);

impl Backoff {
    fn due(&self, t: &Target, now: std::time::Instant) -> bool {
        self.0.get(t).is_none_or(|&(_, at)| now >= at)
    }

    fn answered(&mut self, t: &Target, ok: bool, now: std::time::Instant) {
        if ok {
            self.0.remove(t);
            return;
        }
        let failures = self.0.get(t).map_or(0, |f| f.0) + 1;
        let wait = POLL_EVERY
            .saturating_mul(1 << (failures - 1).min(8))
            .min(MAX_BACKOFF);
        // Due a little early: the loop's own sleep rounds it up.
        self.0
            .insert(t.clone(), (failures, now + wait - POLL_EVERY / 2));
    }

    fn keep_only(&mut self, targets: &[Target]) {
        self.0.retain(|t, _| targets.contains(t));
    }
}

/// One query, from the rank's network namespace (RAS listens on its
/// localhost).
fn ask(t: &Target) -> Answer {
    let run = || -> Answer {
        let body = nccl_ras::query(&t.addr, TIMEOUT, RAS_TIMEOUT_S)?;
        Ok((nccl_ras::parse(&body)?, local_addresses()))
    };
    match &t.ns {
        None => run(),
        Some((pid_dir, _)) => in_netns_of(pid_dir, run).unwrap_or_else(|e| Err(e.to_string())),
    }
}

/// The addresses of this thread's network namespace.
fn local_addresses() -> Vec<IpAddr> {
    let mut out = Vec::new();
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list we free below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return out;
    }
    let mut p = head;
    while !p.is_null() {
        // SAFETY: p walks the list getifaddrs returned; each address is
        // read as the family it says it is.
        unsafe {
            let a = (*p).ifa_addr;
            if !a.is_null() {
                match (*a).sa_family as i32 {
                    libc::AF_INET => {
                        let s = &*(a as *const libc::sockaddr_in);
                        out.push(IpAddr::from(u32::from_be(s.sin_addr.s_addr).to_be_bytes()));
                    }
                    libc::AF_INET6 => {
                        let s = &*(a as *const libc::sockaddr_in6);
                        out.push(IpAddr::from(s.sin6_addr.s6_addr));
                    }
                    _ => {}
                }
            }
            p = (*p).ifa_next;
        }
    }
    // SAFETY: the list came from getifaddrs.
    unsafe { libc::freeifaddrs(head) };
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::discovery::Watched;
    use crate::sources::process::ProcSample;
    use std::time::Instant;

    fn rank(pid: u32, ras: &str) -> Watched {
        Watched {
            key: ProcKey { pid, start_time: 1 },
            comm: crate::model::Text::new("rank"),
            ppid: 1,
            labels: Default::default(),
            nccl: vec![("NCCL_RAS_ADDR".into(), ras.into())],
            nic_numa: Vec::new(),
            role: Default::default(),
            cgroup: String::new(),
            netns: None,
        }
    }

    fn samples<'a>(ranks: &[&'a Watched]) -> Vec<Sample<'a>> {
        ranks.iter().map(|w| (*w, ProcSample::default())).collect()
    }

    /// The ports asked follow the ranks: one a port, made again only when
    /// the ranks change (not every tick).
    #[test]
    fn the_ports_asked_follow_the_ranks() {
        let d = tempfile::tempdir().unwrap();
        let roots = Roots::new(d.path());
        let mut ras = Ras::default();
        let asked = |ras: &Ras| -> Vec<String> {
            let mut a: Vec<String> = ras.lock().targets.iter().map(|t| t.addr.clone()).collect();
            a.sort();
            a
        };
        let (a, b, c) = (
            rank(1, "127.0.0.1:1"),
            rank(2, "127.0.0.1:1"),
            rank(3, "127.0.0.1:2"),
        );
        ras.targets(&roots, &samples(&[&a, &b]));
        assert_eq!(asked(&ras), ["127.0.0.1:1"], "one query a port");
        ras.lock().targets.clear();
        ras.targets(&roots, &samples(&[&a, &b]));
        assert!(asked(&ras).is_empty(), "the same ranks: nothing made again");
        ras.targets(&roots, &samples(&[&a, &b, &c]));
        assert_eq!(
            asked(&ras),
            ["127.0.0.1:1", "127.0.0.1:2"],
            "a new rank's port"
        );
        ras.targets(&roots, &samples(&[&c]));
        assert_eq!(asked(&ras), ["127.0.0.1:2"], "a gone rank's port no more");
    }

    /// A port that keeps failing is asked at 5, 10, 20, 40, then every 60 s
    /// (the poller wakes every 5 s); one answer and it is asked every 5 s.
    #[test]
    fn a_failing_port_is_asked_less_and_less_often() {
        let t = Target {
            addr: "localhost:28028".into(),
            ns: None,
        };
        let mut b = Backoff::default();
        let start = Instant::now();
        let mut asked_at = Vec::new();
        for tick in 0..40u64 {
            let now = start + POLL_EVERY * tick as u32;
            if b.due(&t, now) {
                asked_at.push(tick * 5);
                b.answered(&t, false, now);
            }
        }
        assert_eq!(asked_at, [0, 5, 15, 35, 75, 135, 195]);
        let now = start + Duration::from_secs(200);
        b.answered(&t, true, now);
        assert!(b.due(&t, now + POLL_EVERY));
        b.keep_only(&[]);
        assert!(b.0.is_empty());
    }
}
