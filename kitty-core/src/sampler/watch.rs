//! The watch list: which processes the sampler reads, kept fresh by
//! discovery every few seconds (and at once for pids a probe saw exec or
//! fork). A process already watched is not examined again; one found
//! unwatched is remembered until the next full pass, since a process's
//! environment is fixed at exec.

use super::SamplerConfig;
use crate::model::{Event, EventKind, Labels};
use crate::sources::discovery::{discover_skipping, Role, Watched};
use std::collections::HashSet;
use std::time::Duration;

/// How often discovery looks again at processes it already found unwatched.
const FULL_DISCOVERY_EVERY: Duration = Duration::from_secs(60);
/// How often a watched process's cgroup and network namespace are read
/// again: a rank moved into a limited cgroup is judged on the right
/// cpu.stat within a second (one small read per rank).
const PLACEMENT_EVERY: Duration = Duration::from_secs(1);

#[derive(Default)]
pub struct WatchList {
    pub watched: Vec<Watched>,
    last_scan_ns: Option<u64>,
    full_scan_ns: Option<u64>,
    /// When the watched processes' cgroup and namespace were last read.
    placement_ns: Option<u64>,
    /// Pids found unwatched, not examined again until the next full pass.
    unwatched: HashSet<u32>,
    /// Of those, the ones this user may not examine (other users').
    hidden: HashSet<u32>,
    pub error: Option<String>,
}

/// `rank 3`, or `pid 42` without a rank label.
pub fn label_of(l: &Labels, pid: u32) -> String {
    match l.rank {
        Some(r) => format!("rank {r}"),
        None => format!("pid {pid}"),
    }
}

impl WatchList {
    /// Runs discovery when it is due (or when `hinted` names new pids) and
    /// adds an event per process that appeared.
    pub fn refresh(
        &mut self,
        cfg: &SamplerConfig,
        hinted: &HashSet<u32>,
        (now_ns, wall_ns): (u64, u64),
        events: &mut Vec<Event>,
    ) {
        let (roots, rule) = (&cfg.roots, &cfg.rule);
        let every = cfg.discovery_every;
        let due = self
            .last_scan_ns
            .is_none_or(|t| now_ns.saturating_sub(t) >= every.as_nanos() as u64);
        let hinted_new: Vec<u32> = hinted
            .iter()
            .filter(|p| !self.watched.iter().any(|w| w.key.pid == **p))
            .copied()
            .collect();
        if self
            .placement_ns
            .is_none_or(|t| now_ns.saturating_sub(t) >= PLACEMENT_EVERY.as_nanos() as u64)
        {
            self.placement_ns = Some(now_ns);
            for w in &mut self.watched {
                w.refresh_placement(&roots.pid_dir(w.key.pid));
            }
        }
        if !due && hinted_new.is_empty() {
            return;
        }
        if due {
            self.last_scan_ns = Some(now_ns);
        }
        // Once a minute every process is examined again (pids are reused).
        if self
            .full_scan_ns
            .is_none_or(|t| now_ns.saturating_sub(t) >= FULL_DISCOVERY_EVERY.as_nanos() as u64)
        {
            self.unwatched.clear();
            self.hidden.clear();
            self.full_scan_ns = Some(now_ns);
        }
        // Hinted pids are looked at even if they were seen unwatched before
        // (an exec changes the environment under the same pid).
        for p in &hinted_new {
            self.unwatched.remove(p);
        }
        // Watched processes keep their labels for life (environ is not read
        // again); their cgroup and namespace are read again above.
        let mut skip = self.unwatched.clone();
        skip.extend(self.watched.iter().map(|w| w.key.pid));
        let only = (!due).then_some(&hinted_new[..]);
        match discover_skipping(roots, rule, &skip, only) {
            Ok(f) => {
                self.unwatched.extend(f.unwatched);
                self.hidden.extend(f.hidden);
                self.error = None;
                let new: Vec<u32> = f.watched.iter().map(|w| w.key.pid).collect();
                self.watched.extend(f.watched);
                super::identity::assign(&mut self.watched, roots);
                self.watched
                    .sort_by_key(|w| (w.labels.job.clone(), w.labels.rank, w.key.pid));
                for w in self.watched.iter().filter(|w| new.contains(&w.key.pid)) {
                    if w.role == Role::Rank {
                        events.push(Event::new(
                            wall_ns,
                            EventKind::RankAppeared,
                            format!(
                                "{} appeared (pid {}, {})",
                                label_of(&w.labels, w.key.pid),
                                w.key.pid,
                                w.comm
                            ),
                        ));
                    }
                }
            }
            Err(e) => self.error = Some(format!("cannot list {}: {e}", roots.proc.display())),
        }
    }

    /// How many processes were unreadable to this user at the last scan.
    pub fn hidden(&self) -> usize {
        self.hidden.len()
    }

    /// The ranks (not their wrappers, launchers or helpers).
    pub fn ranks(&self) -> impl Iterator<Item = &Watched> {
        self.watched.iter().filter(|w| w.role == Role::Rank)
    }

    /// Drops processes that exited, with an event each.
    pub fn remove_gone(&mut self, gone: &[Watched], wall_ns: u64, events: &mut Vec<Event>) {
        for w in gone {
            self.watched.retain(|o| o.key != w.key);
            events.push(Event::new(
                wall_ns,
                EventKind::RankExited,
                format!(
                    "{} exited (pid {})",
                    label_of(&w.labels, w.key.pid),
                    w.key.pid
                ),
            ));
        }
    }
}
