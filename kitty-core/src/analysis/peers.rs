//! Peer statistics: the median and median absolute deviation of the other
//! ranks, and the outlier test every rule uses.

use super::rules::{Kind, Rule};
pub use crate::model::stats::median;

/// Peers whose values are sorted on the stack: a node's ranks, and more.
const ON_STACK: usize = 64;

/// (median, MAD) of the values other than `me`'s. Called for every rank
/// and rule each tick: up to [`ON_STACK`] peers it allocates nothing.
pub fn peer_stats(values: &[(usize, f64)], me: usize) -> Option<(f64, f64)> {
    let others = values.iter().filter(|(i, _)| *i != me).map(|(_, v)| *v);
    let mut stack = [0f64; ON_STACK];
    let mut heap = Vec::new();
    let peers: &mut [f64] = if values.len() <= ON_STACK {
        let mut n = 0;
        for (slot, v) in stack.iter_mut().zip(others) {
            *slot = v;
            n += 1;
        }
        &mut stack[..n]
    } else {
        heap.extend(others);
        &mut heap
    };
    let m = median(peers)?;
    // The deviations in place of the values (their order is not needed).
    for p in peers.iter_mut() {
        *p = (*p - m).abs();
    }
    Some((m, median(peers).unwrap_or(0.0)))
}

/// The thresholds of one comparison: raising, or (lower) releasing.
#[derive(Debug, Clone, Copy)]
pub struct Bar {
    /// Multiple of the peers' median.
    pub ratio: f64,
    /// Robust z: distance from the median in units of 1.4826 * MAD.
    pub mad_k: f64,
    /// Releasing: half the absolute floor, half the Low factor's excess.
    pub releasing: bool,
}

/// Is `v` an outlier against peers with median `m` and deviation `mad`?
pub fn is_outlier(v: f64, m: f64, mad: f64, rule: &Rule, bar: Bar) -> bool {
    let floor = rule.abs_floor * if bar.releasing { 0.5 } else { 1.0 };
    let spread = bar.mad_k * 1.4826 * mad;
    match rule.kind {
        Kind::High => v - m >= floor && v >= bar.ratio * m && v - m > spread,
        Kind::Low(factor) => {
            let factor = if bar.releasing {
                1.0 + (factor - 1.0) / 2.0
            } else {
                factor
            };
            m - v >= floor && v * factor <= m && m - v > spread
        }
        Kind::Flag => v >= rule.abs_floor && m < rule.abs_floor,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn many_peers_as_few() {
        // Past the stack's room the same numbers come out.
        for n in [3usize, 64, 65, 66, 200] {
            let v: Vec<(usize, f64)> = (0..n).map(|i| (i, ((i * 37) % 11) as f64)).collect();
            let mut peers: Vec<f64> = v.iter().skip(1).map(|x| x.1).collect();
            let m = median(&mut peers).unwrap();
            let mut dev: Vec<f64> = peers.iter().map(|p| (p - m).abs()).collect();
            assert_eq!(
                peer_stats(&v, 0),
                Some((m, median(&mut dev).unwrap())),
                "{n}"
            );
        }
    }

    #[test]
    fn median_even_and_odd() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&mut []), None);
    }

    #[test]
    fn peers_exclude_the_rank_itself() {
        let v = [(0, 1.0), (1, 1.0), (2, 100.0), (3, 3.0)];
        assert_eq!(peer_stats(&v, 2), Some((1.0, 0.0)));
    }
}
