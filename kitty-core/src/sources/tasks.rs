//! Per-thread scheduler counters from somewhere cheaper than procfs (the
//! probes' BPF task iterator: one read per tick for every watched thread),
//! and how the sampler chooses: the iterator when it opens, procfs
//! (`task/*/schedstat`, `task/*/sched`) otherwise, said in the source status
//! `ebpf.tasks`. Both give the same counters with the same meaning.

use std::collections::{BTreeSet, HashMap};

/// One thread's counters, as /proc/<tid>/schedstat and /proc/<tid>/sched
/// print them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TaskRow {
    pub tid: u32,
    pub tgid: u32,
    pub comm: String,
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
}

/// Something that reads every watched thread's counters at once.
pub trait TaskCounters: Send {
    /// How it reads them, for the source status (`iter/task`).
    fn strategy(&self) -> &'static str;
    /// The rows of every thread of these processes. An error makes this
    /// tick read procfs instead.
    fn read(&mut self, tgids: &BTreeSet<u32>) -> Result<Vec<TaskRow>, String>;
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

/// The rows of one tick, by process.
pub type RowsByTgid = HashMap<u32, Vec<TaskRow>>;

/// Groups rows by process (the process reader checks each group's start
/// against the process it reads: see [`TaskRow::start_ticks`]).
pub fn by_tgid(rows: Vec<TaskRow>) -> RowsByTgid {
    let mut out: RowsByTgid = HashMap::new();
    for r in rows {
        out.entry(r.tgid).or_default().push(r);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_group_by_process() {
        let row = |tid, tgid| TaskRow {
            tid,
            tgid,
            ..Default::default()
        };
        let g = by_tgid(vec![row(10, 10), row(11, 10), row(20, 20)]);
        assert_eq!(g[&10].len(), 2);
        assert_eq!(g[&20][0].tid, 20);
        assert!(!g.contains_key(&11));
    }
}
