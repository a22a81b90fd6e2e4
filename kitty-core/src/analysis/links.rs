//! Link attribution. A slow link slows every connection that crosses it, so
//! the rank at the other end of a slow connection looks slow too. For each
//! rank, take the best (lowest) value among the active connections that
//! cross its link — its own, and its peers' connections to it when they run
//! on this node: a link is no worse than the best connection through it.
//! The result, `link_rtt_us`, confirms the RTT and queue verdicts, so that
//! the healthy neighbour of a slow rank is not blamed. (Queues are not
//! attributed the same way: a fault in one direction, a throttled sender,
//! fills only the queues of connections that leave through it.)

use crate::model::{Frame, Sig};
use foldhash::{HashMap, HashMapExt};

/// Adds `link_rtt_us` to the ranks' signals.
pub fn attribute(frame: &mut Frame) {
    let n = frame.ranks.len();
    let mut owner: HashMap<(&str, &str), (usize, usize)> = HashMap::new();
    for (i, r) in frame.ranks.iter().enumerate() {
        for (k, s) in r.sockets.iter().enumerate() {
            owner.insert((s.local.as_str(), s.remote.as_str()), (i, k));
        }
    }
    let mut rtt = vec![f64::INFINITY; n];
    for (i, r) in frame.ranks.iter().enumerate() {
        for s in &r.sockets {
            if s.remote.ends_with(":0") || s.remote.is_empty() {
                continue;
            }
            let far = owner
                .get(&(s.remote.as_str(), s.local.as_str()))
                .map(|&(j, k)| (j, &frame.ranks[j].sockets[k]));
            let ends = || std::iter::once(s).chain(far.map(|(_, f)| f));
            let ranks = [Some(i), far.map(|(j, _)| j).filter(|j| *j != i)];
            // The connection's RTT: measured at whichever end sends data.
            let conn_rtt = ends()
                .filter_map(|e| e.signals.get(Sig::RttP50Us))
                .reduce(f64::max);
            if let Some(v) = conn_rtt {
                for j in ranks.iter().flatten() {
                    rtt[*j] = rtt[*j].min(v);
                }
            }
        }
    }
    for (i, r) in frame.ranks.iter_mut().enumerate() {
        if rtt[i].is_finite() {
            r.signals.set(Sig::LinkRttUs, rtt[i]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{RankFrame, SocketFrame};

    fn sock(local: &str, remote: &str, rtt: Option<f64>, txq: u64) -> SocketFrame {
        let mut s = SocketFrame {
            local: local.into(),
            remote: remote.into(),
            tx_queue: txq,
            ..Default::default()
        };
        s.signals.set(Sig::OutSegsPerS, 100.0);
        if let Some(v) = rtt {
            s.signals.set(Sig::RttP50Us, v);
        }
        s
    }

    /// A 4-rank ring, data flowing i -> i+1, rank 2's link slow: only the
    /// connections 1->2 and 2->3 are slow.
    #[test]
    fn the_slow_link_is_the_one_every_slow_connection_shares() {
        let a = |i: usize| format!("10.0.0.{i}:{}", 5000 + i);
        let out = |i: usize| format!("10.0.0.{i}:{}", 6000 + i);
        let slow = |i: usize| i == 1 || i == 2;
        let mut f = Frame::default();
        for i in 0..4 {
            let next = (i + 1) % 4;
            let prev = (i + 3) % 4;
            let mut r = RankFrame::default();
            let (rtt, q) = if slow(i) {
                (50_000.0, 2_000_000)
            } else {
                (100.0, 0)
            };
            r.sockets.push(sock(&out(i), &a(next), Some(rtt), q));
            r.sockets.push(sock(&a(i), &out(prev), None, 0));
            f.ranks.push(r);
        }
        attribute(&mut f);
        let link: Vec<f64> = f
            .ranks
            .iter()
            .map(|r| r.signals.get(Sig::LinkRttUs).unwrap())
            .collect();
        assert_eq!(link, vec![100.0, 100.0, 50_000.0, 100.0]);
    }
}
