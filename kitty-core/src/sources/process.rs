//! Per-process readers: /proc/<pid>/{stat,status,io,fd,task/*/schedstat,task/*/sched}.
//! With the task iterator's rows, task/* is not read, and when the rows
//! carry the process-wide counters neither are stat, io and status (status
//! only when due: the sampler says when), nor fd/ (the leader's row counts
//! the open fds); the fd inventory, when due, from the iterator's walk of
//! the open files where it has one, else fd links.
//!
//! Every reader tolerates the process vanishing mid-read: the sampler then
//! drops it and emits a "rank exited" event.

use super::sched::parse_nr_migrations;
use super::status::{read_status, StatusFields};
use super::tasks::{self, FdInventory, TaskRow};
use procfs::process::{Io, Schedstat, Stat};
use procfs::FromRead;
use std::collections::BTreeMap;
use std::path::Path;

/// One process's counters at one instant.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProcSample {
    pub pid: u32,
    /// Its pid in its own pid namespace (NSpid's last field): what it
    /// reports about itself (NCCL Inspector, NCCL RAS).
    pub own_pid: u32,
    pub start_time: u64,
    pub comm: String,
    pub state: char,
    pub cpu_ticks: u64,
    pub threads: u64,
    pub rss_bytes: Option<u64>,
    pub ctx_voluntary: u64,
    pub ctx_involuntary: u64,
    pub affinity_cpus: Option<u32>,
    /// Cpus_allowed_list as inclusive ranges.
    pub affinity: Vec<(u32, u32)>,
    /// The leader's task row's fingerprint of that list, when the rows gave
    /// one: a change tells the sampler to read `status` again.
    pub affinity_sig: Option<u64>,
    pub io_read_bytes: Option<u64>,
    pub io_write_bytes: Option<u64>,
    /// Sums over all threads: the leader's own files only describe the leader.
    pub run_delay_ns: u64,
    pub exec_ns: u64,
    pub nr_migrations: u64,
    pub migrations_known: bool,
    pub per_thread: BTreeMap<u32, ThreadSample>,
    pub fds: Option<u64>,
    /// Inodes of the process's sockets (`socket:[N]` fd links).
    pub socket_inodes: Vec<u64>,
    /// Its connectable TCP sockets, where the fd walk could tell
    /// ([`FdInventory::tcp_inodes`]).
    pub tcp_inodes: Option<Vec<u64>>,
    /// RDMA uverbs devices it has open (`/dev/infiniband/uverbs<N>` fds).
    pub uverbs: Vec<u32>,
    /// Whether the fd links were read this time (false: reused, count unchanged).
    pub fds_rescanned: bool,
    /// Whether `status` was read this time (false: its slow fields reused,
    /// the context switches from the leader's task row).
    pub status_read: bool,
    /// Whether every counter came from the task rows (stat, io and status
    /// not read this time).
    pub counters_from_rows: bool,
    /// Whether the per-thread counters came from the task iterator's rows
    /// (false: from task/*/schedstat).
    pub threads_from_rows: bool,
}

/// The previous fd scan, reused while the fd count is unchanged: reading
/// every fd link is the most expensive part of a tick for socket-heavy ranks.
#[derive(Debug, Clone, Copy)]
pub struct FdReuse<'a> {
    pub count: u64,
    pub socket_inodes: &'a [u64],
    pub tcp_inodes: Option<&'a [u64]>,
    pub uverbs: &'a [u32],
}

/// A walk of a process's open files, by its pid as the task rows name it,
/// to use instead of /proc/<pid>/fd when the fd scan is due (the task
/// iterator's file walk).
pub struct FdWalk<'a>(pub &'a mut dyn FnMut(u32) -> Option<FdInventory>);

impl std::fmt::Debug for FdWalk<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FdWalk")
    }
}

