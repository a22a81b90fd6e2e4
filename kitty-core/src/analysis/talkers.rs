//! Top talkers: the flow probe's per-connection bytes folded into who talks
//! to whom (process, remote host), busiest first, with each row's share of
//! the node's attributed traffic. A view model: the TUI draws it, tests
//! check it, nothing here reads the system.

use crate::model::{FlowFrame, Frame};
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq)]
pub struct Talker {
    pub pid: u32,
    /// The rank's name when the process is watched, else its pid.
    pub who: String,
    /// Remote IP address (ports folded: one peer, many connections).
    pub peer: String,
    pub connections: usize,
    pub tx_bytes_per_s: f64,
    pub rx_bytes_per_s: f64,
    /// Bytes since first seen, both directions.
    pub total_bytes: u64,
    /// Share of all attributed bytes/s on the node, percent.
    pub share_pct: f64,
}

fn peer_ip(remote: &str) -> String {
    match remote.parse::<std::net::SocketAddr>() {
        Ok(a) => a.ip().to_canonical().to_string(),
        Err(_) => remote.to_string(),
    }
}

/// The `n` busiest (process, peer) pairs of the frame's flows.
pub fn top_talkers(frame: &Frame, n: usize) -> Vec<Talker> {
    let names: BTreeMap<u32, String> = frame
        .ranks
        .iter()
        .map(|r| (r.key.pid, r.display_name()))
        .collect();
    let mut rows: BTreeMap<(u32, String), Talker> = BTreeMap::new();
    for f in &frame.flows {
        let key = (f.pid, peer_ip(&f.remote));
        let t = rows.entry(key.clone()).or_insert_with(|| Talker {
            pid: f.pid,
            who: names
                .get(&f.pid)
                .cloned()
                .unwrap_or_else(|| format!("pid {}", f.pid)),
            peer: key.1.clone(),
            connections: 0,
            tx_bytes_per_s: 0.0,
            rx_bytes_per_s: 0.0,
            total_bytes: 0,
            share_pct: 0.0,
        });
        add(t, f);
    }
    let total: f64 = rows
        .values()
        .map(|t| t.tx_bytes_per_s + t.rx_bytes_per_s)
        .sum();
    let mut out: Vec<Talker> = rows.into_values().collect();
    for t in &mut out {
        if total > 0.0 {
            t.share_pct = (t.tx_bytes_per_s + t.rx_bytes_per_s) / total * 100.0;
        }
    }
    out.sort_by(|a, b| {
        (b.tx_bytes_per_s + b.rx_bytes_per_s)
            .total_cmp(&(a.tx_bytes_per_s + a.rx_bytes_per_s))
            .then(b.total_bytes.cmp(&a.total_bytes))
    });
    out.truncate(n);
    out
}

fn add(t: &mut Talker, f: &FlowFrame) {
    t.connections += 1;
    t.tx_bytes_per_s += f.tx_bytes_per_s;
    t.rx_bytes_per_s += f.rx_bytes_per_s;
    t.total_bytes += f.tx_bytes + f.rx_bytes;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(pid: u32, remote: &str, tx: f64) -> FlowFrame {
        FlowFrame {
            pid,
            remote: remote.into(),
            tx_bytes_per_s: tx,
            tx_bytes: tx as u64,
            ..Default::default()
        }
    }

    #[test]
    fn connections_to_one_host_fold_into_one_row_busiest_first() {
        let f = Frame {
            flows: vec![
                flow(1, "10.0.0.2:5000", 100.0),
                flow(1, "10.0.0.2:5001", 200.0),
                flow(2, "[::ffff:10.0.0.3]:80", 700.0),
            ],
            ..Default::default()
        };
        let t = top_talkers(&f, 10);
        assert_eq!(t.len(), 2);
        assert_eq!((t[0].pid, t[0].peer.as_str()), (2, "10.0.0.3"));
        assert_eq!((t[1].connections, t[1].tx_bytes_per_s), (2, 300.0));
        assert!((t[0].share_pct - 70.0).abs() < 1e-9);
    }
}
