//! The processes phase: reads each watched process (reusing what need not
//! be read every tick) and, once sockets are known, turns each sample and
//! its predecessor into a rank frame.

use super::cpu_stats::CpuStats;
use super::rank::{build_rank, RankInput};
use crate::model::rates::rate;
use crate::model::{CgroupCpu, ProcKey, RankFrame, TcpInfo, Text};
use crate::sources::cgroup::{parse_throttled_ns, CgroupMounts};
use crate::sources::discovery::Watched;
use crate::sources::kept::KeptFiles;
use crate::sources::process::{
    read_process, FdReuse, FdWalk, ProcSample, ReadError, Reuse, StatusReuse,
};
use crate::sources::tasks::{leader, FdInventory, RowsByTgid, TaskRow};
use crate::sources::tcp_table::SocketRaw;
use crate::sources::Roots;
use foldhash::{HashMap, HashMapExt};
use std::net::SocketAddr;
use std::time::Duration;

/// How often the per-thread `sched` files (migrations) are read, and
/// `status` when the task iterator gives the context switches but no
/// fingerprint of the allowed CPUs.
const SCHED_EVERY: Duration = Duration::from_secs(2);

/// How often `status` is read when the task rows also give a fingerprint
/// of the process's allowed CPUs: it is then read the tick they change, so
/// this only bounds what the fingerprint cannot see (CPUs past the 1,024th).
const FOLLOWED_STATUS_EVERY: Duration = Duration::from_secs(10);

/// Whether `status` must be read this tick: every SCHED_EVERY, or, when
/// the leader's task row has a fingerprint of the allowed CPUs, the tick it
/// differs from the last one and every FOLLOWED_STATUS_EVERY.
fn status_due(prev: &ProcPrev, tasks: Option<&[TaskRow]>, mono: u64) -> bool {
    let since = Duration::from_nanos(mono.saturating_sub(prev.status_ns));
    let sig = tasks
        .and_then(leader)
        .and_then(|leader| leader.process.affinity_sig);
    match sig {
        Some(sig) => prev.sample.affinity_sig != Some(sig) || since >= FOLLOWED_STATUS_EVERY,
        None => since >= SCHED_EVERY,
    }
}

/// What the previous tick left for rate computation.
pub(super) struct ProcPrev {
    pub sample: ProcSample,
    /// Monotonic ns of the last full fd scan.
    fd_scan_ns: u64,
    /// Monotonic ns of the last `status` read.
    status_ns: u64,
    /// Last read of the migration counters (monotonic ns, total) and the rate
    /// it gave, carried between reads.
    pub migrations: Option<(u64, u64)>,
    pub migrations_rate: Option<f64>,
    pub cfs_ns: Option<u64>,
    /// The cgroup's CPU use (ns), read while it is throttled.
    pub cgroup_usage_ns: Option<u64>,
    /// This tick's sockets, by inode, for the next tick's frame.
    pub sockets: HashMap<u64, PrevSocket>,
}

/// What a socket's next frame takes from this tick's: its tcp_info, for
/// its rates, and its endpoints' text while they hold (printed and
/// allocated again every tick before: four allocations a socket).
pub(super) struct PrevSocket {
    pub info: Option<TcpInfo>,
    pub local: (SocketAddr, Text),
    pub remote: (SocketAddr, Text),
}

pub(super) struct ProcReader {
    prev: HashMap<ProcKey, ProcPrev>,
    cpu_stats: CpuStats,
    page_size: u64,
    /// The fd scan is reused at most this long while the fd count holds.
    rescan_every: Duration,
}

/// One watched process's sample of this tick, beside the watch list's
/// entry for it (lent, not copied: its labels, environment settings and
/// cgroup path were copied for every rank each tick).
pub(super) type Sample<'a> = (&'a Watched, ProcSample);

impl ProcReader {
    pub fn new(rescan_every: Duration) -> Self {
        // SAFETY: sysconf has no preconditions.
        let page_size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as u64;
        ProcReader {
            prev: HashMap::new(),
            cpu_stats: CpuStats::default(),
            page_size,
            rescan_every,
        }
    }

