//! Per-thread scheduler counters from somewhere cheaper than procfs (the
//! probes' BPF task iterator: one read per tick for every watched thread),
//! and how the sampler chooses: the iterator when it opens, procfs
//! (`task/*/schedstat`, `task/*/sched`) otherwise, said in the source status
//! `ebpf.tasks`. Both give the same counters with the same meaning. The
//! iterator's rows also carry what stat and io say of the whole process
//! ([`ProcessPart`]), so with them a tick reads no per-process file but
//! the fd count. Where it can, it also walks a process's open files
//! ([`TaskCounters::open_files`]) for the fd inventory, instead of reading
//! /proc/<pid>/fd and a link per fd, and reads the TCP sockets found there
//! each tick ([`TaskCounters::tcp_sockets`]), instead of asking sock_diag.

use foldhash::{HashMap, HashMapExt};
use std::collections::BTreeSet;
use std::sync::Arc;

/// One thread's counters, as /proc/<tid>/schedstat and /proc/<tid>/sched
/// print them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TaskRow {
    pub tid: u32,
    pub tgid: u32,
    /// Its name, raw (sanitised where it is shown); shared, so a tick's
    /// samples take it without a copy.
    pub comm: Arc<str>,
    /// Time spent runnable, waiting for a CPU (schedstat's second field).
    pub run_delay_ns: u64,
    /// Times it got a CPU (schedstat's third field).
    pub run_count: u64,
    /// Time it ran (schedstat's first field).
    pub exec_ns: u64,
    pub nr_migrations: u64,
    pub nvcsw: u64,
    pub nivcsw: u64,
    /// The process's start in clock ticks since boot, as /proc/<pid>/stat
    /// says it: rows of another process under a reused pid are not its own.
    pub start_ticks: u64,
    /// Its state as /proc/<tid>/stat's letter (`R`, `S`, `D`, ...).
    pub state: char,
    /// Storage bytes read and written (`io`'s read_bytes, write_bytes),
    /// when the kernel accounts I/O per task.
    pub io_bytes: Option<(u64, u64)>,
    /// What the whole process keeps: on the leader's row (the iterator
    /// leaves the other rows' empty).
    pub process: ProcessPart,
}

/// The process-wide part of /proc/<pid>/{stat,io} a task row carries: with
/// it and the rows' sums a tick needs none of the process's files.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProcessPart {
    /// CPU time of its exited threads (signal->sum_sched_runtime).
    pub dead_exec_ns: u64,
    /// Storage I/O of its exited threads (absent with `io_bytes`).
    pub dead_io_bytes: Option<(u64, u64)>,
    /// Resident pages (file + anon + shmem, as stat's rss), when the
    /// kernel's layout is the one the program knows.
    pub rss_pages: Option<u64>,
    /// Its open fds (the leader's row only; what stat of /proc/<pid>/fd
    /// says), when the kernel's fd table could be counted.
    pub open_fds: Option<u64>,
    /// A fingerprint of the CPUs it may run on (the leader's row only: what
    /// `status`'s Cpus_allowed_list says), when the kernel's mask could be
    /// read. Compared from tick to tick, never shown.
    pub affinity_sig: Option<u64>,
    /// Where the thread is (the leader's row speaks for the process).
    pub placement: Option<Placement>,
}

/// A task's cgroup and network namespace as numbers: what tells the sampler
/// that a process moved, without reading /proc/<pid>/cgroup to find out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Placement {
    /// Which set of cgroups it is in (one per hierarchy, v1 and v2: the
    /// kernel's css_set): a move in any hierarchy changes it. An identity
    /// to compare, nothing more (the iterator gives the set's address; it
    /// is never shown or recorded).
    pub cgroups: u64,
    /// Its network namespace's inode (`/proc/<pid>/ns/net`'s `net:[N]`).
    pub netns: u64,
}

