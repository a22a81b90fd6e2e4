//! Findings: seed 003's chronic fingerprints, judged on a long window
//! (default 60 s) rather than tick by tick. They are about a job's
//! placement, not a straggler of the moment: a small but steady run-delay
//! asymmetry under the acute floor, one rank pinned differently from its
//! peers, one rank migrating far more, pinned ranks crowding the same CPUs,
//! a busy process that may run where ranks are pinned. Each names the
//! remedy it points at. A finding shows once its condition has held for a
//! sixth of the window and goes once it has been false as long.

use super::causes::overlaps;
use super::peers::median;
use super::verdicts::jobs;
use super::AnalysisConfig;
use crate::model::format::number;
use crate::model::{
    BusyProcess, Finding, FindingKind, Frame, ProcKey, RankFrame, Sig, Text, Verdict,
};
use foldhash::HashMap;
use std::collections::VecDeque;

/// A steady asymmetry is this many times the peers' median...
const STEADY_RATIO: f64 = 5.0;
/// ...which is lifted to this floor (ms/s, /s) so that clean peers at
/// ~0 do not turn noise into a ratio.
const RUN_DELAY_MEDIAN_FLOOR: f64 = 0.02;
const MIGRATIONS_MEDIAN_FLOOR: f64 = 0.1;
/// ...and at least this much above it (seed 003: 1.36 ms/s against 0.01).
const RUN_DELAY_MIN_EXCESS: f64 = 0.2;
const MIGRATIONS_MIN_EXCESS: f64 = 1.0;
/// Ranks sharing CPUs matter once together they use this share of them.
const SHARED_LOAD: f64 = 0.5;
/// A process is a busy neighbour above this CPU use (percent of a core).
const NEIGHBOUR_PCT: f64 = 50.0;
/// A busy scan is current for this long (scans come every 10 s).
const SCAN_FRESH_NS: u64 = 25_000_000_000;

/// The steady-window samples of one rank.
#[derive(Default)]
struct Window {
    /// (mono_ns, run delay ms/s, migrations /s, CPU %).
    samples: VecDeque<(u64, f64, f64, f64)>,
    /// Who held its CPUs while it waited: pid -> (comm, wait ms, last seen).
    ran_instead: HashMap<u32, (Text, f64, u64)>,
}

impl Window {
    fn covers(&self, now: u64) -> u64 {
        self.samples.front().map_or(0, |s| now.saturating_sub(s.0))
    }

    fn pct(&self, q: f64, pick: impl Fn(&(u64, f64, f64, f64)) -> f64) -> f64 {
        let mut v: Vec<f64> = self.samples.iter().map(pick).collect();
        if v.is_empty() {
            return 0.0;
        }
        // The one order statistic, not a sort: every rank, every tick.
        let at = ((v.len() - 1) as f64 * q).round() as usize;
        *v.select_nth_unstable_by(at, f64::total_cmp).1
    }

    /// The non-rank task charged most of the rank's waits in the window.
    fn top_culprit(&self, ranks: &[u32]) -> Option<(u32, &Text)> {
        self.ran_instead
            .iter()
            .filter(|(pid, _)| **pid != 0 && !ranks.contains(pid))
            .max_by(|a, b| a.1 .1.total_cmp(&b.1 .1))
            .map(|(pid, (comm, _, _))| (*pid, comm))
    }
}

/// A finding being watched: when its condition first and last held.
struct Active {
    first_ns: u64,
    last_true_ns: u64,
    finding: Finding,
}

#[derive(Default)]
pub struct Findings {
    windows: HashMap<ProcKey, Window>,
    busy: Vec<BusyProcess>,
    busy_ns: u64,
    active: HashMap<(FindingKind, Vec<u32>), Active>,
}

