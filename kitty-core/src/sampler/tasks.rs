//! The per-thread counters' path: the task iterator's rows when it opened
//! (one read for every watched thread), else the procfs task files, and the
//! `ebpf.tasks` status that says which and why.

use super::procs::Sample;
use crate::model::SourceStatus;
use crate::sources::tasks::{
    by_tgid, FdInventory, NodeProcess, RowsByTgid, TaskCounters, TaskSource, TcpSockets,
};
use std::collections::BTreeSet;

pub(super) enum Tasks {
    /// The iterator and how it reads (asked once: it is fixed once open,
    /// and a tick's status need not format it again).
    Iterator(Box<dyn TaskCounters>, String),
    /// procfs, and why (None: nothing to report).
    Procfs(Option<String>),
}

impl Tasks {
    /// Opens the configured source; an iterator that does not open leaves
    /// procfs, with the reason.
    pub fn open(src: &TaskSource) -> Tasks {
        match src {
            TaskSource::Procfs(why) => Tasks::Procfs(why.clone()),
            TaskSource::Iterator(open) => match open() {
                Ok(t) => {
                    let strategy = t.strategy();
                    Tasks::Iterator(t, strategy)
                }
                Err(e) => Tasks::Procfs(Some(format!("iter/task did not load: {e}"))),
            },
        }
    }

    /// This tick's rows for the watched processes: None on the procfs
    /// path, an error when the iterator's read failed (procfs this tick).
    pub fn read(&mut self, tgids: &BTreeSet<u32>) -> Result<Option<RowsByTgid>, String> {
        match self {
            Tasks::Procfs(_) => Ok(None),
            Tasks::Iterator(..) if tgids.is_empty() => Ok(Some(Default::default())),
            Tasks::Iterator(it, _) => it.read(tgids).map(|rows| Some(by_tgid(rows))),
        }
    }

    /// Every process of the node from the iterator, when it has that walk.
    pub fn node_processes(&mut self) -> Option<Vec<NodeProcess>> {
        match self {
            Tasks::Iterator(it, _) => it.node_processes(),
            Tasks::Procfs(_) => None,
        }
    }

    /// The TCP sockets the open-files walks found, from one run over them
    /// (else sock_diag answers for them).
    pub fn tcp_sockets(&mut self) -> Option<TcpSockets> {
        match self {
            Tasks::Iterator(it, _) => it.tcp_sockets()?.ok(),
            Tasks::Procfs(_) => None,
        }
    }

    /// A watched process's open files from the iterator's walk of them,
    /// when it has one and it worked (else the fd scan reads procfs).
    pub fn open_files(&mut self, pid: u32) -> Option<FdInventory> {
        match self {
            Tasks::Iterator(it, _) => it.open_files(pid)?.ok(),
            Tasks::Procfs(_) => None,
        }
    }

    /// The `ebpf.tasks` status after a tick whose read failed with
    /// `failed` (None: not reported).
    pub fn status(&self, failed: Option<&String>, samples: &[Sample]) -> Option<SourceStatus> {
        let strategy = match self {
            Tasks::Procfs(None) => return None,
            Tasks::Procfs(Some(why)) => {
                return Some(SourceStatus::unavailable(format!(
                    "{why}; per-thread counters from procfs"
                )))
            }
            Tasks::Iterator(_, strategy) => strategy,
        };
        Some(match failed {
            Some(e) => SourceStatus::degraded(format!(
                "{strategy} read failed ({e}); per-thread counters from procfs this tick"
            )),
            None => {
                let fell_back = samples.iter().filter(|(_, s)| !s.threads_from_rows).count();
                if fell_back == 0 {
                    SourceStatus::ok().with_strategy(strategy)
                } else {
                    SourceStatus::degraded(format!(
                        "{fell_back} of {} processes not seen by {strategy} (a proc root of another pid namespace?): their threads from procfs",
                        samples.len()
                    ))
                    .with_strategy(strategy)
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Status;
    use crate::sources::tasks::TaskRow;

    /// An iterator that opened but whose reads fail (a kernel that stops
    /// running it): kitty's fallback is what is tested.
    struct Failing;
    impl TaskCounters for Failing {
        fn strategy(&self) -> String {
            "iter/task".into()
        }
        fn read(&mut self, _: &BTreeSet<u32>) -> Result<Vec<TaskRow>, String> {
            Err("EINTR".into())
        }
    }

    #[test]
    fn an_iterator_that_does_not_open_leaves_procfs_with_the_reason() {
        let mut t = Tasks::open(&TaskSource::Iterator(|| Err("permission denied".into())));
        let rows = t.read(&[1].into_iter().collect());
        assert_eq!(rows, Ok(None), "procfs reads this tick");
        let st = t.status(None, &[]).unwrap();
        assert_eq!(st.status, Status::Unavailable);
        assert_eq!(
            st.reason.as_deref(),
            Some("iter/task did not load: permission denied; per-thread counters from procfs")
        );
        assert!(Tasks::open(&TaskSource::Procfs(None))
            .status(None, &[])
            .is_none());
    }

    #[test]
    fn a_failed_read_is_procfs_for_that_tick() {
        let mut t = Tasks::open(&TaskSource::Iterator(|| Ok(Box::new(Failing))));
        let rows = t.read(&[1].into_iter().collect());
        let st = t.status(rows.as_ref().err(), &[]).unwrap();
        assert_eq!(st.status, Status::Degraded);
        assert!(st.reason.as_deref().unwrap().contains("EINTR"));
        // Nothing watched: no walk at all.
        let rows = t.read(&BTreeSet::new());
        assert_eq!(rows, Ok(Some(RowsByTgid::default())), "no rows");
    }
}
