//! Verdicts: per (rank, rule), an outlier streak must persist before a
//! verdict is raised, and a raised verdict is released only after it stayed
//! healthy for a while (hysteresis). Raising and clearing are events. A
//! verdict reports its window: the rank's mean and peak over the ticks it
//! stood out, and the peers' mean median over the same ticks, so a held
//! verdict never reads "0 vs 0".

use super::peers::{is_outlier, peer_stats, Bar};
use super::rules::{Kind, Rule, RULES};
use super::AnalysisConfig;
use crate::model::format::value;
use crate::model::{Event, EventKind, Frame, ProcKey, RankFrame, Severity, Sig, Text, Verdict};
use foldhash::HashMap;
use std::collections::BTreeMap;

/// A score at or above this is critical (see `Verdict::score`).
pub const CRITICAL_SCORE: f64 = 8.0;
/// What a flag (lost GPU, throttled) scores.
pub const FLAG_SCORE: f64 = 10.0;

#[derive(Debug, Clone, Default)]
struct Track {
    /// Monotonic ns when the current outlier streak began.
    outlier_since: Option<u64>,
    /// Monotonic ns when a raised verdict last looked healthy (release clock).
    healthy_since: Option<u64>,
    raised: bool,
    /// Over the ticks the rank stood out in this streak: sums and peak.
    window: Window,
    /// The judgement that last saw it: a track the current one did not
    /// see (its rank or signal gone) is dropped at its end. A stamp rather
    /// than a set of each tick's keys: ~400 hashes a tick fewer for 8 ranks
    /// and 25 rules.
    judged: u64,
}

#[derive(Debug, Clone, Copy, Default)]
struct Window {
    n: u32,
    sum_v: f64,
    sum_m: f64,
    peak: f64,
}

impl Window {
    fn add(&mut self, v: f64, m: f64, low: bool) {
        self.n += 1;
        self.sum_v += v;
        self.sum_m += m;
        self.peak = if self.n == 1 {
            v
        } else if low {
            self.peak.min(v)
        } else {
            self.peak.max(v)
        };
    }

    /// (mean value, mean peer median, peak), or the tick's own when empty.
    fn means(&self, v: f64, m: f64) -> (f64, f64, f64) {
        if self.n == 0 {
            return (v, m, v);
        }
        let n = self.n as f64;
        (self.sum_v / n, self.sum_m / n, self.peak)
    }
}

#[derive(Debug, Default)]
pub struct Tracker {
    tracks: HashMap<(ProcKey, Sig), Track>,
    /// How many times `judge` ran: the stamp of this one's tracks.
    judgements: u64,
}

/// The values of one signal across a job's members, (rank index, value),
/// in `out` (one buffer for every rule of a tick, not a vector each).
fn values_of(frame: &Frame, members: &[usize], sig: Sig, out: &mut Vec<(usize, f64)>) {
    out.clear();
    out.extend(
        members
            .iter()
            .filter_map(|i| frame.ranks[*i].signal(sig).map(|v| (*i, v))),
    );
}

/// The ranks of each job (name and launch), by index.
pub fn jobs(frame: &Frame) -> BTreeMap<(Option<Text>, Option<Text>), Vec<usize>> {
    let mut jobs: BTreeMap<(Option<Text>, Option<Text>), Vec<usize>> = BTreeMap::new();
    // Stale ranks (a node that stopped reporting) are shown, not compared.
    for (i, r) in frame.ranks.iter().enumerate().filter(|(_, r)| !r.stale) {
        jobs.entry((r.labels.job.clone(), r.labels.job_id.clone()))
            .or_default()
            .push(i);
    }
    jobs
}

impl Tracker {
    /// Outliers not raised yet, per rank: a rank on its way to a verdict
    /// can already be its neighbours' cause.
    pub fn pending(&self) -> Vec<(ProcKey, Sig)> {
        self.tracks
            .iter()
            .filter(|(_, t)| !t.raised && t.outlier_since.is_some())
            .map(|(k, _)| *k)
            .collect()
    }