impl Findings {
    /// Updates the windows with this frame and returns the findings shown.
    pub fn apply(&mut self, cfg: &AnalysisConfig, frame: &Frame) -> Vec<Finding> {
        let now = frame.mono_ns;
        let window_ns = (cfg.findings_window_s.max(1.0) * 1e9) as u64;
        let settle_ns = window_ns / 6;
        self.observe(frame, window_ns);
        let mut found = Vec::new();
        for members in jobs(frame).values() {
            if members.len() < cfg.min_ranks {
                continue;
            }
            let ranks: Vec<&RankFrame> = members.iter().map(|&i| &frame.ranks[i]).collect();
            let host_cpus = host_cpus(frame, &ranks);
            // Statistics need half a window of every rank.
            if ranks.iter().all(|r| {
                self.windows
                    .get(&r.key)
                    .is_some_and(|w| w.covers(now) >= window_ns / 2)
            }) {
                found.extend(self.run_delay(&ranks, &frame.verdicts, cfg));
                found.extend(self.migrations(&ranks, cfg));
                found.extend(self.shared(&ranks, host_cpus));
            }
            found.extend(affinity(&ranks, host_cpus));
            found.extend(numa(frame, &ranks));
            if now.saturating_sub(self.busy_ns) <= SCAN_FRESH_NS {
                found.extend(self.neighbours(&ranks, host_cpus));
            }
        }
        // Hysteresis: shown after `settle`, gone after as long false.
        for f in found {
            let key = (f.kind, f.pids.clone());
            let a = self.active.entry(key).or_insert(Active {
                first_ns: now,
                last_true_ns: now,
                finding: f.clone(),
            });
            a.last_true_ns = now;
            a.finding = f;
        }
        self.active
            .retain(|_, a| now.saturating_sub(a.last_true_ns) <= settle_ns);
        let mut shown: Vec<Finding> = self
            .active
            .values()
            .filter(|a| now.saturating_sub(a.first_ns) >= settle_ns)
            .map(|a| Finding {
                for_s: now.saturating_sub(a.first_ns) as f64 / 1e9,
                ..a.finding.clone()
            })
            .collect();
        shown.sort_by(|a, b| (a.kind, &a.ranks).cmp(&(b.kind, &b.ranks)));
        shown
    }

    fn observe(&mut self, frame: &Frame, window_ns: u64) {
        let now = frame.mono_ns;
        let secs = frame.interval_ms.max(1) as f64 / 1000.0;
        if !frame.host.busy.is_empty() {
            self.busy = frame.host.busy.clone();
            self.busy_ns = now;
        }
        let oldest = now.saturating_sub(window_ns);
        for r in &frame.ranks {
            let w = self.windows.entry(r.key).or_default();
            let sig = |s: Sig| r.signal(s).unwrap_or(0.0);
            w.samples.push_back((
                now,
                sig(Sig::RunDelayMsPerS),
                sig(Sig::MigrationsPerS),
                sig(Sig::CpuPct),
            ));
            while w.samples.front().is_some_and(|s| s.0 < oldest) {
                w.samples.pop_front();
            }
            for c in &r.ran_instead {
                let e = w
                    .ran_instead
                    .entry(c.pid)
                    .or_insert((c.comm.clone(), 0.0, now));
                e.1 += c.wait_ms_per_s * secs;
                e.2 = now;
            }
            w.ran_instead.retain(|_, c| c.2 >= oldest);
        }
        let live: Vec<ProcKey> = frame.ranks.iter().map(|r| r.key).collect();
        self.windows.retain(|k, _| live.contains(k));
    }