/// A task's state letter from its `__state` and `exit_state`, as the
/// kernel's `task_state_index` makes it for /proc.
pub fn state_letter(state: u32, exit_state: u32) -> char {
    const REPORT: u32 = 0x7f;
    const IDLE: u32 = 0x0402; // TASK_UNINTERRUPTIBLE | TASK_NOLOAD
    const RTLOCK_WAIT: u32 = 0x1000;
    let bits = match state {
        IDLE => 0x80,
        RTLOCK_WAIT => 0x02,
        s => (s | exit_state) & REPORT,
    };
    // fls: the highest set bit's position, 1-based (0 for running).
    let i = (u32::BITS - bits.leading_zeros()) as usize;
    b"RSDTtXZPI".get(i).map_or('?', |c| *c as char)
}

/// TCP sockets by inode (what [`TaskCounters::tcp_sockets`] gives).
pub type TcpSockets = super::tcp_table::SocketTable;

/// Something that reads every watched thread's counters at once.
pub trait TaskCounters: Send {
    /// How it reads them, for the source status (`iter/task`): asked once,
    /// when it opens.
    fn strategy(&self) -> String;
    /// The rows of every thread of these processes. An error makes this
    /// tick read procfs instead.
    fn read(&mut self, tgids: &BTreeSet<u32>) -> Result<Vec<TaskRow>, String>;
    /// Every process of the node with its CPU time, from one walk of every
    /// task (the neighbours scan); None where this source has no such walk
    /// or it failed (the scan then reads each process's stat).
    fn node_processes(&mut self) -> Option<Vec<NodeProcess>> {
        None
    }
    /// The open files of one watched process (by its pid as this source
    /// sees it), from one walk of its file table; None where this source
    /// has no such walk, an error where it failed (either way the fd scan
    /// reads /proc/<pid>/fd instead).
    fn open_files(&mut self, _tgid: u32) -> Option<Result<FdInventory, String>> {
        None
    }
    /// The TCP sockets the open-files walks have seen that are still
    /// connecting, connected or closing, by inode, as sock_diag gives them,
    /// from one run over them all; None where this source has no such walk
    /// or cannot say yet, an error where it failed (either way sock_diag
    /// answers for them).
    fn tcp_sockets(&mut self) -> Option<Result<TcpSockets, String>> {
        None
    }
}

/// A process's open files as the fd inventory keeps them: what a read of
/// /proc/<pid>/fd and a readlink of each fd give.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FdInventory {
    /// How many fds it has open.
    pub count: u64,
    /// Its sockets' inodes (`socket:[N]`), sorted, each once.
    pub socket_inodes: Vec<u64>,
    /// Those of them that are TCP sockets sock_diag can find (connecting,
    /// connected or closing; not listening, not yet connected), sorted,
    /// each once: where the walk tells a socket's kind (the task
    /// iterator's file walk), None where it cannot (/proc/<pid>/fd).
    pub tcp_inodes: Option<Vec<u64>>,
    /// The RDMA verbs devices it has open (`infiniband/uverbs<N>`), sorted,
    /// each once.
    pub uverbs: Vec<u32>,
}

impl FdInventory {
    /// Its sockets and devices sorted, each once (a dup'd fd is one more
    /// fd, not one more socket).
    pub fn deduped(mut self) -> Self {
        self.socket_inodes.sort_unstable();
        self.socket_inodes.dedup();
        if let Some(tcp) = self.tcp_inodes.as_mut() {
            tcp.sort_unstable();
            tcp.dedup();
        }
        self.uverbs.sort_unstable();
        self.uverbs.dedup();
        self
    }
}

/// A process of the node as the neighbours scan needs it: what
/// /proc/<pid>/stat says of its start, CPU time and name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeProcess {
    pub pid: u32,
    /// Start, in clock ticks since boot (stat's starttime).
    pub start_ticks: u64,
    /// CPU time of all its threads, the exited ones included.
    pub cpu_ns: u64,
    /// Its name, raw (sanitised where it is shown).
    pub comm: String,
}

/// Opens a [`TaskCounters`], or says why it cannot.
pub type OpenTaskCounters = fn() -> Result<Box<dyn TaskCounters>, String>;

