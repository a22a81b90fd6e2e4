//! Analysis v1: ranks of one job do the same work, so each rank is compared
//! with the median of its peers, per signal (median + MAD, a ratio floor and
//! an absolute floor), raised only after it persists and released with
//! hysteresis. The result is a list of verdicts with their numbers.

use crate::frame::{Event, EventKind, Frame, ProcKey, RankFrame, Severity, Verdict};
use crate::signals::{format_value, info};
use std::collections::{BTreeMap, HashMap};

/// A signal the detector compares, with the floor below which a difference
/// never alarms (tiny numbers are noise, not stragglers).
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    pub signal: &'static str,
    pub abs_floor: f64,
    pub kind: Kind,
    /// Critical whatever the ratio (a lost GPU, an XID): otherwise a verdict
    /// is critical from 10x its peers.
    pub always_critical: bool,
    /// A signal (and its absolute floor) that must also single the rank
    /// out, when the ranks have it. RTT and queue rules use `link_rtt_us`: a
    /// rank whose connection to a slow peer is slow, but whose own link
    /// carries fast connections, is not the cause.
    pub confirm_by: Option<(&'static str, f64)>,
}

/// Which way is bad.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    /// Higher than the peers is bad (delay, retransmits, RTT).
    High,
    /// Lower than the peers by this factor is bad (clocks, SM activity).
    Low(f64),
    /// A 0/1 condition the rank has and its peers do not (throttled, lost GPU).
    Flag,
}

const fn rule(signal: &'static str, abs_floor: f64, kind: Kind, always_critical: bool) -> Rule {
    Rule {
        signal,
        abs_floor,
        kind,
        always_critical,
        confirm_by: None,
    }
}

const fn confirmed(signal: &'static str, abs_floor: f64, by: (&'static str, f64)) -> Rule {
    Rule {
        confirm_by: Some(by),
        ..high(signal, abs_floor)
    }
}

const fn high(signal: &'static str, abs_floor: f64) -> Rule {
    rule(signal, abs_floor, Kind::High, false)
}

/// A queue or RTT verdict needs the rank's own link to be slow (a full
/// queue means a slow path; RTT says whose link the path is slow on).
const LINK_RTT: (&str, f64) = ("link_rtt_us", 2_000.0);

pub const RULES: &[Rule] = &[
    high("run_delay_ms_per_s", 25.0),
    high("runq_p99_us", 2_000.0),
    high("cfs_throttled_ms_per_s", 20.0),
    high("migrations_per_s", 100.0),
    high("retrans_per_s", 5.0),
    confirmed("rtt_p50_us", 2_000.0, LINK_RTT),
    confirmed("rtt_p99_us", 5_000.0, LINK_RTT),
    confirmed("srtt_max_us", 5_000.0, LINK_RTT),
    confirmed("tx_queue_bytes", 256_000.0, LINK_RTT),
    // GPU signals join through rank -> GPU.
    rule("gpu_lost", 0.5, Kind::Flag, true),
    rule("gpu_throttle_slowing", 0.5, Kind::Flag, true),
    rule("gpu_xid_recent", 1.0, Kind::High, true),
    rule("gpu_sm_clock_mhz", 150.0, Kind::Low(1.2), false),
    rule("gpu_sm_active_pct", 15.0, Kind::Low(1.5), false),
];

#[derive(Debug, Clone)]
pub struct AnalysisConfig {
    /// A rank must exceed this multiple of its peers' median to be an outlier.
    pub ratio_floor: f64,
    /// ...and stay below this multiple to be released (hysteresis).
    pub release_ratio: f64,
    /// Robust z: distance from the median in units of 1.4826 * MAD.
    pub mad_k: f64,
    /// Seconds an outlier must persist before a verdict is raised.
    pub raise_after_s: f64,
    /// Seconds a raised verdict must stay healthy before it is cleared.
    pub release_after_s: f64,
    /// Fewest ranks in a job for a comparison to mean anything.
    pub min_ranks: usize,
}

impl Default for AnalysisConfig {
    fn default() -> Self {
        AnalysisConfig {
            ratio_floor: 3.0,
            release_ratio: 2.0,
            mad_k: 5.0,
            raise_after_s: 1.5,
            release_after_s: 2.0,
            min_ranks: 3,
        }
    }
}

#[derive(Debug, Clone, Default)]
struct Track {
    /// Monotonic ns when the current outlier streak began.
    outlier_since: Option<u64>,
    /// Monotonic ns when a raised verdict last looked healthy (release clock).
    healthy_since: Option<u64>,
    raised: bool,
}