/// What a previous sample lends the next read: thread names (read once per
/// thread) and, while still valid, the fd scan.
#[derive(Debug, Default)]
pub struct Reuse<'a> {
    pub fds: Option<FdReuse<'a>>,
    /// Walks the open files when the fd scan is due; taken only with this
    /// process's own task rows (`tasks`, same start time), which say the
    /// walk's pid is this process as the walker sees it.
    pub fd_walk: Option<FdWalk<'a>>,
    pub threads: Option<&'a BTreeMap<u32, ThreadSample>>,
    /// Skip the per-thread `sched` files (migrations) this time: they are
    /// large formatted files, read every few ticks rather than every tick.
    pub skip_sched: bool,
    /// This process's threads as the task iterator read them this tick:
    /// used instead of task/*/{schedstat,sched,comm} when they are of this
    /// very process (same start time).
    pub tasks: Option<&'a [TaskRow]>,
    /// What `status` said last time, lent while it is not due again: with
    /// the iterator's rows the leader's context switches come from its
    /// row and the RSS from `stat`, so `status` (large, ~55 formatted
    /// fields) is only needed for what rarely changes.
    pub status: Option<StatusReuse<'a>>,
    /// The watched process's start time: task rows of this start are its
    /// own (the pid may be another pid namespace's).
    pub start_time: Option<u64>,
}

/// The slow-changing fields of the last `status` read.
#[derive(Debug, Clone, Copy)]
pub struct StatusReuse<'a> {
    pub own_pid: u32,
    pub affinity: Option<&'a [(u32, u32)]>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ThreadSample {
    /// Raw, shared with the task row or the last sample it came from.
    pub comm: std::sync::Arc<str>,
    pub run_delay_ns: u64,
    pub exec_ns: u64,
}

#[derive(Debug)]
pub enum ReadError {
    /// The process is gone (ENOENT/ESRCH): not an error, just an exit.
    Gone,
    Other(String),
}

/// A plain read's error: gone (ENOENT, ESRCH) or not.
fn classify_io(e: std::io::Error) -> ReadError {
    if e.kind() == std::io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ESRCH) {
        ReadError::Gone
    } else {
        ReadError::Other(e.to_string())
    }
}

fn classify(e: procfs::ProcError) -> ReadError {
    match e {
        procfs::ProcError::NotFound(_) => ReadError::Gone,
        procfs::ProcError::Io(io, _) => classify_io(io),
        other => ReadError::Other(other.to_string()),
    }
}

/// What identifies a process: its start time (with the pid), its name and
/// its parent.
#[derive(Debug, Clone, PartialEq)]
pub struct Identity {
    pub start_time: u64,
    pub comm: String,
    pub ppid: u32,
}

/// Reads a process's identity only (a cheap check for discovery).
pub fn read_identity(dir: &Path) -> Option<Identity> {
    let stat = Stat::from_file(dir.join("stat")).ok()?;
    Some(Identity {
        start_time: stat.starttime,
        comm: stat.comm,
        ppid: stat.ppid.max(0) as u32,
    })
}

/// Reads everything kitty samples for one process directory (`/proc/<pid>`).
pub fn read_process(dir: &Path, page_size: u64, reuse: Reuse) -> Result<ProcSample, ReadError> {
    if let Some(sample) = from_rows(dir, &reuse, page_size) {
        let mut sample = sample?;
        let counted = reuse.tasks.and_then(leader_fd_count);
        read_fds(dir, &mut sample, counted, reuse.fds, reuse.fd_walk);
        return Ok(sample);
    }
    let stat = Stat::from_file(dir.join("stat")).map_err(classify)?;
    // The iterator's rows, when they are of this very process.
    let rows = reuse.tasks.filter(|rows| {
        rows.first()
            .is_some_and(|r| r.start_ticks == stat.starttime)
    });
    let leader = rows.and_then(|rows| rows.iter().find(|r| r.tid == stat.pid as u32));
    let (status, status_read) = status_beside(dir, leader, reuse.status)?;
    let io = Io::from_file(dir.join("io")).ok();
    let mut sample = ProcSample {
        pid: stat.pid as u32,
        own_pid: status.own_pid.unwrap_or(stat.pid as u32),
        start_time: stat.starttime,
        comm: stat.comm.clone(),
        state: stat.state,
        cpu_ticks: stat.utime + stat.stime,
        threads: stat.num_threads.max(0) as u64,
        rss_bytes: status
            .vmrss_kb
            .map(|kb| kb * 1024)
            .or(Some(stat.rss * page_size)),
        ctx_voluntary: status.voluntary_ctxt_switches.unwrap_or(0),
        ctx_involuntary: status.nonvoluntary_ctxt_switches.unwrap_or(0),
        affinity_cpus: status.cpus_allowed_list.as_deref().map(count_cpus),
        affinity: status.cpus_allowed_list.clone().unwrap_or_default(),
        io_read_bytes: io.as_ref().map(|i| i.read_bytes),
        io_write_bytes: io.as_ref().map(|i| i.write_bytes),
        status_read,
        ..Default::default()
    };
    match rows {
        Some(rows) => threads_from_rows(&mut sample, rows),
        None => read_threads(dir, &mut sample, reuse.threads, !reuse.skip_sched),
    }
    let counted = rows.and_then(leader_fd_count);
    read_fds(dir, &mut sample, counted, reuse.fds, None);
    Ok(sample)
}