    /// Judges every rule for every job of the frame; returns the verdicts
    /// in force, each with whether it was raised in this tick, and adds the
    /// clear events (raise events wait until causes are known).
    pub fn judge(&mut self, cfg: &AnalysisConfig, frame: &mut Frame) -> Vec<(Verdict, bool)> {
        let now = frame.mono_ns;
        self.judgements += 1;
        let judged = self.judgements;
        let mut verdicts = Vec::new();
        let mut events = Vec::new();
        let raise = Bar {
            ratio: cfg.ratio_floor,
            mad_k: cfg.mad_k,
            releasing: false,
        };
        let hold = Bar {
            ratio: cfg.release_ratio,
            releasing: true,
            ..raise
        };
        let (mut values, mut confirm) = (Vec::new(), Vec::new());
        for members in jobs(frame).values() {
            if members.len() < cfg.min_ranks {
                continue;
            }
            for rule in RULES {
                values_of(frame, members, rule.signal, &mut values);
                if values.len() < cfg.min_ranks {
                    continue;
                }
                match rule.confirm_by {
                    Some((c, _)) => values_of(frame, members, c, &mut confirm),
                    None => confirm.clear(),
                }
                let (values, confirm) = (&values, &confirm);
                // Does the confirming signal single this rank out too?
                let confirms = |i: usize, bar: Bar| -> bool {
                    let Some((c, floor)) = rule.confirm_by else {
                        return true;
                    };
                    let Some((_, cv)) = confirm.iter().find(|(j, _)| *j == i) else {
                        return true;
                    };
                    if confirm.len() < cfg.min_ranks {
                        return true;
                    }
                    let by = Rule {
                        signal: c,
                        abs_floor: floor,
                        kind: Kind::High,
                        always_critical: false,
                        confirm_by: None,
                    };
                    peer_stats(confirm, i).is_some_and(|(m, mad)| is_outlier(*cv, m, mad, &by, bar))
                };
                for (i, v) in values {
                    let Some((m, mad)) = peer_stats(values, *i) else {
                        continue;
                    };
                    let rank = &frame.ranks[*i];
                    let key = (rank.key, rule.signal);
                    let outlier = is_outlier(*v, m, mad, rule, raise) && confirms(*i, raise);
                    let still = is_outlier(*v, m, mad, rule, hold) && confirms(*i, hold);
                    let t = self.tracks.entry(key).or_default();
                    t.judged = judged;
                    if outlier {
                        if t.outlier_since.is_none() {
                            t.window = Window::default();
                        }
                        t.outlier_since.get_or_insert(now);
                        t.healthy_since = None;
                        t.window.add(*v, m, matches!(rule.kind, Kind::Low(_)));
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
                    if !t.raised && age(t.outlier_since).is_some_and(|a| a >= cfg.raise_after_s) {
                        t.raised = true;
                        just_raised = true;
                    }
                    if t.raised && age(t.healthy_since).is_some_and(|a| a >= cfg.release_after_s) {
                        *t = Track {
                            judged,
                            ..Track::default()
                        };
                        events.push(Event::new(
                            frame.wall_ns,
                            EventKind::VerdictCleared,
                            format!(
                                "{}: {} back in line with peers",
                                rank.display_name(),
                                rule.signal.label()
                            ),
                        ));
                        continue;
                    }
                    if t.raised {
                        let (mean, peers, peak) = t.window.means(*v, m);
                        let for_s = age(t.outlier_since).unwrap_or(0.0);
                        verdicts.push((verdict(rank, rule, mean, peers, peak, for_s), just_raised));
                    }
                }
            }
        }
        // Ranks or signals that disappeared lose their state.
        self.tracks.retain(|_, t| t.judged == judged);
        frame.events.extend(events);
        verdicts
    }
}

/// Ratio against the peers' median; a zero median is lifted to 1 % of the
/// rule's floor so the ratio stays finite and meaningful.
pub fn ratio(v: f64, m: f64, floor: f64) -> f64 {
    v / m.max(floor / 100.0)
}

/// The verdict's sentence without its causes: "rank 2: run-queue delay
/// 297 ms/s vs peers 20.3 ms/s (15x) for 5 s".
pub fn base_message(v: &Verdict) -> String {
    let name = match v.rank {
        Some(r) => format!("rank {r}"),
        None => format!("pid {}", v.pid),
    };
    let what = v.signal.label();
    let secs = v.for_s.max(0.0);
    let Some(rule) = super::rules::rule_for(v.signal) else {
        return format!("{name}: {what}");
    };
    let (vs, ms) = (value(v.signal, v.value), value(v.signal, v.peer_median));
    match rule.kind {
        Kind::Flag => format!("{name}: {what} while its peers are not, for {secs:.0} s"),
        Kind::Low(_) => format!(
            "{name}: {what} {vs} vs peers {ms} ({:.1}x lower) for {secs:.0} s",
            v.ratio
        ),
        Kind::High if v.peer_median <= rule.abs_floor / 100.0 => {
            format!("{name}: {what} {vs} vs peers ~0 for {secs:.0} s")
        }
        Kind::High => format!(
            "{name}: {what} {vs} vs peers {ms} ({:.0}x) for {secs:.0} s",
            v.ratio
        ),
    }
}

fn verdict(rank: &RankFrame, rule: &Rule, v: f64, m: f64, peak: f64, for_s: f64) -> Verdict {
    let (r, score) = match rule.kind {
        Kind::Flag => (v / m.max(0.01), FLAG_SCORE),
        Kind::Low(_) => (
            m / v.max(m / 100.0).max(f64::MIN_POSITIVE),
            (m - v) / rule.abs_floor,
        ),
        Kind::High => (ratio(v, m, rule.abs_floor), (v - m) / rule.abs_floor),
    };
    Verdict {
        rank: rank.labels.rank,
        pid: rank.key.pid,
        job: rank.labels.job.clone(),
        signal: rule.signal,
        value: v,
        peak,
        peer_median: m,
        ratio: r,
        score,
        for_s,
        severity: if score >= CRITICAL_SCORE || rule.always_critical {
            Severity::Critical
        } else {
            Severity::Warning
        },
        message: Text::default(),
        consequence_of: None,
        culprits: Vec::new(),
        detail: None,
    }
}
