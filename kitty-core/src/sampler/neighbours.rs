//! The neighbours phase: every few seconds, the busiest processes on the
//! node that are not ranks, with the CPUs they may use and their container:
//! who could be taking the ranks' CPUs (the culprit guess without the
//! run-queue probe, and the co-location findings). Only while there is a
//! job to compare (a scan reads every process's stat).

use crate::model::{BusyProcess, Text};
use crate::sources::labels::container_from_cgroup;
use crate::sources::status::read_status;
use crate::sources::Roots;
use procfs::process::Stat;
use procfs::FromRead;
use std::collections::{HashMap, HashSet};
use std::time::Duration;

/// How often the node's processes are scanned.
const EVERY: Duration = Duration::from_secs(10);
/// Kept per scan.
const KEEP: usize = 8;
/// Below this a process is not busy.
const BUSY_PCT: f64 = 20.0;

#[derive(Default)]
pub(super) struct Neighbours {
    last_scan_ns: Option<u64>,
    /// pid -> (start time, cpu ticks) at the last scan.
    ticks: HashMap<u32, (u64, u64)>,
}

impl Neighbours {
    /// The busiest non-rank processes when a scan is due, else None.
    pub fn scan(
        &mut self,
        roots: &Roots,
        ranks: &HashSet<u32>,
        now_ns: u64,
    ) -> Option<Vec<BusyProcess>> {
        if self
            .last_scan_ns
            .is_some_and(|t| now_ns.saturating_sub(t) < EVERY.as_nanos() as u64)
        {
            return None;
        }
        let dt = self
            .last_scan_ns
            .map(|t| now_ns.saturating_sub(t) as f64 / 1e9);
        self.last_scan_ns = Some(now_ns);
        let hz = crate::sources::clock_ticks() as f64;
        let me = std::process::id();
        let mut next = HashMap::new();
        let mut busy: Vec<(u32, String, f64)> = Vec::new();
        let Ok(dir) = std::fs::read_dir(&roots.proc) else {
            return Some(Vec::new());
        };
        for e in dir.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if pid == me || ranks.contains(&pid) {
                continue;
            }
            let Ok(stat) = Stat::from_file(e.path().join("stat")) else {
                continue;
            };
            let ticks = stat.utime + stat.stime;
            next.insert(pid, (stat.starttime, ticks));
            let Some(dt) = dt.filter(|d| *d > 0.0) else {
                continue;
            };
            if let Some(&(start, before)) = self.ticks.get(&pid) {
                if start == stat.starttime && ticks >= before {
                    let pct = (ticks - before) as f64 / hz / dt * 100.0;
                    if pct >= BUSY_PCT {
                        busy.push((pid, stat.comm, pct));
                    }
                }
            }
        }
        self.ticks = next;
        busy.sort_by(|a, b| b.2.total_cmp(&a.2));
        busy.truncate(KEEP);
        Some(
            busy.into_iter()
                .map(|(pid, comm, cpu_pct)| {
                    let dir = roots.pid_dir(pid);
                    let affinity = read_status(&dir)
                        .ok()
                        .and_then(|s| s.cpus_allowed_list)
                        .unwrap_or_default();
                    let c = container_from_cgroup(
                        &std::fs::read_to_string(dir.join("cgroup")).unwrap_or_default(),
                    );
                    BusyProcess {
                        pid,
                        comm: Text::new(&comm),
                        cpu_pct,
                        affinity,
                        pod_uid: c.pod_uid.as_deref().map(Text::new),
                        container_id: c.container_id.as_deref().map(Text::new),
                    }
                })
                .collect(),
        )
    }
}
