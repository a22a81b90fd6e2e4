//! Verdicts: per (rank, rule), an outlier streak must persist before a
//! verdict is raised, and a raised verdict is released only after it stayed
//! healthy for a while (hysteresis). Raising and clearing are events.

use super::peers::{is_outlier, peer_stats, Bar};
use super::rules::{Kind, Rule, RULES};
use super::AnalysisConfig;
use crate::model::format::value;
use crate::model::{Event, EventKind, Frame, ProcKey, RankFrame, Severity, Sig, Text, Verdict};
use std::collections::{BTreeMap, HashMap, HashSet};

#[derive(Debug, Clone, Default)]
struct Track {
    /// Monotonic ns when the current outlier streak began.
    outlier_since: Option<u64>,
    /// Monotonic ns when a raised verdict last looked healthy (release clock).
    healthy_since: Option<u64>,
    raised: bool,
}

#[derive(Debug, Default)]
pub struct Tracker {
    tracks: HashMap<(ProcKey, Sig), Track>,
}

/// The values of one signal across a job's members: (rank index, value).
fn values_of(frame: &Frame, members: &[usize], sig: Sig) -> Vec<(usize, f64)> {
    members
        .iter()
        .filter_map(|i| frame.ranks[*i].signal(sig).map(|v| (*i, v)))
        .collect()
}

impl Tracker {
    /// Judges every rule for every job of the frame; returns the verdicts
    /// in force and adds raise / clear events.
    pub fn judge(&mut self, cfg: &AnalysisConfig, frame: &mut Frame) -> Vec<Verdict> {
        let now = frame.mono_ns;
        let mut verdicts = Vec::new();
        let mut events = Vec::new();
        let mut seen = HashSet::new();
        let mut jobs: BTreeMap<Option<Text>, Vec<usize>> = BTreeMap::new();
        for (i, r) in frame.ranks.iter().enumerate() {
            jobs.entry(r.labels.job.clone()).or_default().push(i);
        }
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
        for members in jobs.values() {
            if members.len() < cfg.min_ranks {
                continue;
            }
            for rule in RULES {
                let values = values_of(frame, members, rule.signal);
                if values.len() < cfg.min_ranks {
                    continue;
                }
                let confirm = rule
                    .confirm_by
                    .map(|(c, _)| values_of(frame, members, c))
                    .unwrap_or_default();
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
                    peer_stats(&confirm, i)
                        .is_some_and(|(m, mad)| is_outlier(*cv, m, mad, &by, bar))
                };
                for (i, v) in &values {
                    let Some((m, mad)) = peer_stats(&values, *i) else {
                        continue;
                    };
                    let rank = &frame.ranks[*i];
                    let key = (rank.key, rule.signal);
                    seen.insert(key);
                    let outlier = is_outlier(*v, m, mad, rule, raise) && confirms(*i, raise);
                    let still = is_outlier(*v, m, mad, rule, hold) && confirms(*i, hold);
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
                    if !t.raised && age(t.outlier_since).is_some_and(|a| a >= cfg.raise_after_s) {
                        t.raised = true;
                        just_raised = true;
                    }
                    if t.raised && age(t.healthy_since).is_some_and(|a| a >= cfg.release_after_s) {
                        *t = Track::default();
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
                        let v = verdict(rank, rule, *v, m, age(t.outlier_since).unwrap_or(0.0));
                        if just_raised {
                            events.push(Event::new(
                                frame.wall_ns,
                                EventKind::VerdictRaised,
                                v.message.as_str(),
                            ));
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
        frame.events.extend(events);
        verdicts
    }
}

/// Ratio against the peers' median; a zero median is lifted to 1 % of the
/// rule's floor so the ratio stays finite and meaningful.
pub fn ratio(v: f64, m: f64, floor: f64) -> f64 {
    v / m.max(floor / 100.0)
}

fn verdict(rank: &RankFrame, rule: &Rule, v: f64, m: f64, for_s: f64) -> Verdict {
    let name = rank.display_name();
    let what = rule.signal.label();
    let secs = for_s.max(0.0);
    let (vs, ms) = (value(rule.signal, v), value(rule.signal, m));
    let (r, message) = match rule.kind {
        Kind::Flag => (
            v / m.max(0.01),
            format!("{name}: {what} while its peers are not, for {secs:.0} s"),
        ),
        Kind::Low(_) => {
            let r = m / v.max(m / 100.0).max(f64::MIN_POSITIVE);
            (
                r,
                format!("{name}: {what} {vs} vs peers {ms} ({r:.1}x lower) for {secs:.0} s"),
            )
        }
        Kind::High if m <= rule.abs_floor / 100.0 => (
            ratio(v, m, rule.abs_floor),
            format!("{name}: {what} {vs} vs peers {ms} for {secs:.0} s"),
        ),
        Kind::High => {
            let r = ratio(v, m, rule.abs_floor);
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
        signal: rule.signal,
        value: v,
        peer_median: m,
        ratio: r,
        for_s,
        severity: if r >= 10.0 || rule.always_critical {
            Severity::Critical
        } else {
            Severity::Warning
        },
        message: Text::message(message),
    }
}