/// `status`, or, when its slow fields are lent and the leader's task row
/// is at hand, what it would say without reading it (the context switches
/// it prints are the leader's own); whether the file was read.
fn status_beside(
    dir: &Path,
    leader: Option<&TaskRow>,
    lent: Option<StatusReuse>,
) -> Result<(StatusFields, bool), ReadError> {
    match (leader, lent) {
        (Some(l), Some(prev)) => Ok((
            StatusFields {
                own_pid: Some(prev.own_pid),
                vmrss_kb: None,
                voluntary_ctxt_switches: Some(l.nvcsw),
                nonvoluntary_ctxt_switches: Some(l.nivcsw),
                cpus_allowed_list: prev.affinity.map(<[_]>::to_vec),
            },
            false,
        )),
        _ => read_status(dir).map(|s| (s, true)).map_err(classify_io),
    }
}

/// The whole sample but the fds from the task iterator's rows, when they
/// are of the watched process and carry every process-wide counter: stat
/// and io are then not read, `status` only when due. The same numbers:
/// stat's CPU time is the live threads' runtime plus the exited ones' (what
/// the kernel sums for it), io's bytes the threads' plus the exited ones',
/// the RSS the same three counters, the state and name the leader's. Used
/// on every tick the rows allow, so a rate never mixes the two ways.
fn from_rows(dir: &Path, reuse: &Reuse, page_size: u64) -> Option<Result<ProcSample, ReadError>> {
    let (rows, start) = (reuse.tasks?, reuse.start_time?);
    let leader = tasks::leader(rows)?;
    if rows.iter().any(|r| r.start_ticks != start) {
        return None;
    }
    let part = leader.process;
    let (rss_pages, (dead_read, dead_write)) = (part.rss_pages?, part.dead_io_bytes?);
    let mut io = (dead_read, dead_write);
    for r in rows {
        let (read, write) = r.io_bytes?;
        io = (io.0 + read, io.1 + write);
    }
    let (status, status_read) = match status_beside(dir, Some(leader), reuse.status) {
        Ok(s) => s,
        Err(e) => return Some(Err(e)),
    };
    let affinity = status.cpus_allowed_list;
    let mut sample = ProcSample {
        pid: leader.tgid,
        own_pid: status.own_pid.unwrap_or(leader.tgid),
        start_time: leader.start_ticks,
        comm: leader.comm.to_string(),
        state: leader.state,
        threads: rows.len() as u64,
        rss_bytes: Some(rss_pages * page_size),
        ctx_voluntary: status.voluntary_ctxt_switches.unwrap_or(0),
        ctx_involuntary: status.nonvoluntary_ctxt_switches.unwrap_or(0),
        affinity_cpus: affinity.as_deref().map(count_cpus),
        affinity: affinity.unwrap_or_default(),
        affinity_sig: part.affinity_sig,
        io_read_bytes: Some(io.0),
        io_write_bytes: Some(io.1),
        status_read,
        counters_from_rows: true,
        ..Default::default()
    };
    threads_from_rows(&mut sample, rows);
    let ns_per_tick = 1_000_000_000 / super::clock_ticks().max(1);
    sample.cpu_ticks = (part.dead_exec_ns + sample.exec_ns) / ns_per_tick;
    Some(Ok(sample))
}

/// Number of CPUs in a Cpus_allowed_list of inclusive ranges.
pub fn count_cpus(ranges: &[(u32, u32)]) -> u32 {
    ranges.iter().map(|(a, b)| b.saturating_sub(*a) + 1).sum()
}

