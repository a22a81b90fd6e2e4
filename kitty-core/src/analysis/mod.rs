//! Analysis: ranks of one job do the same work, so each rank is compared
//! with the median of its peers, per signal (median + MAD, a ratio floor and
//! an absolute floor), raised only after it persists and released with
//! hysteresis. The stages, in order: link attribution (`links`), then the
//! verdicts (`verdicts`, from the `rules`). `bands` and `talkers` are view
//! models computed from frames for the TUI.

pub mod bands;
pub mod links;
pub mod peers;
pub mod rules;
pub mod talkers;
pub mod verdicts;

use crate::model::Frame;

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

#[derive(Debug, Default)]
pub struct Analysis {
    pub cfg: AnalysisConfig,
    verdicts: verdicts::Tracker,
}

impl Analysis {
    pub fn new(cfg: AnalysisConfig) -> Self {
        Analysis {
            cfg,
            verdicts: Default::default(),
        }
    }

    /// Runs every analysis stage on the frame: link attribution, then the
    /// verdicts (and their raise / clear events).
    pub fn apply(&mut self, frame: &mut Frame) {
        links::attribute(frame);
        frame.verdicts = self.verdicts.judge(&self.cfg, frame);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{EventKind, Labels, ProcKey, RankCounters, RankFrame, Sig, Signals};

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
        // Not yet: an outlier must persist 1.5 s.
        for _ in 0..3 {
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
}
