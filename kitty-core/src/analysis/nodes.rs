//! Node verdicts: in a frame that spans nodes (the cluster view), a node
//! whose every rank of a job (two or more) has a straggler verdict on the
//! same signal is named as a whole: the node is slow, not one rank
//! ("node gpu-017: all 8 ranks 3x the job's run-queue delay").

use super::verdicts::jobs;
use crate::model::format::number;
use crate::model::{Frame, NodeVerdict, Sig, Text};
use std::collections::BTreeMap;

pub fn judge(frame: &Frame) -> Vec<NodeVerdict> {
    let mut out = Vec::new();
    for members in jobs(frame).values() {
        // The job's ranks per node (only frames with per-rank nodes).
        let mut by_node: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for &i in members {
            if let Some(n) = frame.ranks[i].node.as_deref() {
                by_node.entry(n).or_default().push(i);
            }
        }
        if by_node.len() < 2 {
            continue;
        }
        for (node, idx) in by_node.into_iter().filter(|(_, v)| v.len() >= 2) {
            let mut per_sig: BTreeMap<Sig, Vec<f64>> = BTreeMap::new();
            for &i in &idx {
                let r = &frame.ranks[i];
                for v in frame
                    .verdicts
                    .iter()
                    .filter(|v| v.pid == r.key.pid && !v.is_consequence())
                {
                    per_sig.entry(v.signal).or_default().push(v.ratio);
                }
            }
            for (sig, ratios) in per_sig.into_iter().filter(|(_, r)| r.len() == idx.len()) {
                let ratio = ratios.iter().sum::<f64>() / ratios.len() as f64;
                let first = &frame.ranks[idx[0]];
                out.push(NodeVerdict {
                    node: Text::new(node),
                    job: first.labels.job.clone(),
                    signal: sig,
                    ranks: idx.iter().map(|&i| frame.ranks[i].labels.rank).collect(),
                    ratio,
                    message: Text::message(format!(
                        "node {node}: all {} ranks {}x the job's {}",
                        idx.len(),
                        number(ratio),
                        sig.label()
                    )),
                });
            }
        }
    }
    out
}