    /// A run-queue delay steadily far above the peers' (p50 over the
    /// window), below what an acute verdict already reports.
    fn run_delay(
        &self,
        ranks: &[&RankFrame],
        verdicts: &[Verdict],
        cfg: &AnalysisConfig,
    ) -> Vec<Finding> {
        let p50: Vec<f64> = ranks
            .iter()
            .map(|r| self.windows[&r.key].pct(0.5, |s| s.1))
            .collect();
        let pids: Vec<u32> = ranks.iter().map(|r| r.key.pid).collect();
        let mut out = Vec::new();
        for (i, r) in ranks.iter().enumerate() {
            let acute = verdicts
                .iter()
                .any(|v| v.pid == r.key.pid && v.signal == Sig::RunDelayMsPerS);
            let m = peers_median(&p50, i);
            if acute || !steady(p50[i], m, RUN_DELAY_MEDIAN_FLOOR, RUN_DELAY_MIN_EXCESS) {
                continue;
            }
            let w = &self.windows[&r.key];
            let p90 = w.pct(0.9, |s| s.1);
            let beside = match w.top_culprit(&pids) {
                Some((pid, comm)) => format!("move `{comm}` (pid {pid}) off its CPUs, or "),
                None => String::new(),
            };
            out.push(finding(
                FindingKind::RunDelayAsymmetry,
                &[r],
                format!(
                    "{}: run-queue delay steady at {} ms/s (p50, p90 {}) vs peers {} ms/s ({}x) over {} s",
                    who(r),
                    number(p50[i]),
                    number(p90),
                    number(m),
                    number(p50[i] / m.max(RUN_DELAY_MEDIAN_FLOOR)),
                    number(cfg.findings_window_s)
                ),
                format!("{beside}pin each rank to CPUs of its own"),
            ));
        }
        out
    }

    /// Cross-CPU migrations steadily far above the peers'.
    fn migrations(&self, ranks: &[&RankFrame], cfg: &AnalysisConfig) -> Vec<Finding> {
        let p50: Vec<f64> = ranks
            .iter()
            .map(|r| self.windows[&r.key].pct(0.5, |s| s.2))
            .collect();
        let mut out = Vec::new();
        for (i, r) in ranks.iter().enumerate() {
            let m = peers_median(&p50, i);
            if steady(p50[i], m, MIGRATIONS_MEDIAN_FLOOR, MIGRATIONS_MIN_EXCESS) {
                out.push(finding(
                    FindingKind::MigrationAsymmetry,
                    &[r],
                    format!(
                        "{}: {} migrations/s (p50) vs peers {} /s over {} s",
                        who(r),
                        number(p50[i]),
                        number(m),
                        number(cfg.findings_window_s)
                    ),
                    "pin the rank like its peers (taskset, numactl, or the launcher's CPU binding)"
                        .into(),
                ));
            }
        }
        out
    }

    /// Pinned ranks whose CPU sets overlap, when together they keep those
    /// CPUs busy.
    fn shared(&self, ranks: &[&RankFrame], host_cpus: u32) -> Vec<Finding> {
        let pinned: Vec<&&RankFrame> = ranks.iter().filter(|r| is_pinned(r, host_cpus)).collect();
        let mut out = Vec::new();
        let mut seen: Vec<u32> = Vec::new();
        for (i, a) in pinned.iter().enumerate() {
            if seen.contains(&a.key.pid) {
                continue;
            }
            let group: Vec<&RankFrame> = std::iter::once(**a)
                .chain(
                    pinned[i + 1..]
                        .iter()
                        .filter(|b| overlaps(&a.affinity, &b.affinity))
                        .map(|b| **b),
                )
                .collect();
            if group.len() < 2 {
                continue;
            }
            let shared = intersection(&group[0].affinity, &group[1].affinity);
            let load: f64 = group
                .iter()
                .map(|r| self.windows[&r.key].pct(0.5, |s| s.3) / 100.0)
                .sum();
            if load < SHARED_LOAD * count(&shared).max(1) as f64 {
                continue;
            }
            seen.extend(group.iter().map(|r| r.key.pid));
            let names: Vec<String> = group.iter().map(|r| who(r)).collect();
            out.push(finding(
                FindingKind::SharedCpus,
                &group,
                format!(
                    "{} are pinned to overlapping CPUs ({}) and keep them {} % busy",
                    names.join(", "),
                    cpu_list(&shared),
                    number(load * 100.0 / count(&shared).max(1) as f64)
                ),
                "give each rank CPUs of its own".into(),
            ));
        }
        out
    }

