//! The watch list: which processes the sampler reads, kept fresh by
//! discovery every few seconds, or every 30 s while a probe hints at every
//! new process (and at once for pids a probe saw exec or fork). A process
//! already watched is not examined again; one found unwatched is
//! remembered until the next full pass, since a process's environment is
//! fixed at exec.

use super::{Hinted, SamplerConfig};
use crate::model::ProcKey;
use crate::model::{Event, EventKind, RankFrame};
use crate::sources::discovery::{discover_skipping, numbers_pids_globally, Role, Watched};
use crate::sources::tasks::{leader, Placement, RowsByTgid};
use crate::sources::Roots;
use std::collections::{HashMap, HashSet};
use std::time::Duration;

/// How often discovery looks again at processes it already found unwatched.
const FULL_DISCOVERY_EVERY: Duration = Duration::from_secs(60);
/// How often every process is listed while the events probe hints at each
/// new one (and dropped none since the last scan): the scan is then only
/// a safety net, and listing /proc costs the kernel a walk of every task.
const HINTED_DISCOVERY_EVERY: Duration = Duration::from_secs(30);

/// How often a watched process's cgroup and network namespace are read
/// again: a rank moved into a limited cgroup is judged on the right
/// cpu.stat within a second (one small read per rank). A rank the task
/// iterator follows (its rows say where it is, [`Placement`]) is read
/// again the tick it moved, and otherwise only every
/// [`FOLLOWED_PLACEMENT_EVERY`].
const PLACEMENT_EVERY: Duration = Duration::from_secs(1);
/// The followed ranks' own re-read: what two moves inside one tick could
/// hide (the second set of cgroups at the first one's freed address).
const FOLLOWED_PLACEMENT_EVERY: Duration = Duration::from_secs(10);

#[derive(Default)]
pub struct WatchList {
    pub watched: Vec<Watched>,
    last_scan_ns: Option<u64>,
    full_scan_ns: Option<u64>,
    /// When the watched processes' cgroup and namespace were last read;
    /// the followed ones'.
    placement_ns: Option<u64>,
    followed_placement_ns: Option<u64>,
    /// Where the task iterator last saw each rank it follows (their
    /// placement is not read on a timer).
    followed: HashMap<ProcKey, Placement>,
    /// Pids found unwatched, not examined again until the next full pass.
    unwatched: HashSet<u32>,
    /// Of those, the ones this user may not examine (other users').
    hidden: HashSet<u32>,
    /// A hint was dropped since the last scan: scan at the usual pace.
    missed_since_scan: bool,
    /// Whether the proc root numbers processes as the probes do (its pid
    /// namespace is the initial one), looked at once.
    global_pids: Option<bool>,
    pub error: Option<String>,
}

