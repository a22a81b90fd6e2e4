//! Peer bands: for each rank and each charted signal, the median of its
//! peers (the other ranks of its job) over time, computed once per frame so
//! that the detail view only draws them.

use super::peers::median;
use crate::model::history::Ring;
use crate::model::{Frame, ProcKey, Sig};
use std::collections::HashMap;

pub struct PeerBands {
    signals: Vec<Sig>,
    cap: usize,
    rings: HashMap<(ProcKey, Sig), Ring>,
}

impl PeerBands {
    /// Bands for `signals`, each holding at most `cap` points.
    pub fn new(signals: &[Sig], cap: usize) -> Self {
        PeerBands {
            signals: signals.to_vec(),
            cap,
            rings: HashMap::new(),
        }
    }

    pub fn push(&mut self, f: &Frame) {
        for members in super::verdicts::jobs(f).values() {
            for &sig in &self.signals {
                for &me in members {
                    let mut peers: Vec<f64> = members
                        .iter()
                        .filter(|&&j| j != me)
                        .filter_map(|&j| f.ranks[j].signal(sig))
                        .collect();
                    if let Some(m) = median(&mut peers) {
                        self.rings
                            .entry((f.ranks[me].key, sig))
                            .or_insert_with(|| Ring::new(self.cap))
                            .push(f.mono_ns, m);
                    }
                }
            }
        }
        // Ranks that are gone keep their band until it ages out.
        let oldest = f
            .mono_ns
            .saturating_sub(self.cap as u64 * f.interval_ms.max(1) * 1_000_000);
        self.rings
            .retain(|_, r| r.points().last().is_some_and(|p| p.0 >= oldest));
    }

    /// The peers' median of `sig` over time for this rank.
    pub fn band(&self, key: ProcKey, sig: Sig) -> Option<&Ring> {
        self.rings.get(&(key, sig))
    }

    pub fn clear(&mut self) {
        self.rings.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::RankFrame;

    #[test]
    fn a_rank_band_is_its_peers_median() {
        let mut f = Frame {
            mono_ns: 7,
            interval_ms: 500,
            ..Default::default()
        };
        for (i, v) in [1.0, 3.0, 100.0, 5.0].into_iter().enumerate() {
            let mut r = RankFrame::default();
            r.key.pid = i as u32;
            r.signals.set(Sig::CpuPct, v);
            f.ranks.push(r);
        }
        let mut b = PeerBands::new(&[Sig::CpuPct], 10);
        b.push(&f);
        let band = b.band(f.ranks[2].key, Sig::CpuPct).unwrap();
        assert_eq!(band.last(), Some(3.0), "median of 1, 3, 5");
    }
}