    /// A busy process that is not a rank and may run on pinned ranks' CPUs.
    fn neighbours(&self, ranks: &[&RankFrame], host_cpus: u32) -> Vec<Finding> {
        let mut out = Vec::new();
        for b in self.busy.iter().filter(|b| b.cpu_pct >= NEIGHBOUR_PCT) {
            let hit: Vec<&RankFrame> = ranks
                .iter()
                .filter(|r| is_pinned(r, host_cpus) && overlaps(&b.affinity, &r.affinity))
                .copied()
                .collect();
            if hit.is_empty() {
                continue;
            }
            let names: Vec<String> = hit.iter().map(|r| who(r)).collect();
            let mut cpus: Vec<(u32, u32)> = hit
                .iter()
                .flat_map(|r| intersection(&b.affinity, &r.affinity))
                .collect();
            cpus.sort();
            cpus.dedup();
            let mut f = finding(
                FindingKind::BusyNeighbour,
                &hit,
                format!(
                    "`{}` (pid {}, not a rank) uses {} % of a core and may run on CPU {}, where {} {} pinned",
                    b.comm,
                    b.pid,
                    number(b.cpu_pct),
                    cpu_list(&cpus),
                    names.join(", "),
                    if hit.len() == 1 { "is" } else { "are" }
                ),
                format!(
                    "move `{}` (pid {}) off the ranks' CPUs (taskset, cpuset), or pin the ranks elsewhere",
                    b.comm, b.pid
                ),
            );
            // One finding per (process, ranks).
            f.pids.push(b.pid);
            out.push(f);
        }
        out
    }
}

/// One rank pinned differently from its peers: unpinned among pinned
/// ranks, or another CPU count.
fn affinity(ranks: &[&RankFrame], host_cpus: u32) -> Vec<Finding> {
    let counts: Vec<u32> = ranks.iter().map(|r| cpu_count(r)).collect();
    if counts.contains(&0) {
        return Vec::new();
    }
    // The usual count: the most common one (a tie goes to the smaller,
    // the pinned way); the odd ranks are the others.
    let mut tally: Vec<(u32, usize)> = Vec::new();
    for c in &counts {
        match tally.iter_mut().find(|(v, _)| v == c) {
            Some(t) => t.1 += 1,
            None => tally.push((*c, 1)),
        }
    }
    tally.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let usual = tally[0].0;
    let odd: Vec<usize> = (0..ranks.len()).filter(|&i| counts[i] != usual).collect();
    if odd.is_empty() {
        return Vec::new();
    }
    let odd_ranks: Vec<&RankFrame> = odd.iter().map(|&i| ranks[i]).collect();
    let describe = |r: &RankFrame| {
        let n = cpu_count(r);
        if n >= host_cpus {
            format!("{} is unpinned (may run on all {n} CPUs)", who(r))
        } else {
            format!(
                "{} may run on {} ({})",
                who(r),
                cpus(n),
                cpu_list(&r.affinity)
            )
        }
    };
    let parts: Vec<String> = odd_ranks.iter().map(|r| describe(r)).collect();
    vec![finding(
        FindingKind::AffinityAsymmetry,
        &odd_ranks,
        format!(
            "{} while its peers may run on {} each",
            parts.join("; "),
            cpus(usual)
        ),
        "pin every rank the same way (taskset, numactl, or the launcher's CPU binding)".into(),
    )]
}

