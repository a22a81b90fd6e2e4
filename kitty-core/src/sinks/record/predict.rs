//! The values a recording leaves out of a delta because the replay gives
//! them back bit for bit: a rank's rates from its counters, each socket's
//! (and the rank's) TCP rates from the sockets' tcp_info, against the frame
//! before, with the sampler's own arithmetic (`model::rates`); and (format
//! 5) a rank's latency percentiles from its own histograms, with the
//! probes' (`model::grid::quantile`). Where that recomputation, rounded as
//! recorded, equals the value written, the writer puts [`RECOMPUTED`] in
//! its place (the same from one frame to the next: a delta then spends
//! next to nothing on it); anything else stays as it was, so frames whose
//! values came from elsewhere (a cluster recording, a source that set its
//! own) lose nothing. A frame that has [`RECOMPUTED`] itself as such a
//! value is written as a keyframe.

use super::digits;
use crate::model::grid;
use crate::model::rates::{counter_rates, TcpDeltas, COUNTER_RATE_SIGNALS};
use crate::model::{Frame, HistKind, Histograms, ProcKey, RankCounters, Sig, Signals, TcpInfo};
use std::collections::HashMap;

/// What a left-out value is written as: no rate or latency is negative.
pub const RECOMPUTED: f64 = -1.0;

/// What a recording's deltas leave out, and how they are recomputed, by
/// its format's version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recomputed {
    /// Format 5 on: the rank's latency percentiles from its histograms.
    percentiles: bool,
    /// Format 6.1 on: those percentiles no greater than the recorded max
    /// (the probes' p50 and p99 are, since 6.1).
    at_most_max: bool,
}

impl Recomputed {
    /// What this kitty's writer leaves out.
    pub const WRITTEN: Recomputed = Recomputed::of_format(super::MAJOR, super::MINOR);

    pub const fn of_format(major: u16, minor: u16) -> Recomputed {
        Recomputed {
            percentiles: major >= 5,
            at_most_max: major > 6 || (major == 6 && minor >= 1),
        }
    }
}

/// What the rates of the next frame are recomputed from: the frame before's
/// time, and per rank its counters and its sockets' tcp_info.
#[derive(Debug, Default, Clone)]
pub struct Basis {
    mono_ns: u64,
    ranks: HashMap<ProcKey, (RankCounters, HashMap<u64, TcpInfo>)>,
}

impl Basis {
    pub fn of(f: &Frame) -> Basis {
        Basis {
            mono_ns: f.mono_ns,
            ranks: f
                .ranks
                .iter()
                .map(|r| {
                    let infos = r
                        .sockets
                        .iter()
                        .filter_map(|s| Some((s.inode, s.info.clone()?)))
                        .collect();
                    (r.key, (r.counters.clone(), infos))
                })
                .collect(),
        }
    }
}

/// A rank's recomputed values, and each of its sockets' (none when the
/// rank was not in the frame before).
type Predicted = (Signals, Vec<Signals>);

/// The percentiles and max the probes give for each latency histogram.
const PERCENTILES: [(HistKind, [Sig; 3]); 2] = [
    (
        HistKind::RttUs,
        [Sig::RttP50Us, Sig::RttP99Us, Sig::RttMaxUs],
    ),
    (
        HistKind::RunqUs,
        [Sig::RunqP50Us, Sig::RunqP99Us, Sig::RunqMaxUs],
    ),
];

/// A rank's p50 and p99 from its histograms as the probes compute them, and
/// the top of the highest bucket (the probes' max unless the interval's
/// largest sample lies inside that bucket, then it is kept). Only for a
/// histogram the recording gives back as it is: every bucket on the grid,
/// its bound unchanged by the recording's rounding (the writer and the
/// reader then compute from the same numbers).
/// With `at_most_max`, p50 and p99 are no greater than the max recorded
/// with them (a max left out is the top of the highest bucket, which
/// neither exceeds, so the writer and the reader agree).
fn percentiles(hists: &Histograms, have: &Signals, at_most_max: bool, sig: &mut Signals) {
    for (kind, [p50, p99, max]) in PERCENTILES {
        let Some(pairs) = hists.get(kind) else {
            continue;
        };
        let on_grid: Option<Vec<(usize, u64)>> = pairs
            .iter()
            .map(|&(upper, n)| {
                // Whole bounds below 1e5 are their own rounding.
                let exact = upper.fract() == 0.0
                    && (upper < 1e5 || digits::round(upper).to_bits() == upper.to_bits());
                let i = grid::bucket_with_upper(upper as u64).filter(|_| exact)?;
                Some((i, n))
            })
            .collect();
        let Some(counts) = on_grid else { continue };
        let limit = match have.get(max) {
            Some(m) if at_most_max && m != RECOMPUTED => m,
            _ => f64::INFINITY,
        };
        let Some((median, q99)) = grid::p50_p99(counts.iter().copied(), limit) else {
            continue;
        };
        sig.set(p50, median);
        sig.set(p99, q99);
        if let Some(&(top, _)) = counts.iter().rev().find(|&&(_, n)| n > 0) {
            sig.set(max, grid::bucket_bounds(top).1);
        }
    }
}