impl WatchList {
    /// Runs discovery when it is due (or when `hinted` names new pids) and
    /// adds an event per process that appeared.
    pub fn refresh(
        &mut self,
        cfg: &SamplerConfig,
        hinted: &Hinted,
        (now_ns, wall_ns): (u64, u64),
        events: &mut Vec<Event>,
    ) {
        let (roots, rule) = (&cfg.roots, &cfg.rule);
        self.missed_since_scan |= hinted.missed;
        let global = *self
            .global_pids
            .get_or_insert_with(|| numbers_pids_globally(&roots.proc));
        let every = if hinted.complete && !self.missed_since_scan && global {
            HINTED_DISCOVERY_EVERY.max(cfg.discovery_every)
        } else {
            cfg.discovery_every
        };
        let hinted = &hinted.pids;
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
            let all = self.followed_placement_ns.is_none_or(|t| {
                now_ns.saturating_sub(t) >= FOLLOWED_PLACEMENT_EVERY.as_nanos() as u64
            });
            if all {
                self.followed_placement_ns = Some(now_ns);
            }
            let followed = &self.followed;
            for w in self
                .watched
                .iter_mut()
                .filter(|w| all || !followed.contains_key(&w.key))
            {
                w.refresh_placement(&roots.pid_dir(w.key.pid));
            }
        }
        if !due && hinted_new.is_empty() {
            return;
        }
        if due {
            self.last_scan_ns = Some(now_ns);
            self.missed_since_scan = false;
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
                                RankFrame::name_of(w.labels.rank, w.key.pid),
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

    /// Follows the ranks' placement in this tick's task rows (None: no
    /// rows this tick): a rank whose leader's cgroups or network namespace
    /// changed, or that was not followed, has both read again now; one
    /// without a row goes back to the timer.
    pub fn follow_placement(&mut self, roots: &Roots, rows: Option<&RowsByTgid>) {
        let mut followed = HashMap::new();
        for w in self.watched.iter_mut().filter(|w| w.role == Role::Rank) {
            let seen = rows
                .and_then(|r| r.get(&w.key.pid))
                .and_then(|rows| leader(rows))
                .filter(|r| r.start_ticks == w.key.start_time)
                .and_then(|r| r.process.placement);
            let Some(now) = seen else { continue };
            if self.followed.get(&w.key) != Some(&now) {
                w.refresh_placement(&roots.pid_dir(w.key.pid));
            }
            followed.insert(w.key, now);
        }
        self.followed = followed;
    }

    /// How many processes were unreadable to this user at the last scan.
    pub fn hidden(&self) -> usize {
        self.hidden.len()
    }

    /// The ranks (not their wrappers, launchers or helpers).
    pub fn ranks(&self) -> impl Iterator<Item = &Watched> {
        self.watched.iter().filter(|w| w.role == Role::Rank)
    }

    /// An event for each watched process that is gone (exited, or its pid
    /// reused).
    pub fn exited(gone: &[Watched], wall_ns: u64, events: &mut Vec<Event>) {
        for w in gone {
            events.push(Event::new(
                wall_ns,
                EventKind::RankExited,
                format!(
                    "{} exited (pid {})",
                    RankFrame::name_of(w.labels.rank, w.key.pid),
                    w.key.pid
                ),
            ));
        }
    }

    /// Stops watching the processes that are gone.
    pub fn remove_gone(&mut self, gone: &[Watched]) {
        self.watched
            .retain(|o| !gone.iter().any(|w| w.key == o.key));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Text;
    use crate::sources::tasks::{ProcessPart, TaskRow};

    /// A proc root with one process (`cgroup`, `ns/net`).
    fn root(pid: u32) -> (tempfile::TempDir, Roots) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join(format!("proc/{pid}"));
        std::fs::create_dir_all(p.join("ns")).unwrap();
        std::fs::write(p.join("cgroup"), "0::/job/a\n").unwrap();
        std::os::unix::fs::symlink("net:[4026531840]", p.join("ns/net")).unwrap();
        let roots = Roots {
            proc: d.path().join("proc"),
            host: d.path().to_path_buf(),
            sys: d.path().join("sys"),
        };
        (d, roots)
    }

    fn rows(pid: u32, placement: Option<Placement>) -> RowsByTgid {
        rows_started(pid, placement, 1)
    }

    /// The rows of a process `pid` that started at `start_ticks`.
    fn rows_started(pid: u32, placement: Option<Placement>, start_ticks: u64) -> RowsByTgid {
        let row = |tid| TaskRow {
            tid,
            tgid: pid,
            start_ticks,
            process: ProcessPart {
                placement,
                ..Default::default()
            },
            ..Default::default()
        };
        crate::sources::tasks::by_tgid(vec![row(pid + 1), row(pid)])
    }

    fn list(pid: u32) -> WatchList {
        WatchList {
            watched: vec![Watched {
                key: ProcKey { pid, start_time: 1 },
                comm: Text::new("rank"),
                ppid: 1,
                labels: Default::default(),
                nccl: vec![],
                nic_numa: vec![],
                role: Role::Rank,
                cgroup: "0::/job/a\n".into(),
                netns: Some(4026531840),
            }],
            ..Default::default()
        }
    }

    #[test]
    fn a_followed_rank_is_read_again_only_when_its_rows_say_it_moved() {
        let (d, roots) = root(40);
        let cgroup_file = d.path().join("proc/40/cgroup");
        let cfg = SamplerConfig {
            roots: roots.clone(),
            discovery_every: Duration::from_secs(3600),
            ..Default::default()
        };
        let mut l = list(40);
        let events = &mut Vec::new();
        let mut refresh_at = |l: &mut WatchList, s: u64| {
            l.refresh(&cfg, &Default::default(), (s * 1_000_000_000, 0), events)
        };
        let at = |cgroups| {
            Some(Placement {
                cgroups,
                netns: 4026531840,
            })
        };
        refresh_at(&mut l, 0);
        l.follow_placement(&roots, Some(&rows(40, at(7))));
        assert!(l.followed.contains_key(&l.watched[0].key));
        // The file changes but the rows do not: not read, neither now nor
        // by the 1 s timer (the rank is followed).
        std::fs::write(&cgroup_file, "0::/job/b\n").unwrap();
        l.follow_placement(&roots, Some(&rows(40, at(7))));
        refresh_at(&mut l, 2);
        assert_eq!(l.watched[0].cgroup, "0::/job/a\n", "not read again");
        // The rows say it moved: read the same tick.
        l.follow_placement(&roots, Some(&rows(40, at(8))));
        assert_eq!(l.watched[0].cgroup, "0::/job/b\n", "read when it moved");
        // No rows (the iterator failed this tick): back to the timer.
        l.follow_placement(&roots, None);
        assert!(l.followed.is_empty());
        std::fs::write(&cgroup_file, "0::/job/c\n").unwrap();
        refresh_at(&mut l, 4);
        assert_eq!(l.watched[0].cgroup, "0::/job/c\n", "the timer reads it");
        // Followed again; every 10 s read all the same.
        l.follow_placement(&roots, Some(&rows(40, at(8))));
        std::fs::write(&cgroup_file, "0::/job/d\n").unwrap();
        refresh_at(&mut l, 6);
        assert_eq!(l.watched[0].cgroup, "0::/job/c\n");
        refresh_at(&mut l, 10);
        assert_eq!(l.watched[0].cgroup, "0::/job/d\n", "the 10 s re-read");
    }

    /// A process marked for watching appears in `roots` under `pid`.
    fn appear(roots: &Roots, pid: u32) {
        let p = roots.proc.join(pid.to_string());
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(p.join("environ"), "KITTY_WATCH=1\0RANK=3\0").unwrap();
        std::fs::write(p.join("stat"), std::fs::read("/proc/self/stat").unwrap()).unwrap();
        std::fs::write(p.join("cgroup"), "0::/job/a\n").unwrap();
    }

    #[test]
    fn with_every_new_process_hinted_the_full_scan_waits_longer() {
        // (complete hints, one dropped, the proc root's pids the probes')
        for (complete, missed, global, found_at_6s) in [
            (true, false, true, false),
            (true, true, true, true),
            (true, false, false, true),
            (false, false, true, true),
        ] {
            let (_d, roots) = root(40);
            if global {
                let me = std::process::id().to_string();
                std::os::unix::fs::symlink(me, roots.proc.join("self")).unwrap();
                if !numbers_pids_globally(&roots.proc) {
                    eprintln!(
                        "skipped {global:?}: this test runs outside the initial pid namespace"
                    );
                    continue;
                }
            }
            let cfg = SamplerConfig {
                roots: roots.clone(),
                discovery_every: Duration::from_secs(5),
                ..Default::default()
            };
            let mut l = WatchList::default();
            let events = &mut Vec::new();
            let hinted = |missed| Hinted {
                pids: HashSet::new(),
                complete,
                missed,
            };
            l.refresh(&cfg, &hinted(false), (0, 0), events);
            assert!(l.watched.is_empty());
            // A new process whose hint never came (not in `pids`).
            appear(&roots, 50);
            l.refresh(&cfg, &hinted(missed), (6_000_000_000, 0), events);
            let case = (complete, missed, global);
            assert_eq!(!l.watched.is_empty(), found_at_6s, "{case:?} at 6 s");
            l.refresh(&cfg, &hinted(false), (31_000_000_000, 0), events);
            assert_eq!(l.watched.len(), 1, "{case:?}: the 30 s scan finds it");
        }
    }

    #[test]
    fn a_reused_pid_is_not_followed() {
        let (_d, roots) = root(41);
        let mut l = list(41);
        let p = Some(Placement {
            cgroups: 7,
            netns: 1,
        });
        let other = rows_started(41, p, 2);
        l.follow_placement(&roots, Some(&other));
        assert!(l.followed.is_empty(), "rows of another process");
        l.follow_placement(&roots, Some(&rows(41, p)));
        assert_eq!(l.followed.len(), 1);
    }
}
