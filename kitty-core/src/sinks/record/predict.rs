//! The rates a recording leaves out of a delta because the replay gives them
//! back bit for bit: a rank's rates from its counters, and each socket's
//! (and the rank's) TCP rates from the sockets' tcp_info, against the frame
//! before, with the sampler's own arithmetic (`model::rates`). Where that
//! recomputation, rounded as recorded, equals the value written, the writer
//! puts [`RECOMPUTED`] in its place (the same from one frame to the next:
//! a delta then spends next to nothing on it); anything else stays as it
//! was, so frames whose rates came from elsewhere (a cluster recording, a
//! source that set its own) lose nothing. A frame that has [`RECOMPUTED`]
//! itself as such a rate is written as a keyframe.

use super::digits;
use crate::model::rates::{counter_rates, TcpDeltas};
use crate::model::{Frame, ProcKey, RankCounters, Signals, TcpInfo};
use std::collections::HashMap;

/// What a left-out rate is written as: no rate is negative.
pub const RECOMPUTED: f64 = -1.0;

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

/// A rank's recomputed rates, and each of its sockets' (None: none are
/// recomputed for that rank, it was not in the frame before).
type Predicted = Option<(Signals, Vec<Signals>)>;

/// The sampler's rates of `f`'s ranks, recomputed from `basis`.
fn predicted(basis: &Basis, f: &Frame) -> Vec<Predicted> {
    let dt = f.mono_ns.saturating_sub(basis.mono_ns) as f64 / 1e9;
    f.ranks
        .iter()
        .map(|r| {
            let (counters, infos) = basis.ranks.get(&r.key)?;
            if dt <= 0.0 {
                return None;
            }
            let mut sig = Signals::new();
            counter_rates(counters, &r.counters, dt, &mut sig);
            let mut deltas = TcpDeltas::default();
            let mut any = false;
            let sockets = r
                .sockets
                .iter()
                .map(|s| {
                    let mut ssig = Signals::new();
                    if let Some(info) = &s.info {
                        let before = infos.get(&s.inode);
                        let mut d = TcpDeltas::default();
                        d.add(before, info);
                        d.write(dt, &mut ssig);
                        deltas.add(before, info);
                        any = true;
                    }
                    ssig
                })
                .collect();
            if any {
                deltas.write(dt, &mut sig);
            }
            Some((sig, sockets))
        })
        .collect()
}

/// `f` with [`RECOMPUTED`] for the rates the replay gives back from
/// `basis`; None when `f` has [`RECOMPUTED`] as one of those rates (it is
/// then written whole).
pub fn strip(basis: &Basis, f: &Frame) -> Option<Frame> {
    let mut out = f.clone();
    each_recomputed(basis, &mut out, |have, predicted| {
        for (k, p) in predicted.iter() {
            let Some(v) = have.get(k) else { continue };
            if v == RECOMPUTED {
                return None;
            }
            if digits::round(v).to_bits() == digits::round(p).to_bits() {
                have.set(k, RECOMPUTED);
            }
        }
        Some(())
    })?;
    Some(out)
}

/// Puts back into a frame read from a recording the rates its writer left
/// out: each [`RECOMPUTED`] where the recomputation gives one.
pub fn fill(basis: &Basis, f: &mut Frame) {
    each_recomputed(basis, f, |have, predicted| {
        for (k, p) in predicted.iter() {
            if have.get(k) == Some(RECOMPUTED) {
                have.set(k, digits::round(p));
            }
        }
        Some(())
    });
}

/// Calls `op` with each rank's and socket's signals and their recomputed
/// rates (ranks not in `basis` are skipped); stops at the first None.
fn each_recomputed(
    basis: &Basis,
    f: &mut Frame,
    mut op: impl FnMut(&mut Signals, &Signals) -> Option<()>,
) -> Option<()> {
    let predicted = predicted(basis, f);
    for (r, p) in f.ranks.iter_mut().zip(predicted) {
        let Some((sig, sockets)) = p else { continue };
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
        each_recomputed(&Basis::of(prev), &mut cur, |have, rates| {
            for (k, v) in rates.iter() {
                have.set(k, v);
            }
            Some(())
        });
        digits::recorded(&cur)
    }

    #[test]
    fn rates_the_replay_gives_back_are_left_out_and_put_back() {
        let a = frame(1_000_000_000, 0, 10);
        let b = sampled(&a, frame(1_500_000_000, 123_456_789, 510));
        assert_eq!(b.ranks[0].signals.get(Sig::CpuPct), Some(24.691));
        let basis = Basis::of(&a);
        let stripped = strip(&basis, &b).unwrap();
        assert_eq!(stripped.ranks[0].signals.get(Sig::CpuPct), Some(RECOMPUTED));
        assert_eq!(
            stripped.ranks[0].sockets[0].signals.get(Sig::OutSegsPerS),
            Some(RECOMPUTED)
        );
        let mut back = stripped;
        fill(&basis, &mut back);
        assert_eq!(back, b);
    }

    #[test]
    fn a_rate_other_than_the_recomputed_one_is_kept() {
        let a = frame(1_000_000_000, 0, 10);
        let mut b = sampled(&a, frame(1_500_000_000, 123_456_789, 510));
        // A source set it otherwise (or the sampler's own previous sample
        // was not the frame before).
        b.ranks[0].signals.set(Sig::CpuPct, 3.5);
        let basis = Basis::of(&a);
        let stripped = strip(&basis, &b).unwrap();
        assert_eq!(stripped.ranks[0].signals.get(Sig::CpuPct), Some(3.5));
        let mut back = stripped;
        fill(&basis, &mut back);
        assert_eq!(back, b);
    }

    #[test]
    fn a_rate_the_frame_lacks_stays_out() {
        let a = frame(1_000_000_000, 0, 10);
        let mut b = sampled(&a, frame(1_500_000_000, 123_456_789, 510));
        b.ranks[0].signals.remove(Sig::CpuPct);
        let basis = Basis::of(&a);
        let mut back = strip(&basis, &b).unwrap();
        fill(&basis, &mut back);
        assert_eq!(back, b);
    }

    #[test]
    fn a_frame_holding_the_mark_itself_is_written_whole() {
        let a = frame(1_000_000_000, 0, 10);
        let mut b = sampled(&a, frame(1_500_000_000, 123_456_789, 510));
        b.ranks[0].signals.set(Sig::CpuPct, RECOMPUTED);
        assert!(strip(&Basis::of(&a), &b).is_none());
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