/// Where the sampler gets per-thread counters.
#[derive(Debug, Clone)]
pub enum TaskSource {
    /// procfs; `Some(why)` says why not the iterator (shown as the
    /// `ebpf.tasks` status), `None` when no iterator was asked for at all
    /// (`--no-ebpf`, a build without the probes).
    Procfs(Option<String>),
    /// Try this first; procfs if it does not open.
    Iterator(OpenTaskCounters),
}

impl Default for TaskSource {
    fn default() -> Self {
        TaskSource::Procfs(None)
    }
}

/// The rows of one tick, by process: the walk's rows in one vector, each
/// process's together, and where each process's are. Grouped in place:
/// a GPU rank has ~150 threads of ~200-byte rows, and a vector a process
/// made each tick (moved into, then dropped) had the allocator hand its
/// pages back and fault them in again every tick.
#[derive(Debug, Default, PartialEq)]
pub struct RowsByTgid {
    rows: Vec<TaskRow>,
    at: HashMap<u32, std::ops::Range<usize>>,
}

impl RowsByTgid {
    /// A process's rows, in the order its walk gave them.
    pub fn get(&self, tgid: &u32) -> Option<&[TaskRow]> {
        self.at.get(tgid).map(|r| &self.rows[r.clone()])
    }
}

/// Groups rows by process (the process reader checks each group's start
/// against the process it reads: see [`TaskRow::start_ticks`]).
pub fn by_tgid(mut rows: Vec<TaskRow>) -> RowsByTgid {
    // The walks of each process come in tgid order. A walk of every task
    // (in tid order, older kernels) may interleave processes: the stable
    // sort puts each process's threads together in their order. Only
    // then: a sort takes scratch room the size of the rows (~240 KB for
    // 1,200 threads), which the allocator would give back every tick.
    if !rows.is_sorted_by_key(|r| r.tgid) {
        rows.sort_by_key(|r| r.tgid);
    }
    let mut at = HashMap::new();
    let mut from = 0;
    for run in rows.chunk_by(|a, b| a.tgid == b.tgid) {
        at.insert(run[0].tgid, from..from + run.len());
        from += run.len();
    }
    RowsByTgid { rows, at }
}

/// The leader's row among a process's rows (the one that speaks for the
/// process: its open fds, placement and allowed CPUs).
pub fn leader(rows: &[TaskRow]) -> Option<&TaskRow> {
    rows.iter().find(|r| r.tid == r.tgid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_letters_are_procs() {
        for (state, exit, want) in [
            (0, 0, 'R'),
            (1, 0, 'S'),
            (2, 0, 'D'),
            (0x0402, 0, 'I'),
            (4, 0, 'T'),
            (8, 0, 't'),
            (0, 0x20, 'Z'),
            (0x40, 0, 'P'),
            (0x1000, 0, 'D'),
        ] {
            assert_eq!(state_letter(state, exit), want, "{state:#x} {exit:#x}");
        }
    }

    fn row(tid: u32, tgid: u32) -> TaskRow {
        TaskRow {
            tid,
            tgid,
            ..Default::default()
        }
    }

    #[test]
    fn rows_group_by_process() {
        let g = by_tgid(vec![row(10, 10), row(11, 10), row(20, 20)]);
        assert_eq!(g.get(&10).unwrap().len(), 2);
        assert_eq!(g.get(&20).unwrap()[0].tid, 20);
        assert!(g.get(&11).is_none());
    }

    #[test]
    fn a_process_met_twice_in_a_walk_of_every_task_is_one_group() {
        // Tid order: process 10's threads on both sides of process 20's.
        let g = by_tgid(vec![row(10, 10), row(15, 20), row(17, 10), row(18, 10)]);
        let tids = |p| g.get(&p).unwrap().iter().map(|r| r.tid).collect::<Vec<_>>();
        assert_eq!(tids(10), [10, 17, 18]);
        assert_eq!(tids(20), [15]);
        assert_eq!(g.at.len(), 2);
    }
}