fn read_threads(
    dir: &Path,
    sample: &mut ProcSample,
    prev: Option<&BTreeMap<u32, ThreadSample>>,
    sched: bool,
) {
    let Ok(tasks) = std::fs::read_dir(dir.join("task")) else {
        return;
    };
    let mut migrations_known = false;
    for task in tasks.flatten() {
        let Some(tid) = task
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let tdir = task.path();
        // A thread that exits between listing and reading is simply skipped.
        let Ok(ss) = Schedstat::from_file(tdir.join("schedstat")) else {
            continue;
        };
        sample.run_delay_ns += ss.run_delay;
        sample.exec_ns += ss.sum_exec_runtime;
        let migrations = sched
            .then(|| super::read_small(&tdir.join("sched")).ok())
            .flatten()
            .as_deref()
            .and_then(parse_nr_migrations);
        if let Some(m) = migrations {
            sample.nr_migrations += m;
            migrations_known = true;
        }
        // A thread's name rarely changes: read it once.
        let comm = match prev.and_then(|p| p.get(&tid)) {
            Some(t) => t.comm.clone(),
            None => super::read_small(&tdir.join("comm"))
                .map(|s| s.trim_end().into())
                .unwrap_or_default(),
        };
        sample.per_thread.insert(
            tid,
            ThreadSample {
                comm,
                run_delay_ns: ss.run_delay,
                exec_ns: ss.sum_exec_runtime,
            },
        );
    }
    sample.migrations_known = migrations_known;
}

/// The same sums and per-thread samples as [`read_threads`], from the task
/// iterator's rows (migrations are known on every tick here).
fn threads_from_rows(sample: &mut ProcSample, rows: &[TaskRow]) {
    for r in rows {
        sample.run_delay_ns += r.run_delay_ns;
        sample.exec_ns += r.exec_ns;
        sample.nr_migrations += r.nr_migrations;
    }
    // Built at once (sorted, then laid out), not by a search and insert
    // per thread.
    sample.per_thread = rows
        .iter()
        .map(|r| {
            let t = ThreadSample {
                comm: r.comm.clone(),
                run_delay_ns: r.run_delay_ns,
                exec_ns: r.exec_ns,
            };
            (r.tid, t)
        })
        .collect();
    sample.migrations_known = true;
    sample.threads_from_rows = true;
}

/// The open fds the leader's task row counted (rows already known to be
/// this process's), if it could.
fn leader_fd_count(rows: &[TaskRow]) -> Option<u64> {
    tasks::leader(rows).and_then(|l| l.process.open_fds)
}

/// Number of open fds from stat(/proc/<pid>/fd).st_size (Linux 6.2+; 0 before).
fn fd_count_from_stat(dir: &Path) -> Option<u64> {
    std::fs::metadata(dir.join("fd"))
        .ok()
        .map(|m| m.len())
        .filter(|n| *n > 0)
}

/// The fd count and inventory: the last inventory again while the count
/// is unchanged (the count from the task rows when `counted`, else from a
/// stat of the fd directory), else a walk or a scan.
fn read_fds(
    dir: &Path,
    sample: &mut ProcSample,
    counted: Option<u64>,
    reuse: Option<FdReuse>,
    walk: Option<FdWalk>,
) {
    if let Some(r) = reuse {
        if counted.or_else(|| fd_count_from_stat(dir)) == Some(r.count) {
            sample.fds = Some(r.count);
            sample.socket_inodes = r.socket_inodes.to_vec();
            sample.tcp_inodes = r.tcp_inodes.map(<[u64]>::to_vec);
            sample.uverbs = r.uverbs.to_vec();
            return;
        }
    }
    let walked = walk.and_then(|w| (w.0)(sample.pid));
    let Some(inv) = walked.or_else(|| scan_fds(dir)) else {
        return;
    };
    sample.fds = Some(inv.count);
    sample.socket_inodes = inv.socket_inodes;
    sample.tcp_inodes = inv.tcp_inodes;
    sample.uverbs = inv.uverbs;
    sample.fds_rescanned = true;
}

/// The fd inventory from /proc/<pid>/fd: a readlink per fd (None when the
/// directory cannot be read).
pub fn scan_fds(dir: &Path) -> Option<FdInventory> {
    let fds = std::fs::read_dir(dir.join("fd")).ok()?;
    let mut inv = FdInventory::default();
    for fd in fds.flatten() {
        inv.count += 1;
        if let Ok(target) = std::fs::read_link(fd.path()) {
            let target = target.as_os_str().to_str().unwrap_or("");
            if let Some(inode) = parse_socket_link(target) {
                inv.socket_inodes.push(inode);
            } else if let Some(n) = crate::sources::rdma::uverbs_of_link(target) {
                inv.uverbs.push(n);
            }
        }
    }
    Some(inv.deduped())
}