    /// Reads every watched process; returns the samples and the processes
    /// that are gone (exited, or their pid reused). `open_files` walks a
    /// process's open files, where the task iterator can (see
    /// [`FdWalk`]).
    pub fn read<'a>(
        &self,
        roots: &Roots,
        watched: impl Iterator<Item = &'a Watched>,
        rows: Option<&RowsByTgid>,
        mono: u64,
        open_files: &mut dyn FnMut(u32) -> Option<FdInventory>,
    ) -> (Vec<Sample<'a>>, Vec<Watched>) {
        let mut samples = Vec::new();
        let mut gone = Vec::new();
        let mut dirs = roots.pid_dirs();
        for w in watched {
            let dir = dirs.of(w.key.pid);
            let prev = self.prev.get(&w.key);
            // Reuse the fd scan while the fd count holds, but rescan at least
            // every discovery period so a swapped socket is not missed for long.
            let fds = prev
                .filter(|p| mono.saturating_sub(p.fd_scan_ns) < self.rescan_every.as_nanos() as u64)
                .and_then(|p| {
                    p.sample.fds.map(|count| FdReuse {
                        count,
                        socket_inodes: &p.sample.socket_inodes,
                        tcp_inodes: p.sample.tcp_inodes.as_deref(),
                        uverbs: &p.sample.uverbs,
                    })
                });
            let sched_due = prev
                .and_then(|p| p.migrations)
                .is_none_or(|(t, _)| mono.saturating_sub(t) >= SCHED_EVERY.as_nanos() as u64);
            let tasks = rows.and_then(|r| r.get(&w.key.pid));
            let reuse = Reuse {
                fds,
                fd_walk: Some(FdWalk(&mut *open_files)),
                threads: prev.map(|p| &p.sample.per_thread),
                skip_sched: !sched_due,
                tasks,
                start_time: Some(w.key.start_time),
                // `status` lent while not due (used only with the rows,
                // which give what changes every tick).
                status: prev
                    .filter(|p| !status_due(p, tasks, mono))
                    .map(|p| StatusReuse {
                        own_pid: p.sample.own_pid,
                        affinity: p.sample.affinity_cpus.map(|_| p.sample.affinity.as_slice()),
                    }),
            };
            match read_process(dir, self.page_size, reuse) {
                Ok(s) if s.start_time == w.key.start_time => samples.push((w, s)),
                // Same pid, new start time: the watched process is gone and the pid reused.
                Ok(_) | Err(ReadError::Gone) | Err(ReadError::Other(_)) => gone.push(w.clone()),
            }
        }
        (samples, gone)
    }

    /// Rank frames from this tick's samples and their sockets; remembers
    /// what the next tick's rates need.
    pub fn build_ranks(
        &mut self,
        samples: Vec<Sample>,
        tables: &super::sockets::Tables,
        mounts: &CgroupMounts,
        mono: u64,
        dt_s: Option<f64>,
        files: &mut KeptFiles,
    ) -> Vec<RankFrame> {
        let mut ranks = Vec::with_capacity(samples.len());
        let mut next = HashMap::new();
        let cgroups = samples.iter().map(|(w, _)| w.cgroup.as_str());
        self.cpu_stats.read(cgroups, mounts, files, mono);
        for (w, s) in samples {
            let prev = self.prev.get(&w.key);
            let cpu_stat = self.cpu_stats.get(&w.cgroup);
            let cfs_ns = cpu_stat.and_then(|(t, v)| parse_throttled_ns(t, v));
            let (cgroup_cpu, cgroup_usage_ns) = match (cpu_stat, prev) {
                (Some((text, v)), Some(p)) => cgroup_cpu(mounts, w, text, v, p, cfs_ns, dt_s),
                _ => (None, None),
            };
            let table = w.netns.and_then(|ns| tables.get(&ns));
            let sockets: Vec<&SocketRaw> = s
                .socket_inodes
                .iter()
                .filter_map(|i| table.and_then(|t| t.get(i)))
                .collect();
            // Migrations: a new reading gives a rate over the time since the
            // last reading; between readings the last rate carries on.
            let (migrations, migrations_rate) = match (s.migrations_known, prev) {
                (true, Some(p)) => {
                    let r = p.migrations.and_then(|(t, total)| {
                        rate(total, s.nr_migrations, mono.saturating_sub(t) as f64 / 1e9)
                    });
                    (Some((mono, s.nr_migrations)), r)
                }
                (true, None) => (Some((mono, s.nr_migrations)), None),
                (false, Some(p)) => (p.migrations, p.migrations_rate),
                (false, None) => (None, None),
            };
            let mut rank = build_rank(RankInput {
                w,
                s: &s,
                cfs_ns,
                sockets: &sockets,
                prev,
                dt_s,
                migrations_rate,
                migrations,
            });
            rank.cgroup_cpu = cgroup_cpu;
            // Made the size it ends at: collected from a filter it grew
            // and rehashed four times for 64 sockets. The rank's sockets
            // are `sockets`, in order.
            let mut kept = HashMap::with_capacity(sockets.len());
            kept.extend(sockets.iter().zip(&rank.sockets).map(|(r, f)| {
                let s = PrevSocket {
                    info: r.info.clone(),
                    local: (r.local, f.local.clone()),
                    remote: (r.remote, f.remote.clone()),
                };
                (r.inode, s)
            }));
            ranks.push(rank);
            let fd_scan_ns = match prev {
                Some(p) if !s.fds_rescanned => p.fd_scan_ns,
                _ => mono,
            };
            let status_ns = match prev {
                Some(p) if !s.status_read => p.status_ns,
                _ => mono,
            };
            next.insert(
                w.key,
                ProcPrev {
                    sample: s,
                    fd_scan_ns,
                    status_ns,
                    migrations,
                    migrations_rate,
                    cfs_ns,
                    cgroup_usage_ns,
                    sockets: kept,
                },
            );
        }
        self.prev = next;
        ranks
    }
}