/// Ranks whose allowed CPUs are mostly on another NUMA node than their
/// GPU's or a NIC's their NCCL settings name: every copy crosses the
/// socket interconnect. An unpinned rank (half on each node) is not one:
/// that is the affinity finding's.
fn numa(frame: &Frame, ranks: &[&RankFrame]) -> Vec<Finding> {
    let nodes = &frame.host.numa;
    if nodes.len() < 2 {
        return Vec::new();
    }
    let mut out = Vec::new();
    for r in ranks {
        let total = count(&r.affinity);
        if total == 0 {
            continue;
        }
        let mut devices: Vec<(String, u32)> = Vec::new();
        if let Some(g) = r.gpu {
            if let Some(n) = frame
                .gpus
                .iter()
                .find(|x| x.index == g)
                .and_then(|x| x.numa_node)
            {
                devices.push((format!("GPU {g}"), n));
            }
        }
        devices.extend(
            r.nic_numa
                .iter()
                .map(|(name, n)| (format!("NIC {name}"), *n)),
        );
        let off: Vec<&(String, u32)> = devices
            .iter()
            .filter(|(_, n)| {
                let on = nodes
                    .iter()
                    .find(|x| x.node == *n)
                    .map_or(0, |x| count(&intersection(&r.affinity, &x.cpus)));
                on * 2 < total
            })
            .collect();
        let Some((_, want)) = off.first() else {
            continue;
        };
        let home: Vec<String> = nodes
            .iter()
            .filter(|x| !intersection(&r.affinity, &x.cpus).is_empty())
            .map(|x| x.node.to_string())
            .collect();
        let names: Vec<String> = off
            .iter()
            .map(|(d, n)| format!("its {d} is on node {n}"))
            .collect();
        out.push(finding(
            FindingKind::NumaMismatch,
            &[r],
            format!(
                "{} may run on CPUs {} (NUMA node {}) but {}",
                who(r),
                cpu_list(&r.affinity),
                home.join(", "),
                names.join(" and ")
            ),
            format!(
                "bind {} to NUMA node {want} (numactl --cpunodebind={want} --membind={want}, or the launcher's CPU binding)",
                who(r)
            ),
        ));
    }
    out
}

fn cpus(n: u32) -> String {
    if n == 1 {
        "1 CPU".into()
    } else {
        format!("{n} CPUs")
    }
}

fn finding(kind: FindingKind, ranks: &[&RankFrame], message: String, remedy: String) -> Finding {
    Finding {
        kind,
        job: ranks.first().and_then(|r| r.labels.job.clone()),
        pids: ranks.iter().map(|r| r.key.pid).collect(),
        ranks: ranks.iter().map(|r| r.labels.rank).collect(),
        message: Text::message(message),
        remedy: Text::message(remedy),
        for_s: 0.0,
    }
}

fn who(r: &RankFrame) -> String {
    match r.labels.rank {
        Some(n) => format!("rank {n}"),
        None => format!("pid {}", r.key.pid),
    }
}

/// Far above the peers and by enough to matter.
fn steady(v: f64, peers: f64, median_floor: f64, min_excess: f64) -> bool {
    v - peers >= min_excess && v >= STEADY_RATIO * peers.max(median_floor)
}

fn peers_median(values: &[f64], me: usize) -> f64 {
    let mut peers: Vec<f64> = values
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != me)
        .map(|(_, v)| *v)
        .collect();
    median(&mut peers).unwrap_or(0.0)
}

fn count(ranges: &[(u32, u32)]) -> u32 {
    ranges.iter().map(|(a, b)| b.saturating_sub(*a) + 1).sum()
}

fn cpu_count(r: &RankFrame) -> u32 {
    match count(&r.affinity) {
        0 => r.signal(Sig::AffinityCpus).unwrap_or(0.0) as u32,
        n => n,
    }
}

/// The node's CPUs (from /proc/stat's per-CPU lines, else the widest rank).
fn host_cpus(frame: &Frame, ranks: &[&RankFrame]) -> u32 {
    let widest = ranks.iter().map(|r| cpu_count(r)).max().unwrap_or(0);
    (frame.host.cpu_pct.len() as u32).max(widest)
}

fn is_pinned(r: &RankFrame, host_cpus: u32) -> bool {
    let n = count(&r.affinity);
    n > 0 && n < host_cpus
}