/// Room for a rank's recomputed values (see [`predicted`]).
const RANK_PREDICTED: usize = 3 * PERCENTILES.len() + COUNTER_RATE_SIGNALS + TcpDeltas::SIGNALS;

/// What `f`'s ranks' left-out values are recomputed as: from `basis`
/// (the frame before) and from `f` itself.
fn predicted(basis: &Basis, f: &Frame, what: Recomputed) -> Vec<Predicted> {
    let dt = f.mono_ns.saturating_sub(basis.mono_ns) as f64 / 1e9;
    f.ranks
        .iter()
        .map(|r| {
            // Made room for at once: a rank's recomputed values are a
            // percentile triple a histogram, its counters' rates and its
            // sockets' sums (grown from empty it took four allocations a
            // rank a frame, and three a socket below).
            let mut sig = Signals::with_capacity(RANK_PREDICTED);
            if what.percentiles {
                percentiles(&r.histograms, &r.signals, what.at_most_max, &mut sig);
            }
            let Some((counters, infos)) = basis.ranks.get(&r.key).filter(|_| dt > 0.0) else {
                return (sig, Vec::new());
            };
            counter_rates(counters, &r.counters, dt, &mut sig);
            let mut deltas = TcpDeltas::default();
            let mut any = false;
            let sockets = r
                .sockets
                .iter()
                .map(|s| {
                    let Some(info) = &s.info else {
                        return Signals::new();
                    };
                    let mut ssig = Signals::with_capacity(TcpDeltas::SIGNALS);
                    let before = infos.get(&s.inode);
                    let mut d = TcpDeltas::default();
                    d.add(before, info);
                    d.write(dt, &mut ssig);
                    deltas.add(before, info);
                    any = true;
                    ssig
                })
                .collect();
            if any {
                deltas.write(dt, &mut sig);
            }
            (sig, sockets)
        })
        .collect()
}

/// The values [`mark`] took out of a frame, to put back.
#[derive(Debug, Default)]
pub struct Marks(Vec<(usize, Option<usize>, Sig, f64)>);

impl Marks {
    /// Puts the frame's own values back where [`mark`] left [`RECOMPUTED`].
    pub fn restore(self, f: &mut Frame) {
        for (r, s, k, v) in self.0 {
            let r = &mut f.ranks[r];
            match s {
                None => r.signals.set(k, v),
                Some(s) => r.sockets[s].signals.set(k, v),
            };
        }
    }
}

/// Puts [`RECOMPUTED`] in `f`, in place, for the rates the replay gives
/// back from `basis`, and says what it took out ([`Marks::restore`]): a
/// frame is written without copying it. None, with `f` unchanged, when
/// `f` has [`RECOMPUTED`] as one of those rates (it is then written whole).
pub fn mark(basis: &Basis, f: &mut Frame) -> Option<Marks> {
    let predicted = predicted(basis, f, Recomputed::WRITTEN);
    let mut marks = Marks::default();
    // One walk: a frame already holding the mark where a rate would be
    // recomputed is found on the way and put back as it was.
    let mut held = false;
    let mut put = |have: &mut Signals, p: &Signals, at: (usize, Option<usize>)| {
        have.each_shared(p, |k, v, pv| {
            held |= *v == RECOMPUTED;
            if digits::round(*v).to_bits() == digits::round(pv).to_bits() {
                marks.0.push((at.0, at.1, k, *v));
                *v = RECOMPUTED;
            }
        });
    };
    for (i, (r, (sig, sockets))) in f.ranks.iter_mut().zip(&predicted).enumerate() {
        put(&mut r.signals, sig, (i, None));
        for (j, (s, p)) in r.sockets.iter_mut().zip(sockets).enumerate() {
            put(&mut s.signals, p, (i, Some(j)));
        }
    }
    if held {
        marks.restore(f);
        return None;
    }
    Some(marks)
}

