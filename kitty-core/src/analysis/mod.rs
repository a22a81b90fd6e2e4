//! Analysis: ranks of one job do the same work, so each rank is compared
//! with the median of its peers, per signal (median + MAD, a ratio floor and
//! an absolute floor), raised only after it persists and released with
//! hysteresis. The stages, in order: link attribution (`links`), the
//! verdicts (`verdicts`, from the `rules`), their causes and consequences
//! (`causes`), NCCL's late arrivals joined to their causes (`effects`),
//! whole slow nodes in a frame that spans nodes (`nodes`), the long-window
//! placement findings (`findings`). `bands` and `talkers` are view models
//! computed from frames for the TUI.

pub mod bands;
pub mod causes;
pub mod effects;
pub mod findings;
pub mod links;
pub mod nodes;
pub mod peers;
pub mod rules;
pub mod talkers;
pub mod verdicts;

use crate::model::{Event, EventKind, Frame, Verdict};

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
    /// The steady window findings are judged on, seconds.
    pub findings_window_s: f64,
}

impl Default for AnalysisConfig {
    fn default() -> Self {
        AnalysisConfig {
            ratio_floor: 3.0,
            release_ratio: 2.0,
            mad_k: 5.0,
            raise_after_s: 1.0,
            release_after_s: 1.5,
            min_ranks: 3,
            findings_window_s: 60.0,
        }
    }
}

#[derive(Default)]
pub struct Analysis {
    pub cfg: AnalysisConfig,
    verdicts: verdicts::Tracker,
    causes: causes::Causes,
    findings: findings::Findings,
    /// The findings of the previous frame (to announce new ones once).
    shown: Vec<(crate::model::FindingKind, Vec<u32>)>,
    /// The node verdicts of the previous frame.
    shown_nodes: Vec<(crate::model::Text, crate::model::Sig)>,
}

impl Analysis {
    pub fn new(cfg: AnalysisConfig) -> Self {
        Analysis {
            cfg,
            verdicts: Default::default(),
            causes: Default::default(),
            findings: Default::default(),
            shown: Vec::new(),
            shown_nodes: Vec::new(),
        }
    }

    /// Runs every analysis stage on the frame: link attribution, the
    /// verdicts, their causes; raise and clear events.
    pub fn apply(&mut self, frame: &mut Frame) {
        links::attribute(frame);
        let judged = self.verdicts.judge(&self.cfg, frame);
        let raised: Vec<_> = judged
            .iter()
            .filter(|(_, r)| *r)
            .map(|(v, _)| (v.pid, v.signal))
            .collect();
        let mut verdicts: Vec<Verdict> = judged.into_iter().map(|(v, _)| v).collect();
        self.causes
            .apply(frame, &mut verdicts, &self.verdicts.pending());
        effects::apply(frame, &mut verdicts);
        for v in verdicts
            .iter()
            .filter(|v| raised.contains(&(v.pid, v.signal)))
        {
            frame.events.push(Event::new(
                frame.wall_ns,
                EventKind::VerdictRaised,
                v.message.as_str(),
            ));
        }
        frame.verdicts = verdicts;
        frame.node_verdicts = nodes::judge(frame);
        for n in &frame.node_verdicts {
            if !self
                .shown_nodes
                .iter()
                .any(|(node, sig)| *node == n.node && *sig == n.signal)
            {
                frame.events.push(Event::new(
                    frame.wall_ns,
                    EventKind::VerdictRaised,
                    n.message.as_str(),
                ));
            }
        }
        self.shown_nodes = frame
            .node_verdicts
            .iter()
            .map(|n| (n.node.clone(), n.signal))
            .collect();
        let findings = self.findings.apply(&self.cfg, frame);
        for f in &findings {
            let seen = frame_had(&self.shown, f);
            if !seen {
                frame.events.push(Event::new(
                    frame.wall_ns,
                    EventKind::FindingFound,
                    f.message.as_str(),
                ));
            }
        }
        self.shown = findings.iter().map(|f| (f.kind, f.pids.clone())).collect();
        frame.findings = findings;
    }
}