/// `socket:[12345]` -> 12345.
pub fn parse_socket_link(target: &str) -> Option<u64> {
    target
        .strip_prefix("socket:[")?
        .strip_suffix(']')?
        .parse()
        .ok()
}

/// Why a call could not run in a process's network namespace.
#[derive(Debug)]
pub enum NetnsError {
    Open(std::io::Error),
    Setns(std::io::Error),
    Helper,
}

impl std::fmt::Display for NetnsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NetnsError::Open(e) => write!(f, "cannot open its network namespace: {e}"),
            NetnsError::Setns(e) => write!(
                f,
                "cannot enter its network namespace: {e} (needs CAP_SYS_ADMIN)"
            ),
            NetnsError::Helper => f.write_str("the namespace helper thread panicked"),
        }
    }
}

/// Runs `f` in the network namespace of the process at `pid_dir`: right
/// here when it is ours, else on a helper thread that enters it (setns
/// changes only the calling thread, and the thread ends right after).
pub fn in_netns_of<T: Send>(pid_dir: &Path, f: impl FnOnce() -> T + Send) -> Result<T, NetnsError> {
    use std::os::fd::AsRawFd;
    let same = match (
        std::fs::read_link(pid_dir.join("ns/net")),
        std::fs::read_link("/proc/thread-self/ns/net"),
    ) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    if same {
        return Ok(f());
    }
    let ns = std::fs::File::open(pid_dir.join("ns/net")).map_err(NetnsError::Open)?;
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                // SAFETY: setns on this helper thread only; the thread ends right after.
                if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                    return Err(NetnsError::Setns(std::io::Error::last_os_error()));
                }
                Ok(f())
            })
            .join()
            .map_err(|_| NetnsError::Helper)?
    })
}