fn intersection(a: &[(u32, u32)], b: &[(u32, u32)]) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    for (a0, a1) in a {
        for (b0, b1) in b {
            let (lo, hi) = (*a0.max(b0), *a1.min(b1));
            if lo <= hi {
                out.push((lo, hi));
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

fn cpu_list(ranges: &[(u32, u32)]) -> String {
    ranges
        .iter()
        .map(|(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Labels, RanInstead};

    fn rank(i: u32, cpus: (u32, u32), run_delay: f64) -> RankFrame {
        let mut r = RankFrame {
            labels: Labels {
                rank: Some(i),
                job: Some("j".into()),
                ..Default::default()
            },
            affinity: vec![cpus],
            ..Default::default()
        };
        r.key.pid = 100 + i;
        r.signals.set(Sig::RunDelayMsPerS, run_delay);
        r.signals.set(Sig::CpuPct, 5.0);
        r.signals
            .set(Sig::AffinityCpus, (cpus.1 - cpus.0 + 1) as f64);
        r
    }

    fn frame(t_ns: u64, ranks: Vec<RankFrame>) -> Frame {
        let mut f = Frame {
            mono_ns: t_ns,
            interval_ms: 500,
            ranks,
            ..Default::default()
        };
        f.host.cpu_pct = vec![0.0; 8];
        f
    }

    fn run(ticks: u64, make: impl Fn(u64) -> Vec<RankFrame>) -> Vec<Finding> {
        let cfg = AnalysisConfig {
            findings_window_s: 20.0,
            ..Default::default()
        };
        let mut fs = Findings::default();
        let mut last = Vec::new();
        for t in 0..ticks {
            last = fs.apply(&cfg, &frame(t * 500_000_000, make(t)));
        }
        last
    }

    #[test]
    fn a_rank_bound_to_the_wrong_numa_node_is_found() {
        use crate::model::{GpuFrame, NumaNode};
        // Two nodes of 4 CPUs; GPU i on node i / 2; rank i pinned to CPU
        // pair i, except rank 3, whose CPUs 0-1 are on node 0.
        let mk = |bad: bool| {
            let mut f = frame(
                0,
                (0..4)
                    .map(|i| {
                        let cpus = if bad && i == 3 {
                            (0, 1)
                        } else {
                            (i * 2, i * 2 + 1)
                        };
                        let mut r = rank(i, cpus, 0.01);
                        r.gpu = Some(i);
                        r
                    })
                    .collect(),
            );
            f.host.numa = vec![
                NumaNode {
                    node: 0,
                    cpus: vec![(0, 3)],
                },
                NumaNode {
                    node: 1,
                    cpus: vec![(4, 7)],
                },
            ];
            f.gpus = (0..4)
                .map(|i| GpuFrame {
                    index: i,
                    numa_node: Some(i / 2),
                    ..Default::default()
                })
                .collect();
            f
        };
        let mut ranks = mk(true).ranks;
        let refs: Vec<&RankFrame> = ranks.iter().collect();
        let got = numa(&mk(true), &refs);
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].kind, FindingKind::NumaMismatch);
        assert_eq!(got[0].ranks, vec![Some(3)]);
        assert!(
            got[0].message.contains("its GPU 3 is on node 1"),
            "{}",
            got[0].message
        );
        assert!(
            got[0].remedy.contains("--cpunodebind=1"),
            "{}",
            got[0].remedy
        );
        // Correctly bound: nothing. One NUMA node: nothing.
        let good = mk(false);
        let refs: Vec<&RankFrame> = good.ranks.iter().collect();
        assert!(numa(&good, &refs).is_empty());
        let mut one = mk(true);
        one.host.numa.truncate(1);
        let refs: Vec<&RankFrame> = one.ranks.iter().collect();
        assert!(numa(&one, &refs).is_empty());
        // A NIC named by NCCL_IB_HCA counts the same way.
        ranks[0].nic_numa = vec![("mlx5_1".into(), 1)];
        let mut f = mk(false);
        f.ranks = ranks;
        let refs: Vec<&RankFrame> = f.ranks.iter().collect();
        let got = numa(&f, &refs);
        assert!(
            got.iter()
                .any(|x| x.ranks == vec![Some(0)] && x.message.contains("NIC mlx5_1 is on node 1")),
            "{got:?}"
        );
    }

    #[test]
    fn a_healthy_pinned_job_has_no_finding() {
        let got = run(80, |t| {
            (0..4)
                .map(|i| rank(i, (i * 2, i * 2 + 1), 0.01 + (t % 3) as f64 * 0.005))
                .collect()
        });
        assert!(got.is_empty(), "{got:?}");
    }

    #[test]
    fn a_steady_small_run_delay_asymmetry_is_found_within_the_window() {
        // Seed 003: 1.36 ms/s against 0.01 ms/s, far under the acute floor.
        let got = run(40, |_| {
            (0..4)
                .map(|i| {
                    let mut r = rank(i, (i * 2, i * 2 + 1), if i == 1 { 1.36 } else { 0.01 });
                    if i == 1 {
                        r.ran_instead.push(RanInstead {
                            pid: 812,
                            comm: "stress".into(),
                            wait_ms_per_s: 1.3,
                            ..Default::default()
                        });
                    }
                    r
                })
                .collect()
        });
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].kind, FindingKind::RunDelayAsymmetry);
        assert_eq!(got[0].ranks, vec![Some(1)]);
        assert!(got[0].message.contains("1.36 ms/s"), "{}", got[0].message);
        assert!(
            got[0].remedy.contains("`stress` (pid 812)"),
            "{}",
            got[0].remedy
        );
    }

    #[test]
    fn an_unpinned_rank_among_pinned_peers_is_found() {
        let got = run(10, |_| {
            (0..4)
                .map(|i| rank(i, if i == 3 { (0, 7) } else { (i, i) }, 0.01))
                .collect()
        });
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].kind, FindingKind::AffinityAsymmetry);
        assert_eq!(got[0].ranks, vec![Some(3)]);
        assert!(
            got[0]
                .message
                .contains("rank 3 is unpinned (may run on all 8 CPUs)"),
            "{}",
            got[0].message
        );
    }

    #[test]
    fn pinned_ranks_crowding_one_cpu_are_found_when_busy() {
        let busy = |load: f64| {
            run(40, move |_| {
                (0..4)
                    .map(|i| {
                        let mut r = rank(i, if i < 2 { (5, 5) } else { (i, i) }, 0.01);
                        r.signals.set(Sig::CpuPct, load);
                        r
                    })
                    .collect()
            })
        };
        assert!(
            busy(5.0).is_empty(),
            "idle ranks sharing a CPU do not matter"
        );
        let got = busy(40.0);
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].kind, FindingKind::SharedCpus);
        assert_eq!(got[0].ranks, vec![Some(0), Some(1)]);
    }

    #[test]
    fn a_finding_goes_after_its_condition_ends() {
        let cfg = AnalysisConfig {
            findings_window_s: 12.0,
            ..Default::default()
        };
        let mut fs = Findings::default();
        let pinned = |unpinned: bool| {
            (0..4)
                .map(|i| rank(i, if unpinned && i == 3 { (0, 7) } else { (i, i) }, 0.01))
                .collect::<Vec<_>>()
        };
        let mut t = 0;
        let mut step = |fs: &mut Findings, unpinned| {
            t += 500_000_000;
            fs.apply(&cfg, &frame(t, pinned(unpinned)))
        };
        for _ in 0..6 {
            step(&mut fs, true);
        }
        assert_eq!(step(&mut fs, true).len(), 1);
        for _ in 0..6 {
            step(&mut fs, false);
        }
        assert!(step(&mut fs, false).is_empty());
    }
}
