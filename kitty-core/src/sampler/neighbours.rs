//! The neighbours phase: every few seconds, the busiest processes on the
//! node that are not ranks, with the CPUs they may use and their container:
//! who could be taking the ranks' CPUs (the culprit guess without the
//! run-queue probe, and the co-location findings). Only while there is a
//! job to compare (a scan reads every process's stat).

use crate::model::{BusyProcess, Text};
use crate::sources::labels::container_from_cgroup;
use crate::sources::status::read_status;
use crate::sources::tasks::NodeProcess;
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
    /// The busiest non-rank processes when a scan is due, else None. `walk`
    /// gives every process of the node from the task iterator (one read,
    /// where reading every process's stat cost ~9 us a process: 18 ms a
    /// scan among 2,000); None reads the stat files.
    pub fn scan(
        &mut self,
        roots: &Roots,
        ranks: &HashSet<u32>,
        now_ns: u64,
        walk: impl FnOnce() -> Option<Vec<NodeProcess>>,
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
        let me = std::process::id();
        let walked = walk();
        let from_walk = walked.is_some();
        let procs = walked.unwrap_or_else(|| from_stat_files(roots));
        let mut next = HashMap::new();
        let mut busy: Vec<(u32, u64, String, f64)> = Vec::new();
        for p in procs {
            if p.pid == me || ranks.contains(&p.pid) {
                continue;
            }
            next.insert(p.pid, (p.start_ticks, p.cpu_ns));
            let Some(dt) = dt.filter(|d| *d > 0.0) else {
                continue;
            };
            if let Some(&(start, before)) = self.ticks.get(&p.pid) {
                if start == p.start_ticks && p.cpu_ns >= before {
                    let pct = (p.cpu_ns - before) as f64 / 1e9 / dt * 100.0;
                    if pct >= BUSY_PCT {
                        busy.push((p.pid, p.start_ticks, p.comm, pct));
                    }
                }
            }
        }
        self.ticks = next;
        busy.sort_by(|a, b| b.3.total_cmp(&a.3));
        // The walk numbers processes as the node's first pid namespace
        // does; a proc root of another one may name other processes by
        // those pids: only the ones whose start the root agrees on stay.
        if from_walk {
            busy.retain(|&(pid, start, _, _)| start_ticks(roots, pid) == Some(start));
        }
        busy.truncate(KEEP);
        Some(
            busy.into_iter()
                .map(|(pid, _, comm, cpu_pct)| {
                    let dir = roots.pid_dir(pid);
                    let affinity = read_status(&dir)
                        .ok()
                        .and_then(|s| s.cpus_allowed_list)
                        .unwrap_or_default();
                    let c = container_from_cgroup(
                        &crate::sources::read_small(&dir.join("cgroup")).unwrap_or_default(),
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

/// Every process under the proc root, from its stat file (utime + stime).
fn from_stat_files(roots: &Roots) -> Vec<NodeProcess> {
    let ns_per_tick = 1e9 / crate::sources::clock_ticks() as f64;
    let Ok(dir) = std::fs::read_dir(&roots.proc) else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_str()?.parse::<u32>().ok()?;
            let stat = Stat::from_file(e.path().join("stat")).ok()?;
            Some(NodeProcess {
                pid,
                start_ticks: stat.starttime,
                cpu_ns: ((stat.utime + stat.stime) as f64 * ns_per_tick) as u64,
                comm: stat.comm,
            })
        })
        .collect()
}

/// A process's start under the proc root, in clock ticks.
fn start_ticks(roots: &Roots, pid: u32) -> Option<u64> {
    Stat::from_file(roots.pid_dir(pid).join("stat"))
        .ok()
        .map(|s| s.starttime)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat_start(pid: u32) -> u64 {
        Stat::from_file(format!("/proc/{pid}/stat"))
            .unwrap()
            .starttime
    }

    /// The scan from a walk: the CPU each process gained between two scans,
    /// the ranks and kitty left out, a pid whose start the proc root does
    /// not agree on (another process by that number) dropped.
    #[test]
    fn a_walk_names_the_busy_processes_the_proc_root_agrees_on() {
        let mut kids: Vec<_> = (0..3)
            .map(|_| {
                std::process::Command::new("sleep")
                    .arg("30")
                    .spawn()
                    .unwrap()
            })
            .collect();
        let pids: Vec<u32> = kids.iter().map(|k| k.id()).collect();
        let starts: Vec<u64> = pids.iter().map(|p| stat_start(*p)).collect();
        let proc = |i: usize, cpu_s: f64, start: u64| NodeProcess {
            pid: pids[i],
            start_ticks: start,
            cpu_ns: (cpu_s * 1e9) as u64,
            comm: format!("p{i}"),
        };
        let me = NodeProcess {
            pid: std::process::id(),
            start_ticks: stat_start(std::process::id()),
            cpu_ns: 0,
            comm: "kitty".into(),
        };
        let roots = Roots::default();
        let ranks: HashSet<u32> = [pids[2]].into_iter().collect();
        let mut n = Neighbours::default();
        let first = vec![
            proc(0, 1.0, starts[0]),
            proc(1, 1.0, starts[1] + 1),
            proc(2, 1.0, starts[2]),
            me.clone(),
        ];
        assert_eq!(n.scan(&roots, &ranks, 1, || Some(first)), Some(vec![]));
        assert_eq!(n.scan(&roots, &ranks, 2, || panic!("not due")), None);
        // 10 s later: each gained 5 s of CPU (50 %), kitty 9 s.
        let later = vec![
            proc(0, 6.0, starts[0]),
            proc(1, 6.0, starts[1] + 1),
            proc(2, 6.0, starts[2]),
            NodeProcess {
                cpu_ns: 9_000_000_000,
                ..me
            },
        ];
        let busy = n
            .scan(&roots, &ranks, 1 + 10_000_000_000, || Some(later))
            .unwrap();
        assert_eq!(busy.len(), 1, "{busy:?}");
        assert_eq!(busy[0].pid, pids[0]);
        assert_eq!(busy[0].comm.as_str(), "p0");
        assert!((busy[0].cpu_pct - 50.0).abs() < 1e-6, "{}", busy[0].cpu_pct);
        assert!(!busy[0].affinity.is_empty(), "read from its status");
        for k in &mut kids {
            let _ = k.kill();
            let _ = k.wait();
        }
    }
}