/// For a rank throttled in this interval: its cgroup, quota and use. Also
/// the cgroup's usage reading to keep (only while throttling goes on).
fn cgroup_cpu(
    mounts: &CgroupMounts,
    w: &Watched,
    cpu_stat: &str,
    v: crate::sources::cgroup::CgroupVersion,
    prev: &ProcPrev,
    cfs_ns: Option<u64>,
    dt_s: Option<f64>,
) -> (Option<CgroupCpu>, Option<u64>) {
    let throttled = matches!((prev.cfs_ns, cfs_ns), (Some(a), Some(b)) if b > a);
    if !throttled {
        return (None, None);
    }
    let usage = mounts.usage_ns(&w.cgroup, cpu_stat, v);
    let used_cpus = match (prev.cgroup_usage_ns, usage, dt_s) {
        (Some(a), Some(b), Some(dt)) => rate(a, b, dt).map(|ns| ns / 1e9),
        _ => None,
    };
    let (path, quota) = match mounts.cpu_dir(&w.cgroup) {
        Some((dir, v, rel)) => (rel, CgroupMounts::quota_cpus(&dir, v)),
        None => ("?".into(), None),
    };
    (
        Some(CgroupCpu {
            path: Text::new(&path),
            quota_cpus: quota,
            used_cpus,
        }),
        usage,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::tasks::ProcessPart;

    const SEC: u64 = 1_000_000_000;

    /// A process whose `status` was read at 0 s, its leader's fingerprint
    /// then `sig`.
    fn prev(sig: Option<u64>) -> ProcPrev {
        ProcPrev {
            sample: ProcSample {
                affinity_sig: sig,
                ..Default::default()
            },
            fd_scan_ns: 0,
            status_ns: 0,
            migrations: None,
            migrations_rate: None,
            cfs_ns: None,
            cgroup_usage_ns: None,
            sockets: HashMap::new(),
        }
    }

    /// Its rows, the leader's fingerprint `sig`.
    fn rows(sig: Option<u64>) -> Vec<TaskRow> {
        let row = |tid| TaskRow {
            tid,
            tgid: 10,
            process: ProcessPart {
                affinity_sig: sig,
                ..Default::default()
            },
            ..Default::default()
        };
        vec![row(11), row(10)]
    }

    #[test]
    fn status_is_read_again_the_tick_the_allowed_cpus_change() {
        let same = rows(Some(1));
        let p = prev(Some(1));
        assert!(!status_due(&p, Some(&same), SEC / 2), "nothing changed");
        assert!(!status_due(&p, Some(&same), 9 * SEC), "not every 2 s");
        assert!(status_due(&p, Some(&same), 10 * SEC), "every 10 s still");
        assert!(status_due(&p, Some(&rows(Some(2))), SEC / 2), "changed");
        // The last tick had no fingerprint (procfs, or an older kernel).
        assert!(status_due(&prev(None), Some(&same), SEC / 2));
    }

    #[test]
    fn without_a_fingerprint_status_is_read_every_2_s() {
        let p = prev(Some(1));
        for tasks in [None, Some(rows(None))] {
            assert!(!status_due(&p, tasks.as_deref(), SEC));
            assert!(status_due(&p, tasks.as_deref(), 2 * SEC));
        }
    }
}