/// Was this finding shown in the previous frame?
fn frame_had(shown: &[(crate::model::FindingKind, Vec<u32>)], f: &crate::model::Finding) -> bool {
    shown.iter().any(|(k, p)| *k == f.kind && *p == f.pids)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{
        EventKind, Labels, ProcKey, RankCounters, RankFrame, Severity, Sig, Signals,
    };

    fn rank(i: u32, run_delay: f64) -> RankFrame {
        let mut signals = Signals::new();
        signals.set(Sig::RunDelayMsPerS, run_delay);
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
            ..Default::default()
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
                r.signals.set(Sig::RttP50Us, p50[i]);
                r.signals.set(Sig::LinkRttUs, link[i]);
            }
            a.apply(&mut f);
            last = f.verdicts;
        }
        let flagged: Vec<(Option<u32>, Sig)> = last.iter().map(|v| (v.rank, v.signal)).collect();
        assert_eq!(flagged, vec![(Some(2), Sig::RttP50Us)]);
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
        // Not yet: an outlier must persist 1 s.
        for _ in 0..2 {
            assert!(step(&mut a, &[0.5, 0.4, 120.0, 0.6]).verdicts.is_empty());
        }
        let f = step(&mut a, &[0.5, 0.4, 120.0, 0.6]);
        assert_eq!(f.verdicts.len(), 1);
        let v = &f.verdicts[0];
        assert_eq!((v.rank, v.signal), (Some(2), Sig::RunDelayMsPerS));
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
        // Healthy: cleared after 1.5 s.
        let mut cleared = false;
        for _ in 0..6 {
            let f = step(&mut a, &[1.0, 1.0, 1.0, 1.0]);
            cleared |= f.events.iter().any(|e| e.kind == EventKind::VerdictCleared);
        }
        assert!(cleared);
        assert!(step(&mut a, &[1.0, 1.0, 1.0, 1.0]).verdicts.is_empty());
    }

    #[test]
    fn a_verdict_whose_signal_went_away_starts_over() {
        let mut a = Analysis::default();
        let mut t = 0.0;
        let mut step = |a: &mut Analysis, vals: &[f64], gone: bool| {
            let mut f = frame(t, vals);
            if gone {
                // Rank 2 without the signal this tick (a source lost).
                f.ranks[2].signals = Signals::new();
            }
            a.apply(&mut f);
            t += 0.5;
            f.verdicts.len()
        };
        let starved = [0.5, 0.4, 120.0, 0.6];
        let raised: Vec<usize> = (0..3).map(|_| step(&mut a, &starved, false)).collect();
        assert_eq!(raised, [0, 0, 1]);
        assert_eq!(step(&mut a, &starved, true), 0);
        // Its streak was forgotten with it: it must stand out for 1 s again.
        let again: Vec<usize> = (0..3).map(|_| step(&mut a, &starved, false)).collect();
        assert_eq!(again, [0, 0, 1]);
    }

    /// A 4-rank ring (i sends to i+1) where rank 2 is starved of CPU and
    /// rank 1, which sends to it, retransmits on that connection.
    fn starved_ring(t_s: f64) -> Frame {
        let mut f = frame(t_s, &[1.0, 1.0, 300.0, 1.0]);
        let addr = |i: usize| format!("10.0.0.{}:5000", i + 1);
        let out = |i: usize| format!("10.0.0.{}:40000", i + 1);
        for i in 0..4 {
            let next = (i + 1) % 4;
            let prev = (i + 3) % 4;
            let mut to_next = crate::model::SocketFrame {
                local: out(i).into(),
                remote: addr(next).into(),
                ..Default::default()
            };
            let retrans = if i == 1 { 40.0 } else { 0.0 };
            to_next.signals.set(Sig::RetransPerS, retrans);
            let from_prev = crate::model::SocketFrame {
                local: addr(i).into(),
                remote: out(prev).into(),
                ..Default::default()
            };
            let r = &mut f.ranks[i];
            r.sockets = vec![to_next, from_prev];
            r.signals.set(Sig::RetransPerS, retrans);
        }
        // The hog holds rank 2's CPU.
        f.ranks[2].ran_instead = vec![crate::model::RanInstead {
            pid: 999,
            comm: "stress".into(),
            wait_ms_per_s: 280.0,
            share_pct: 93.0,
            cpu: 3,
            ..Default::default()
        }];
        f
    }

    #[test]
    fn a_throttled_rank_is_named_by_its_throttling_before_its_run_queue_delay() {
        // One quota gives rank 2 both verdicts; its run-queue delay scores
        // higher, but the throttling is what made it wait.
        let mut a = Analysis::default();
        let mut last = Vec::new();
        for step in 0..6 {
            let mut f = frame(step as f64 * 0.5, &[1.0, 1.0, 2000.0, 1.0]);
            for r in &mut f.ranks {
                let throttled = if r.labels.rank == Some(2) { 300.0 } else { 0.0 };
                r.signals.set(Sig::CfsThrottledMsPerS, throttled);
            }
            a.apply(&mut f);
            last = f.verdicts;
        }
        let mine: Vec<(Sig, f64)> = last
            .iter()
            .filter(|v| v.rank == Some(2))
            .map(|v| (v.signal, v.score))
            .collect();
        assert_eq!(mine.len(), 2, "{mine:?}");
        assert_eq!(mine[0].0, Sig::CfsThrottledMsPerS, "{mine:?}");
        assert_eq!(mine[1].0, Sig::RunDelayMsPerS, "{mine:?}");
        assert!(mine[1].1 > mine[0].1, "the delay scores higher: {mine:?}");
    }

    #[test]
    fn a_symptom_that_crosses_the_bar_first_is_still_a_consequence() {
        // Rank 1 retransmits from the first tick; rank 2's starvation shows
        // one tick later, so rank 1's verdict is raised while rank 2's is
        // only pending: it is a consequence from its first frame on.
        let mut a = Analysis::default();
        for step in 0..6 {
            let mut f = starved_ring(step as f64 * 0.5);
            if step == 0 {
                f.ranks[2].signals.set(Sig::RunDelayMsPerS, 1.0);
            }
            a.apply(&mut f);
            for v in f.verdicts.iter().filter(|v| v.rank == Some(1)) {
                assert!(v.is_consequence(), "step {step}: {}", v.message);
            }
            assert!(
                f.events
                    .iter()
                    .filter(|e| e.kind == EventKind::VerdictRaised)
                    .all(|e| !e.message.starts_with("rank 1: retransmits")
                        || e.message.contains("consequence")),
                "{:?}",
                f.events
            );
        }
    }

    #[test]
    fn a_neighbours_retransmits_are_the_stragglers_consequence() {
        let mut a = Analysis::default();
        let mut last = Vec::new();
        for step in 0..8 {
            let mut f = starved_ring(step as f64 * 0.5);
            a.apply(&mut f);
            last = f.verdicts;
        }
        let cause = last
            .iter()
            .find(|v| v.rank == Some(2))
            .expect("rank 2 flagged");
        assert_eq!(cause.signal, Sig::RunDelayMsPerS);
        assert!(!cause.is_consequence());
        assert!(
            cause
                .message
                .contains("`stress` (pid 999, not a rank) ran 100 % of that time on CPU 3"),
            "{}",
            cause.message
        );
        let victim = last
            .iter()
            .find(|v| v.rank == Some(1))
            .expect("rank 1's symptom");
        assert_eq!(victim.signal, Sig::RetransPerS);
        let c = victim.consequence_of.as_ref().expect("a consequence");
        assert_eq!((c.rank, c.signal), (Some(2), Sig::RunDelayMsPerS));
        assert_eq!(c.via.as_str(), "10.0.0.2:40000 -> 10.0.0.3:5000");
        assert_eq!(victim.severity, Severity::Warning);
        assert!(
            victim
                .message
                .contains("a consequence of rank 2's run-queue delay"),
            "{}",
            victim.message
        );
        assert!(
            !victim.message.contains("0 /s vs peers 0"),
            "{}",
            victim.message
        );
        // The straggler first, its consequence after it.
        assert_eq!(last[0].rank, Some(2));
        assert!(last.last().unwrap().is_consequence());
    }

    #[test]
    fn a_held_verdict_reports_its_window_not_the_current_tick() {
        let mut a = Analysis::default();
        let mut t = 0.0;
        let mut step = |a: &mut Analysis, vals: &[f64]| {
            let mut f = frame(t, vals);
            a.apply(&mut f);
            t += 0.5;
            f
        };
        for _ in 0..5 {
            step(&mut a, &[0.5, 0.4, 120.0, 0.6]);
        }
        // Back under the raise bar but inside the hysteresis band: held.
        let f = step(&mut a, &[10.0, 10.0, 25.0, 10.0]);
        let v = &f.verdicts[0];
        assert!(v.value > 100.0, "the window's mean, not 25: {}", v.value);
        assert_eq!(v.peak, 120.0);
        assert!(v.message.contains("120 ms/s"), "{}", v.message);
        // A zero median never reads "0 vs 0".
        let mut a = Analysis::default();
        let mut last = Vec::new();
        for i in 0..6 {
            let mut f = frame(i as f64 * 0.5, &[0.0, 0.0, 0.0, 0.0]);
            for (j, r) in f.ranks.iter_mut().enumerate() {
                r.signals
                    .set(Sig::RetransPerS, if j == 2 { 30.0 } else { 0.0 });
            }
            a.apply(&mut f);
            last = f.verdicts;
        }
        let v = &last[0];
        assert!(
            v.message.contains("retransmits 30 /s vs peers ~0"),
            "{}",
            v.message
        );
        assert!(
            v.score < 8.0,
            "a ratio against zero does not make it critical: {}",
            v.score
        );
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
}