/// Inode of a process's network namespace (`net:[4026531840]`).
pub fn read_netns(dir: &Path) -> Option<u64> {
    let link = std::fs::read_link(dir.join("ns/net")).ok()?;
    link.to_str()?
        .strip_prefix("net:[")?
        .strip_suffix(']')?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::tasks::ProcessPart;

    /// The fixture read with task rows, a lent status and a watched start.
    fn with_rows(
        dir: &Path,
        rows: &[TaskRow],
        status: Option<StatusReuse>,
        start_time: Option<u64>,
    ) -> ProcSample {
        let reuse = Reuse {
            tasks: Some(rows),
            status,
            start_time,
            ..Default::default()
        };
        read_process(dir, 4096, reuse).unwrap()
    }

    fn fixture_dir() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/proc");
        for f in ["stat", "status", "io"] {
            std::fs::copy(src.join(f), d.path().join(f)).unwrap();
        }
        let t = d.path().join("task/77");
        std::fs::create_dir_all(&t).unwrap();
        std::fs::copy(src.join("schedstat"), t.join("schedstat")).unwrap();
        std::fs::copy(src.join("sched"), t.join("sched")).unwrap();
        let t2 = d.path().join("task/78");
        std::fs::create_dir_all(&t2).unwrap();
        std::fs::write(t2.join("schedstat"), "1000 500 3\n").unwrap();
        // An older kernel: no sched file for this thread.
        d
    }

    #[test]
    fn reads_captured_process_and_sums_threads() {
        let d = fixture_dir();
        let s = read_process(d.path(), 4096, Reuse::default()).unwrap();
        assert!(s.pid > 0);
        assert!(s.start_time > 0);
        assert_eq!(s.comm, "python3");
        assert_eq!(s.run_delay_ns, 995_164 + 500);
        assert_eq!(s.exec_ns, 93_631_738 + 1000);
        assert_eq!(s.nr_migrations, 6);
        assert!(s.migrations_known);
        assert_eq!(s.per_thread.len(), 2);
        assert!(s.affinity_cpus.unwrap() >= 1);
        assert!(s.io_read_bytes.is_some());
        assert_eq!(s.fds, None, "no fd dir in the fixture");
    }

    #[test]
    fn iterator_rows_of_this_process_replace_the_task_files() {
        let d = fixture_dir();
        let procfs = read_process(d.path(), 4096, Reuse::default()).unwrap();
        let row = |tid, delay, exec, start_ticks| TaskRow {
            tid,
            tgid: procfs.pid,
            comm: format!("t{tid}").into(),
            run_delay_ns: delay,
            exec_ns: exec,
            nr_migrations: 2,
            start_ticks,
            ..Default::default()
        };
        let rows = [
            row(77, 10, 100, procfs.start_time),
            row(79, 5, 50, procfs.start_time),
        ];
        let it = read_process(
            d.path(),
            4096,
            Reuse {
                tasks: Some(&rows),
                ..Default::default()
            },
        )
        .unwrap();
        assert!(it.threads_from_rows);
        assert_eq!(
            (it.run_delay_ns, it.exec_ns, it.nr_migrations),
            (15, 150, 4)
        );
        assert!(it.migrations_known, "migrations known on every tick");
        assert_eq!(it.per_thread.keys().copied().collect::<Vec<_>>(), [77, 79]);
        assert_eq!(&*it.per_thread[&79].comm, "t79");
        assert_eq!(it.comm, procfs.comm, "the rest still from procfs");

        // Rows of another start (a reused pid, another pid namespace's
        // proc root): this process's own task files instead.
        let stale = [row(77, 10, 100, procfs.start_time + 1)];
        let fallback = read_process(
            d.path(),
            4096,
            Reuse {
                tasks: Some(&stale),
                ..Default::default()
            },
        )
        .unwrap();
        assert!(!fallback.threads_from_rows);
        assert_eq!(fallback.run_delay_ns, procfs.run_delay_ns);
    }

    #[test]
    fn rows_with_the_process_part_replace_stat_io_and_status() {
        let d = fixture_dir();
        let procfs = read_process(d.path(), 4096, Reuse::default()).unwrap();
        let hz = crate::sources::clock_ticks();
        let part = ProcessPart {
            dead_exec_ns: 3_000_000_000,
            dead_io_bytes: Some((100, 200)),
            rss_pages: Some(1000),
            open_fds: None,
            affinity_sig: Some(0xc0ffee),
            placement: None,
        };
        let row = |tid, exec_ns, io| TaskRow {
            tid,
            tgid: procfs.pid,
            comm: format!("t{tid}").into(),
            exec_ns,
            nvcsw: 5,
            nivcsw: 6,
            start_ticks: procfs.start_time,
            state: 'S',
            io_bytes: io,
            process: part,
            ..Default::default()
        };
        let rows = [
            row(procfs.pid, 1_000_000_000, Some((1, 2))),
            row(procfs.pid + 1, 1_000_000_000, Some((10, 20))),
        ];
        let lent = StatusReuse {
            own_pid: 7,
            affinity: Some(&[(0, 1)]),
        };
        let read_as =
            |rows: &[TaskRow], status, start| with_rows(d.path(), rows, status, Some(start));
        let read = |rows: &[TaskRow], status| read_as(rows, status, procfs.start_time);
        let s = read(&rows, Some(lent));
        assert!(s.counters_from_rows && s.threads_from_rows);
        assert_eq!(s.cpu_ticks, 5 * hz, "3 s exited + 2 s live");
        assert_eq!((s.io_read_bytes, s.io_write_bytes), (Some(111), Some(222)));
        assert_eq!(s.rss_bytes, Some(1000 * 4096));
        assert_eq!(
            (s.threads, s.state, s.comm.as_str()),
            (2, 'S', format!("t{}", procfs.pid).as_str())
        );
        assert_eq!(
            (s.own_pid, s.affinity_cpus, s.ctx_voluntary),
            (7, Some(2), 5)
        );
        assert_eq!(s.start_time, procfs.start_time);
        assert_eq!(
            s.affinity_sig,
            Some(0xc0ffee),
            "the leader's, for the next tick"
        );

        assert!(!s.status_read);
        // `status` due: read for what it alone says; the counters still
        // from the rows (a rate never mixes the two ways).
        let due = read(&rows, None);
        assert!(due.counters_from_rows && due.status_read);
        assert_eq!(
            (due.own_pid, due.affinity),
            (procfs.own_pid, procfs.affinity.clone())
        );
        assert_eq!(due.cpu_ticks, s.cpu_ticks);
        // A row without I/O accounting, or rows of another start: the
        // process's files as before.
        let no_io = [rows[0].clone(), row(procfs.pid + 1, 0, None)];
        assert!(!read(&no_io, Some(lent)).counters_from_rows);
        let fallback = read_as(&rows, Some(lent), procfs.start_time + 1);
        assert!(!fallback.counters_from_rows);
        assert_eq!(fallback.cpu_ticks, procfs.cpu_ticks);
    }

    /// A leader's row with the process part (the rows then stand for
    /// stat, io and status), of this start and fd count.
    fn leader_row(pid: u32, start_ticks: u64, open_fds: Option<u64>) -> [TaskRow; 1] {
        [TaskRow {
            tid: pid,
            tgid: pid,
            start_ticks,
            io_bytes: Some((0, 0)),
            process: ProcessPart {
                dead_io_bytes: Some((0, 0)),
                rss_pages: Some(1),
                open_fds,
                ..Default::default()
            },
            ..Default::default()
        }]
    }

    /// The fixture read beside `rows` (the process's start: `start`), the
    /// last fd inventory lent as `fds`, walks by `walk`.
    fn read_beside(
        dir: &Path,
        start: u64,
        rows: &[TaskRow],
        fds: Option<FdReuse>,
        walk: &mut dyn FnMut(u32) -> Option<FdInventory>,
    ) -> ProcSample {
        let reuse = Reuse {
            tasks: Some(rows),
            start_time: Some(start),
            fds,
            fd_walk: Some(FdWalk(walk)),
            ..Default::default()
        };
        read_process(dir, 4096, reuse).unwrap()
    }

    #[test]
    fn the_file_walk_is_taken_only_beside_the_processs_own_rows() {
        let d = fixture_dir();
        let procfs = read_process(d.path(), 4096, Reuse::default()).unwrap();
        let mut walks = 0;
        let mut read = |start_ticks| {
            let mut walk = |pid| {
                assert_eq!(pid, procfs.pid, "walked by the rows' pid");
                walks += 1;
                Some(FdInventory {
                    count: 3,
                    socket_inodes: vec![42],
                    tcp_inodes: Some(vec![42]),
                    uverbs: vec![1],
                })
            };
            let rows = leader_row(procfs.pid, start_ticks, None);
            read_beside(d.path(), procfs.start_time, &rows, None, &mut walk)
        };
        let own = read(procfs.start_time);
        assert!(own.counters_from_rows && own.fds_rescanned);
        assert_eq!(
            (own.fds, own.socket_inodes, own.tcp_inodes, own.uverbs),
            (Some(3), vec![42], Some(vec![42]), vec![1])
        );
        // Rows of another start: their pid may be another process as the
        // walker sees it; the fixture has no fd/ to scan either.
        let other = read(procfs.start_time + 1);
        assert!(!other.counters_from_rows);
        assert_eq!((other.fds, other.socket_inodes.len()), (None, 0));
        assert_eq!(walks, 1, "walked for its own rows only");
    }

    #[test]
    fn the_leaders_fd_count_decides_whether_the_inventory_is_read_again() {
        // The fixture has no fd/ to stat: only the row's count can say the
        // inventory is unchanged.
        let d = fixture_dir();
        let procfs = read_process(d.path(), 4096, Reuse::default()).unwrap();
        let mut walks = 0;
        let mut read = |open_fds| {
            let mut walk = |_| {
                walks += 1;
                Some(FdInventory {
                    count: 4,
                    socket_inodes: vec![7],
                    tcp_inodes: None,
                    uverbs: vec![],
                })
            };
            let last = FdReuse {
                count: 3,
                socket_inodes: &[42],
                tcp_inodes: Some(&[42]),
                uverbs: &[1],
            };
            let rows = leader_row(procfs.pid, procfs.start_time, open_fds);
            read_beside(d.path(), procfs.start_time, &rows, Some(last), &mut walk)
        };
        let same = read(Some(3));
        assert!(!same.fds_rescanned);
        assert_eq!(
            (same.fds, same.socket_inodes, same.tcp_inodes, same.uverbs),
            (Some(3), vec![42], Some(vec![42]), vec![1])
        );
        let more = read(Some(4));
        assert!(more.fds_rescanned);
        assert_eq!(
            (more.fds, more.socket_inodes, more.tcp_inodes),
            (Some(4), vec![7], None)
        );
        // Not counted (a table too large to count): no count to compare,
        // so walked again.
        let unknown = read(None);
        assert!(unknown.fds_rescanned);
        assert_eq!(walks, 2);
    }

    #[test]
    fn with_the_leaders_row_status_is_read_only_when_due() {
        let d = fixture_dir();
        let procfs = read_process(d.path(), 4096, Reuse::default()).unwrap();
        assert!(procfs.status_read);
        let leader = TaskRow {
            tid: procfs.pid,
            tgid: procfs.pid,
            nvcsw: 12_345,
            nivcsw: 678,
            start_ticks: procfs.start_time,
            ..Default::default()
        };
        let lent = StatusReuse {
            own_pid: 4242,
            affinity: Some(&[(0, 3)]),
        };
        let read = |rows: &[TaskRow], status| with_rows(d.path(), rows, status, None);
        let it = read(std::slice::from_ref(&leader), Some(lent));
        assert!(!it.status_read);
        assert_eq!((it.ctx_voluntary, it.ctx_involuntary), (12_345, 678));
        assert_eq!((it.own_pid, it.affinity_cpus), (4242, Some(4)));
        assert!(it.rss_bytes.is_some(), "RSS from stat");
        // Due (nothing lent), or no leader row: status as before.
        let due = read(std::slice::from_ref(&leader), None);
        assert!(due.status_read);
        assert_eq!(due.ctx_voluntary, procfs.ctx_voluntary);
        assert_eq!(due.affinity, procfs.affinity);
        let other = TaskRow {
            tid: procfs.pid + 1,
            ..leader
        };
        let no_leader = read(&[other], Some(lent));
        assert!(no_leader.status_read);
        assert_eq!(no_leader.own_pid, procfs.own_pid);
    }

    #[test]
    fn missing_process_is_gone_not_error() {
        let d = tempfile::tempdir().unwrap();
        assert!(matches!(
            read_process(&d.path().join("999999"), 4096, Reuse::default()),
            Err(ReadError::Gone)
        ));
    }

    #[test]
    fn empty_stat_is_an_error_not_a_panic() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("stat"), "").unwrap();
        assert!(read_process(d.path(), 4096, Reuse::default()).is_err());
    }

    #[test]
    fn socket_links_and_cpu_ranges() {
        assert_eq!(parse_socket_link("socket:[4242]"), Some(4242));
        assert_eq!(parse_socket_link("pipe:[4242]"), None);
        assert_eq!(parse_socket_link("/dev/null"), None);
        assert_eq!(count_cpus(&[(0, 3), (8, 8)]), 5);
    }

    #[test]
    fn reads_live_self_with_sockets() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let s = read_process(Path::new("/proc/self"), 4096, Reuse::default()).unwrap();
        assert!(s.fds_rescanned);
        // Same fd count: the scan is reused (when the kernel reports counts).
        // A quiet child, since this test process opens files concurrently.
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let dir = std::path::PathBuf::from(format!("/proc/{}", child.id()));
        // Let it finish exec (and drop the fds it had before) first.
        std::thread::sleep(std::time::Duration::from_millis(200));
        let first = read_process(&dir, 4096, Reuse::default()).unwrap();
        let fds = Some(FdReuse {
            count: first.fds.unwrap(),
            socket_inodes: &[1, 2, 3],
            tcp_inodes: None,
            uverbs: &[],
        });
        let again = read_process(
            &dir,
            4096,
            Reuse {
                fds,
                threads: Some(&first.per_thread),
                skip_sched: true,
                tasks: None,
                status: None,
                start_time: None,
                fd_walk: None,
            },
        )
        .unwrap();
        let bad = Some(FdReuse {
            count: 1_000_000,
            socket_inodes: &[],
            tcp_inodes: None,
            uverbs: &[],
        });
        let changed = read_process(
            &dir,
            4096,
            Reuse {
                fds: bad,
                threads: None,
                skip_sched: false,
                tasks: None,
                status: None,
                start_time: None,
                fd_walk: None,
            },
        )
        .unwrap();
        let counts_supported = fd_count_from_stat(&dir).is_some();
        let _ = (child.kill(), child.wait());
        if counts_supported {
            assert!(!again.fds_rescanned);
            assert_eq!(again.socket_inodes, vec![1, 2, 3]);
        }
        assert!(changed.fds_rescanned, "a different count rescans");
        assert_eq!(&*again.per_thread.values().next().unwrap().comm, "sleep");
        assert!(
            first.migrations_known && !again.migrations_known,
            "sched skipped when asked"
        );
        assert!(s.threads >= 1);
        assert!(s.fds.unwrap() >= 1);
        let inode = {
            use std::os::fd::AsRawFd;
            let link =
                std::fs::read_link(format!("/proc/self/fd/{}", listener.as_raw_fd())).unwrap();
            parse_socket_link(link.to_str().unwrap()).unwrap()
        };
        assert!(s.socket_inodes.contains(&inode));
        assert!(read_netns(Path::new("/proc/self")).is_some());
    }
}