#[derive(Debug, Default)]
pub struct Analysis {
    pub cfg: AnalysisConfig,
    tracks: HashMap<(ProcKey, &'static str), Track>,
}

pub fn median(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// Peer statistics for one rank: (median, MAD) of the other ranks' values.
fn peer_stats(values: &[(usize, f64)], me: usize) -> Option<(f64, f64)> {
    let mut peers: Vec<f64> = values
        .iter()
        .filter(|(i, _)| *i != me)
        .map(|(_, v)| *v)
        .collect();
    let m = median(&mut peers)?;
    let mut dev: Vec<f64> = peers.iter().map(|p| (p - m).abs()).collect();
    Some((m, median(&mut dev).unwrap_or(0.0)))
}

impl Analysis {
    pub fn new(cfg: AnalysisConfig) -> Self {
        Analysis {
            cfg,
            tracks: HashMap::new(),
        }
    }

    /// Adds verdicts (and raise/clear events) to the frame.
    pub fn apply(&mut self, frame: &mut Frame) {
        let now = frame.mono_ns;
        let mut verdicts = Vec::new();
        let mut events = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let mut jobs: BTreeMap<Option<String>, Vec<usize>> = BTreeMap::new();
        for (i, r) in frame.ranks.iter().enumerate() {
            jobs.entry(r.labels.job.clone()).or_default().push(i);
        }
        for members in jobs.values() {
            if members.len() < self.cfg.min_ranks {
                continue;
            }
            for rule in RULES {
                let values: Vec<(usize, f64)> = members
                    .iter()
                    .filter_map(|i| frame.ranks[*i].signal(rule.signal).map(|v| (*i, v)))
                    .collect();
                if values.len() < self.cfg.min_ranks {
                    continue;
                }
                let confirm_rule = rule.confirm_by.map(|(c, floor)| Rule {
                    signal: c,
                    abs_floor: floor,
                    kind: Kind::High,
                    always_critical: false,
                    confirm_by: None,
                });
                let confirm: Vec<(usize, f64)> = rule
                    .confirm_by
                    .map(|(c, _)| {
                        members
                            .iter()
                            .filter_map(|i| frame.ranks[*i].signal(c).map(|v| (*i, v)))
                            .collect()
                    })
                    .unwrap_or_default();
                let cfg = self.cfg.clone();
                // Does the confirming signal single this rank out too?
                let confirms = |i: usize, ratio: f64| -> bool {
                    let Some((_, cv)) = confirm.iter().find(|(j, _)| *j == i) else {
                        return true;
                    };
                    if confirm.len() < cfg.min_ranks {
                        return true;
                    }
                    peer_stats(&confirm, i).is_some_and(|(m, mad)| {
                        let r = confirm_rule.as_ref().expect("confirm_by is set");
                        Self::is_outlier(&cfg, *cv, m, mad, r, ratio)
                    })
                };
                for (i, v) in &values {
                    let Some((m, mad)) = peer_stats(&values, *i) else {
                        continue;
                    };
                    let rank = &frame.ranks[*i];
                    let key = (rank.key, rule.signal);
                    seen.insert(key);
                    let outlier = Self::is_outlier(&cfg, *v, m, mad, rule, self.cfg.ratio_floor)
                        && confirms(*i, self.cfg.ratio_floor);
                    let still = Self::is_outlier(&cfg, *v, m, mad, rule, self.cfg.release_ratio)
                        && confirms(*i, self.cfg.release_ratio);
                    let t = self.tracks.entry(key).or_default();
                    if outlier {
                        t.outlier_since.get_or_insert(now);
                        t.healthy_since = None;
                    } else if t.raised && still {
                        // In the hysteresis band: neither worse nor healthy.
                        t.healthy_since = None;
                    } else if t.raised {
                        t.healthy_since.get_or_insert(now);
                    } else {
                        t.outlier_since = None;
                    }
                    let age =
                        |since: Option<u64>| since.map(|s| now.saturating_sub(s) as f64 / 1e9);
                    let mut just_raised = false;
                    if !t.raised
                        && age(t.outlier_since).is_some_and(|a| a >= self.cfg.raise_after_s)
                    {
                        t.raised = true;
                        just_raised = true;
                    }
                    if t.raised
                        && age(t.healthy_since).is_some_and(|a| a >= self.cfg.release_after_s)
                    {
                        *t = Track::default();
                        events.push(Event {
                            wall_ns: frame.wall_ns,
                            kind: EventKind::VerdictCleared,
                            message: format!(
                                "{}: {} back in line with peers",
                                rank.display_name(),
                                label(rule.signal)
                            ),
                        });
                        continue;
                    }
                    if t.raised {
                        let for_s = age(t.outlier_since).unwrap_or(0.0);
                        let v = verdict(rank, rule, *v, m, for_s);
                        if just_raised {
                            events.push(Event {
                                wall_ns: frame.wall_ns,
                                kind: EventKind::VerdictRaised,
                                message: v.message.clone(),
                            });
                        }
                        verdicts.push(v);
                    }
                }
            }
        }
        // Ranks or signals that disappeared lose their state.
        self.tracks.retain(|k, _| seen.contains(k));
        verdicts.sort_by(|a, b| {
            b.severity
                .cmp(&a.severity)
                .then(b.ratio.total_cmp(&a.ratio))
        });
        frame.verdicts = verdicts;
        frame.events.extend(events);
    }

    /// `ratio` is the raise ratio, or the (lower) release ratio for hysteresis.
    fn is_outlier(cfg: &AnalysisConfig, v: f64, m: f64, mad: f64, rule: &Rule, ratio: f64) -> bool {
        let releasing = ratio < cfg.ratio_floor;
        let floor = rule.abs_floor * if releasing { 0.5 } else { 1.0 };
        let spread = cfg.mad_k * 1.4826 * mad;
        match rule.kind {
            Kind::High => v - m >= floor && v >= ratio * m && v - m > spread,
            Kind::Low(factor) => {
                let factor = if releasing {
                    1.0 + (factor - 1.0) / 2.0
                } else {
                    factor
                };
                m - v >= floor && v * factor <= m && m - v > spread
            }
            Kind::Flag => v >= rule.abs_floor && m < rule.abs_floor,
        }
    }
}

fn label(signal: &str) -> &'static str {
    info(signal).map(|i| i.label).unwrap_or("signal")
}

/// Ratio against the peers' median; a zero median is lifted to 1 % of the
/// rule's floor so the ratio stays finite and meaningful.
pub fn ratio(v: f64, m: f64, floor: f64) -> f64 {
    v / m.max(floor / 100.0)
}

fn verdict(rank: &RankFrame, rule: &Rule, v: f64, m: f64, for_s: f64) -> Verdict {
    let name = rank.display_name();
    let what = label(rule.signal);
    let secs = for_s.max(0.0);
    let (r, message) = match rule.kind {
        Kind::Flag => (
            v / m.max(0.01),
            format!("{name}: {what} while its peers are not, for {secs:.0} s"),
        ),
        Kind::Low(_) => {
            let r = m / v.max(m / 100.0).max(f64::MIN_POSITIVE);
            let (vs, ms) = (format_value(rule.signal, v), format_value(rule.signal, m));
            (
                r,
                format!("{name}: {what} {vs} vs peers {ms} ({r:.1}x lower) for {secs:.0} s"),
            )
        }
        Kind::High if m <= rule.abs_floor / 100.0 => {
            let (vs, ms) = (format_value(rule.signal, v), format_value(rule.signal, m));
            (
                ratio(v, m, rule.abs_floor),
                format!("{name}: {what} {vs} vs peers {ms} for {secs:.0} s"),
            )
        }
        Kind::High => {
            let r = ratio(v, m, rule.abs_floor);
            let (vs, ms) = (format_value(rule.signal, v), format_value(rule.signal, m));
            (
                r,
                format!("{name}: {what} {vs} vs peers {ms} ({r:.0}x) for {secs:.0} s"),
            )
        }
    };
    Verdict {
        rank: rank.labels.rank,
        pid: rank.key.pid,
        job: rank.labels.job.clone(),
        signal: rule.signal.to_string(),
        value: v,
        peer_median: m,
        ratio: r,
        for_s,
        severity: if r >= 10.0 || rule.always_critical {
            Severity::Critical
        } else {
            Severity::Warning
        },
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{Labels, RankCounters};

    fn rank(i: u32, run_delay: f64) -> RankFrame {
        let mut signals = crate::frame::Signals::new();
        signals.insert("run_delay_ms_per_s".into(), run_delay);
        RankFrame {
            key: ProcKey {
                pid: 100 + i,
                start_time: 1,
            },
            comm: "r".into(),
            labels: Labels {
                rank: Some(i),
                job: Some("j".into()),
                ..Default::default()
            },
            state: "S".into(),
            netns: None,
            gpu: None,
            counters: RankCounters::default(),
            signals,
            sockets: vec![],
            threads: vec![],
            histograms: Default::default(),
        }
    }

    #[test]
    fn rtt_verdicts_need_the_link_to_be_slow_too() {
        // A ring with 50 ms on rank 2's link: rank 1's connection to rank 2 is
        // as slow as rank 2's own, but rank 1's link carries a fast one.
        let mut a = Analysis::default();
        let p50 = [100.0, 50_000.0, 50_000.0, 100.0];
        let link = [100.0, 100.0, 50_000.0, 100.0];
        let mut last = Vec::new();
        for step in 0..6 {
            let mut f = frame(step as f64 * 0.5, &[0.0; 4]);
            for (i, r) in f.ranks.iter_mut().enumerate() {
                r.signals.insert("rtt_p50_us".into(), p50[i]);
                r.signals.insert("link_rtt_us".into(), link[i]);
            }
            a.apply(&mut f);
            last = f.verdicts;
        }
        let flagged: Vec<(Option<u32>, &str)> =
            last.iter().map(|v| (v.rank, v.signal.as_str())).collect();
        assert_eq!(flagged, vec![(Some(2), "rtt_p50_us")]);
    }

    fn frame(t_s: f64, vals: &[f64]) -> Frame {
        Frame {
            mono_ns: (t_s * 1e9) as u64,
            interval_ms: 500,
            ranks: vals
                .iter()
                .enumerate()
                .map(|(i, v)| rank(i as u32, *v))
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn raises_after_persistence_and_clears_with_hysteresis() {
        let mut a = Analysis::default();
        let mut t = 0.0;
        let mut step = |a: &mut Analysis, vals: &[f64]| {
            let mut f = frame(t, vals);
            a.apply(&mut f);
            t += 0.5;
            f
        };
        // Not yet: an outlier must persist 1.5 s.
        for _ in 0..3 {
            assert!(step(&mut a, &[0.5, 0.4, 120.0, 0.6]).verdicts.is_empty());
        }
        let f = step(&mut a, &[0.5, 0.4, 120.0, 0.6]);
        assert_eq!(f.verdicts.len(), 1);
        let v = &f.verdicts[0];
        assert_eq!((v.rank, v.signal.as_str()), (Some(2), "run_delay_ms_per_s"));
        assert_eq!(v.peer_median, 0.5);
        assert!(
            v.message
                .starts_with("rank 2: run-queue delay 120 ms/s vs peers 0.50 ms/s (240x)"),
            "{}",
            v.message
        );
        assert!(f.events.iter().any(|e| e.kind == EventKind::VerdictRaised));
        // Inside the hysteresis band (2x..3x, above half the floor): stays raised.
        for _ in 0..6 {
            assert_eq!(step(&mut a, &[10.0, 10.0, 25.0, 10.0]).verdicts.len(), 1);
        }
        // Healthy: cleared after 2 s.
        let mut cleared = false;
        for _ in 0..6 {
            let f = step(&mut a, &[1.0, 1.0, 1.0, 1.0]);
            cleared |= f.events.iter().any(|e| e.kind == EventKind::VerdictCleared);
        }
        assert!(cleared);
        assert!(step(&mut a, &[1.0, 1.0, 1.0, 1.0]).verdicts.is_empty());
    }

    #[test]
    fn tiny_numbers_and_small_jobs_never_alarm() {
        let mut a = Analysis::default();
        for i in 0..20 {
            let mut f = frame(i as f64 * 0.5, &[0.01, 0.01, 5.0, 0.01]);
            a.apply(&mut f);
            assert!(f.verdicts.is_empty(), "5 ms/s is under the floor");
            let mut f = frame(i as f64 * 0.5, &[0.5, 300.0]);
            a.apply(&mut f);
            assert!(f.verdicts.is_empty(), "two ranks have no majority");
        }
    }

    #[test]
    fn noisy_peers_raise_the_bar() {
        let mut a = Analysis::default();
        for i in 0..10 {
            let mut f = frame(i as f64 * 0.5, &[10.0, 60.0, 90.0, 150.0, 20.0]);
            a.apply(&mut f);
            assert!(
                f.verdicts.is_empty(),
                "150 among peers spread 10..90 is not an outlier"
            );
        }
    }

    #[test]
    fn median_even_and_odd() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&mut []), None);
    }
}
