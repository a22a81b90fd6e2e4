//! The NCCL Inspector phase of a tick: new records from each rank's dump
//! directory, matched across the node's ranks by communicator and
//! sequence number. For one collective, every rank leaves together, so
//! the rank that arrived last has the shortest exec time and the others'
//! exec times include their wait for it: its lateness is their median
//! exec time minus its own. Per rank: its latest collectives, and signals
//! (median lateness, exec time, bus bandwidth) over the last seconds.

use super::procs::Sample;
use crate::model::stats::median;
use crate::model::{CollectiveFrame, RankFrame, Sig, SourceStatus, Text};
use crate::sources::nccl_inspector::{dump_dir, Record, Tailer};
use crate::sources::{in_process_fs, Roots};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::PathBuf;
use std::time::Duration;

/// Records kept per rank, and for how long.
const KEEP: usize = 512;
const KEEP_FOR: Duration = Duration::from_secs(30);
/// The window the tick's signals are computed over.
const WINDOW: Duration = Duration::from_secs(3);
/// Collectives shown per rank.
const SHOWN: usize = 8;

#[derive(Default)]
pub struct Collectives {
    tailer: Tailer,
    /// Per rank pid: (arrival mono, record), oldest first.
    recent: HashMap<u32, VecDeque<(u64, Record)>>,
    status: Option<SourceStatus>,
}

impl Collectives {
    /// Reads what the ranks' Inspectors wrote since the last tick.
    pub fn read(&mut self, roots: &Roots, samples: &[Sample], mono: u64) {
        // Dump directory -> the ranks writing there: (pid, own pid, label).
        let mut dirs: BTreeMap<PathBuf, Vec<(u32, u32)>> = BTreeMap::new();
        let mut problems = Vec::new();
        let mut enabled = 0;
        for (w, s) in samples {
            match dump_dir(&w.nccl, w.labels.slurm_job_id.as_deref()) {
                None => {}
                Some(Err(e)) => {
                    enabled += 1;
                    problems.push(format!(
                        "{}: {e}",
                        RankFrame::name_of(w.labels.rank, w.key.pid)
                    ));
                }
                Some(Ok(d)) => {
                    enabled += 1;
                    let path = in_process_fs(&roots.pid_dir(w.key.pid), &d);
                    dirs.entry(path).or_default().push((w.key.pid, s.own_pid));
                }
            }
        }
        let mut files = 0;
        for (dir, ranks) in &dirs {
            match self.tailer.poll(dir) {
                Ok(recs) => {
                    files += 1;
                    for r in recs {
                        // The record names its writer by its own pid.
                        if let Some((pid, _)) = ranks.iter().find(|(_, own)| *own == r.pid) {
                            let q = self.recent.entry(*pid).or_default();
                            q.push_back((mono, r));
                            if q.len() > KEEP {
                                q.pop_front();
                            }
                        }
                    }
                }
                Err(e) => problems.push(format!(
                    "cannot read {} (the dump directory is created at the first collective): {e}",
                    dir.display()
                )),
            }
        }
        self.tailer.sweep();
        let live: Vec<u32> = samples.iter().map(|(w, _)| w.key.pid).collect();
        self.recent.retain(|pid, _| live.contains(pid));
        for q in self.recent.values_mut() {
            while q
                .front()
                .is_some_and(|(t, _)| mono.saturating_sub(*t) > KEEP_FOR.as_nanos() as u64)
            {
                q.pop_front();
            }
        }
        self.status = Some(match (enabled, problems.is_empty()) {
            (0, _) => SourceStatus::unavailable(
                "no rank enables NCCL Inspector (NCCL_PROFILER_PLUGIN=inspector with NCCL_INSPECTOR_ENABLE=1)",
            ),
            (_, true) => SourceStatus::ok()
                .with_strategy(format!("{enabled} ranks, {files} dump directories")),
            (_, false) => SourceStatus::degraded(problems.join("; ")),
        });
    }

    pub fn status(&self) -> Option<SourceStatus> {
        self.status.clone()
    }

    /// Each rank's latest collectives and its signals over the window.
    pub fn apply(&self, ranks: &mut [RankFrame], mono: u64) {
        // (comm, seq) -> every rank's exec time for it.
        let mut by_coll: HashMap<(&str, u64), Vec<(u32, u64)>> = HashMap::new();
        for (pid, q) in &self.recent {
            for (_, r) in q {
                by_coll
                    .entry((r.comm.as_str(), r.seq))
                    .or_default()
                    .push((*pid, r.exec_us));
            }
        }
        let late_of = |pid: u32, r: &Record| -> Option<f64> {
            let mut peers: Vec<f64> = by_coll
                .get(&(r.comm.as_str(), r.seq))?
                .iter()
                .filter(|(p, _)| *p != pid)
                .map(|(_, e)| *e as f64)
                .collect();
            median(&mut peers).map(|m| (m - r.exec_us as f64).max(0.0))
        };
        for rank in ranks.iter_mut() {
            let Some(q) = self.recent.get(&rank.key.pid) else {
                continue;
            };
            let window: Vec<&Record> = q
                .iter()
                .filter(|(t, _)| mono.saturating_sub(*t) <= WINDOW.as_nanos() as u64)
                .map(|(_, r)| r)
                .collect();
            let mut late: Vec<f64> = window
                .iter()
                .filter_map(|r| late_of(rank.key.pid, r))
                .collect();
            let mut exec: Vec<f64> = window.iter().map(|r| r.exec_us as f64).collect();
            let mut bw: Vec<f64> = window.iter().map(|r| r.busbw_gbs * 1e9).collect();
            let ms = |us: f64| us / 1000.0;
            rank.signals
                .set_opt(Sig::NcclLateMs, median(&mut late).map(ms));
            rank.signals
                .set_opt(Sig::NcclExecMs, median(&mut exec).map(ms));
            rank.signals
                .set_opt(Sig::NcclBusbwBytesPerS, median(&mut bw));
            rank.collectives = q
                .iter()
                .rev()
                .take(SHOWN)
                .map(|(_, r)| CollectiveFrame {
                    comm: Text::new(&r.comm),
                    coll: Text::new(&r.coll),
                    seq: r.seq,
                    msg_bytes: r.msg_bytes,
                    exec_us: r.exec_us,
                    busbw_gbs: r.busbw_gbs,
                    late_us: late_of(rank.key.pid, r),
                })
                .collect();
        }
    }
}