/// `f` as a delta writes it: [`mark`] on a copy.
#[cfg(test)]
pub fn strip(basis: &Basis, f: &Frame) -> Option<Frame> {
    let mut out = f.clone();
    mark(basis, &mut out)?;
    Some(out)
}

/// Puts back into a frame read from a recording the values its writer (of
/// format `what`) left out: each [`RECOMPUTED`] where the recomputation
/// gives one.
pub fn fill(basis: &Basis, f: &mut Frame, what: Recomputed) {
    each_recomputed(basis, f, what, |have, predicted| {
        for (k, p) in predicted.iter() {
            if have.get(k) == Some(RECOMPUTED) {
                have.set(k, digits::round(p));
            }
        }
        Some(())
    });
}

/// Calls `op` with each rank's and socket's signals and their recomputed
/// values; stops at the first None.
fn each_recomputed(
    basis: &Basis,
    f: &mut Frame,
    what: Recomputed,
    mut op: impl FnMut(&mut Signals, &Signals) -> Option<()>,
) -> Option<()> {
    let predicted = predicted(basis, f, what);
    for (r, (sig, sockets)) in f.ranks.iter_mut().zip(predicted) {
        op(&mut r.signals, &sig)?;
        for (s, ssig) in r.sockets.iter_mut().zip(&sockets) {
            op(&mut s.signals, ssig)?;
        }
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{RankFrame, Sig, SocketFrame};

    fn frame(mono_ns: u64, exec_ns: u64, segs_out: u32) -> Frame {
        let mut f = Frame {
            mono_ns,
            ..Default::default()
        };
        f.ranks.push(RankFrame {
            key: ProcKey {
                pid: 7,
                start_time: 1,
            },
            counters: RankCounters {
                exec_ns,
                ..Default::default()
            },
            sockets: vec![SocketFrame {
                inode: 42,
                info: Some(TcpInfo {
                    segs_out: Some(segs_out),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        });
        f
    }

    /// The sampler's rates for `cur` after `prev`, as it writes them.
    fn sampled(prev: &Frame, mut cur: Frame) -> Frame {
        each_recomputed(
            &Basis::of(prev),
            &mut cur,
            Recomputed::WRITTEN,
            |have, rates| {
                for (k, v) in rates.iter() {
                    have.set(k, v);
                }
                Some(())
            },
        );
        digits::recorded(&cur)
    }

    /// `f` as a delta against `basis` writes it; the replay's fill must
    /// give `f` back.
    fn stripped(basis: &Basis, f: &Frame) -> Frame {
        let out = strip(basis, f).unwrap();
        let mut back = out.clone();
        fill(basis, &mut back, Recomputed::WRITTEN);
        assert_eq!(&back, f);
        out
    }

    #[test]
    fn rates_the_replay_gives_back_are_left_out_and_put_back() {
        let a = frame(1_000_000_000, 0, 10);
        let b = sampled(&a, frame(1_500_000_000, 123_456_789, 510));
        assert_eq!(b.ranks[0].signals.get(Sig::CpuPct), Some(24.691));
        let out = stripped(&Basis::of(&a), &b);
        assert_eq!(out.ranks[0].signals.get(Sig::CpuPct), Some(RECOMPUTED));
        assert_eq!(
            out.ranks[0].sockets[0].signals.get(Sig::OutSegsPerS),
            Some(RECOMPUTED)
        );
    }

    #[test]
    fn a_rate_other_than_the_recomputed_one_is_kept() {
        let a = frame(1_000_000_000, 0, 10);
        let mut b = sampled(&a, frame(1_500_000_000, 123_456_789, 510));
        // A source set it otherwise (or the sampler's own previous sample
        // was not the frame before).
        b.ranks[0].signals.set(Sig::CpuPct, 3.5);
        let out = stripped(&Basis::of(&a), &b);
        assert_eq!(out.ranks[0].signals.get(Sig::CpuPct), Some(3.5));
    }

    #[test]
    fn a_rate_the_frame_lacks_stays_out() {
        let a = frame(1_000_000_000, 0, 10);
        let mut b = sampled(&a, frame(1_500_000_000, 123_456_789, 510));
        b.ranks[0].signals.remove(Sig::CpuPct);
        let out = stripped(&Basis::of(&a), &b);
        assert_eq!(out.ranks[0].signals.get(Sig::CpuPct), None);
    }

    #[test]
    fn a_frame_holding_the_mark_itself_is_written_whole() {
        let a = frame(1_000_000_000, 0, 10);
        let mut b = sampled(&a, frame(1_500_000_000, 123_456_789, 510));
        b.ranks[0].signals.set(Sig::CpuPct, RECOMPUTED);
        assert!(strip(&Basis::of(&a), &b).is_none());
        // In place: left as it was, the rates marked on the way put back.
        let mut in_place = b.clone();
        assert!(mark(&Basis::of(&a), &mut in_place).is_none());
        assert_eq!(in_place, b);
    }

    /// A rank with a run-queue histogram and the percentiles the probe
    /// gives for it; `max_us` is the probe's max (a sample's own value).
    fn with_runq(mut f: Frame, counts: &[(u32, u64)], max_us: f64) -> Frame {
        let buckets: Vec<(usize, u64)> = counts
            .iter()
            .map(|&(v, n)| (grid::bucket_of(v), n))
            .collect();
        let r = &mut f.ranks[0];
        // No greater than the max, as the probe gives them (6.1 on).
        let (p50, p99) = grid::p50_p99(buckets.iter().copied(), max_us).unwrap();
        r.signals.set(Sig::RunqP50Us, p50);
        r.signals.set(Sig::RunqP99Us, p99);
        r.signals.set(Sig::RunqMaxUs, max_us);
        let pairs = buckets
            .iter()
            .map(|&(i, n)| (grid::bucket_bounds(i).1, n))
            .collect();
        r.histograms.insert(HistKind::RunqUs, pairs);
        digits::recorded(&f)
    }

    #[test]
    fn percentiles_are_recomputed_from_the_histogram() {
        let a = frame(1_000_000_000, 0, 10);
        // A new rank too: its percentiles need no frame before.
        for basis in [Basis::of(&a), Basis::default()] {
            let b = with_runq(
                frame(1_500_000_000, 5, 20),
                &[(3, 40), (900, 7), (41_000, 1)],
                45_056.0,
            );
            let out = stripped(&basis, &b);
            for sig in [Sig::RunqP50Us, Sig::RunqP99Us, Sig::RunqMaxUs] {
                assert_eq!(out.ranks[0].signals.get(sig), Some(RECOMPUTED), "{sig:?}");
            }
        }
    }

    #[test]
    fn percentiles_the_histogram_does_not_give_are_kept() {
        let a = frame(1_000_000_000, 0, 10);
        let basis = Basis::of(&a);
        // The interval's largest sample inside the top bucket: the probe's
        // max is that sample, not the bucket's top.
        let b = with_runq(
            frame(1_500_000_000, 5, 20),
            &[(3, 40), (41_000, 1)],
            41_000.0,
        );
        let out = stripped(&basis, &b);
        assert_eq!(out.ranks[0].signals.get(Sig::RunqMaxUs), Some(41_000.0));
        assert_eq!(out.ranks[0].signals.get(Sig::RunqP50Us), Some(RECOMPUTED));
        // A bucket off the grid (another source's histogram): nothing is
        // recomputed from it.
        let mut c = b.clone();
        c.ranks[0]
            .histograms
            .insert(HistKind::RunqUs, vec![(3.5, 40), (45_056.0, 1)]);
        assert_eq!(strip(&basis, &c).unwrap(), c);
        // The p99 inside the top bucket passed that sample: it is the max,
        // and recomputed so.
        assert_eq!(b.ranks[0].signals.get(Sig::RunqP99Us), Some(41_000.0));
        assert_eq!(out.ranks[0].signals.get(Sig::RunqP99Us), Some(RECOMPUTED));
        // A 6.0 recording's p99 was never held to the max: its reader
        // recomputes it as 6.0 wrote it.
        let mut back = out.clone();
        fill(&basis, &mut back, Recomputed::of_format(6, 0));
        let p99 = back.ranks[0].signals.get(Sig::RunqP99Us).unwrap();
        assert!(p99 > 41_000.0, "{p99}");
        // A format 4 recording left percentiles in: its reader fills none.
        let mut old = out;
        fill(&basis, &mut old, Recomputed::of_format(4, 0));
        assert_eq!(old.ranks[0].signals.get(Sig::RunqP50Us), Some(RECOMPUTED));
    }

    #[test]
    fn a_new_rank_or_no_time_between_recomputes_nothing() {
        let a = frame(1_000_000_000, 0, 10);
        let mut b = frame(1_500_000_000, 5, 20);
        b.ranks[0].key.pid = 8;
        assert_eq!(strip(&Basis::of(&a), &b).unwrap(), b);
        let same_time = frame(1_000_000_000, 5, 20);
        assert_eq!(strip(&Basis::of(&a), &same_time).unwrap(), same_time);
    }
}
