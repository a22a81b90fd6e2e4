//! Discovery: which processes to watch. Processes with the watch variable in
//! their environment (default `KITTY_WATCH=1`) plus explicit `--pid`s; never
//! kitty itself. Refreshed every few seconds by the sampler.

use super::labels::{filter_environ, labels_from};
use super::process::read_identity;
use super::Roots;
use crate::model::{Labels, ProcKey, Text};
use std::collections::HashSet;

#[derive(Debug, Clone)]
pub struct WatchRule {
    pub key: String,
    pub value: String,
    pub pids: Vec<u32>,
}

impl Default for WatchRule {
    fn default() -> Self {
        WatchRule {
            key: "KITTY_WATCH".into(),
            value: "1".into(),
            pids: Vec::new(),
        }
    }
}

impl WatchRule {
    /// Parses `KEY=VALUE` (as given to `--watch-env`).
    pub fn parse_env(spec: &str) -> Result<(String, String), String> {
        match spec.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
            _ => Err(format!("--watch-env expects KEY=VALUE, got {spec:?}")),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Watched {
    pub key: ProcKey,
    pub comm: Text,
    pub ppid: u32,
    pub labels: Labels,
    /// The communication settings of its environment (allow-listed keys).
    pub nccl: Vec<(String, String)>,
    /// The NICs those settings name, with their NUMA nodes (read once).
    pub nic_numa: Vec<(Text, u32)>,
    /// Whether it is a rank, or a wrapper, launcher or helper of one.
    pub role: Role,
    /// /proc/<pid>/cgroup and the network namespace, refreshed with each
    /// discovery rather than read every tick.
    pub cgroup: String,
    pub netns: Option<u64>,
}

impl Watched {
    /// Re-reads the cgroup and network namespace (they can change; the
    /// labels from the environment cannot).
    pub fn refresh_placement(&mut self, dir: &std::path::Path) {
        if let Ok(cg) = super::read_small(&dir.join("cgroup")) {
            self.cgroup = cg;
        }
        if let Some(ns) = super::process::read_netns(dir) {
            self.netns = Some(ns);
        }
    }
}

/// What a watched process is to its job (see `sampler::identity`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Role {
    #[default]
    Rank,
    /// A wrapper (`timeout`, a shell) or launcher of a rank: not a rank.
    Launcher,
    /// Forked by a rank (a data-loader worker): not a rank.
    Helper,
}

/// Seconds a process must have run before "not watched" is remembered.
const SETTLED_S: f64 = 5.0;

/// Whether the process started more than SETTLED_S ago.
fn settled(dir: &std::path::Path, uptime: Option<f64>) -> bool {
    let hz = super::clock_ticks() as f64;
    match (read_identity(dir), uptime) {
        (Some(id), Some(up)) => up - id.start_time as f64 / hz > SETTLED_S,
        _ => false,
    }
}

/// The initial pid namespace's inode (`PROC_PID_INIT_INO`, fixed by the
/// kernel): the probes' pids are numbered in it.
const INIT_PID_NS: &str = "pid:[4026531836]";

/// Whether `proc` numbers processes as the probes do: kitty is in the
/// initial pid namespace and `proc` numbers kitty as kitty numbers itself
/// (its `self` link; a procfs of another pid namespace does not show kitty
/// or numbers it otherwise). Else hints may name other processes than
/// they mean, and discovery keeps its own pace.
pub fn numbers_pids_globally(proc: &std::path::Path) -> bool {
    let own = std::fs::read_link("/proc/self/ns/pid").is_ok_and(|l| l.as_os_str() == INIT_PID_NS);
    let me = std::process::id().to_string();
    own && std::fs::read_link(proc.join("self")).is_ok_and(|l| l.as_os_str() == me.as_str())
}

/// What one discovery pass found.
#[derive(Debug, Default)]
pub struct Found {
    pub watched: Vec<Watched>,
    /// Pids examined and found unwatched.
    pub unwatched: Vec<u32>,
    /// Of those, the ones whose environment this user may not read (other
    /// users' processes, without root): they could be ranks kitty cannot see.
    pub hidden: Vec<u32>,
}

/// Lists the watched processes under the proc root.
pub fn discover(roots: &Roots, rule: &WatchRule) -> std::io::Result<Vec<Watched>> {
    discover_skipping(roots, rule, &HashSet::new(), None).map(|f| f.watched)
}

/// Like [`discover`], but does not look again at `skip` (pids already found
/// unwatched, or already watched: a process's environment is fixed at exec),
/// and with `only`, looks at those pids alone.
pub fn discover_skipping(
    roots: &Roots,
    rule: &WatchRule,
    skip: &HashSet<u32>,
    only: Option<&[u32]>,
) -> std::io::Result<Found> {
    let me = std::process::id();
    let mut out = Vec::new();
    let mut unwatched = Vec::new();
    let mut hidden = Vec::new();
    let uptime = super::read_small(&roots.proc.join("uptime"))
        .ok()
        .and_then(|u| u.split_whitespace().next()?.parse::<f64>().ok());
    let pids: Vec<u32> = match only {
        Some(list) => list.to_vec(),
        None => std::fs::read_dir(&roots.proc)?
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .collect(),
    };
    for pid in pids {
        if pid == me || skip.contains(&pid) {
            continue;
        }
        let dir = roots.pid_dir(pid);
        let explicit = rule.pids.contains(&pid);
        // environ is unreadable for other users' processes without privilege,
        // and vanishes when the process exits: both mean "not watched".
        let env = match read_environ(&dir) {
            Ok(blob) => filter_environ(&blob, &rule.key),
            Err(_) if explicit => Vec::new(),
            Err(e) => {
                // Another user's process (not a kernel thread or a zombie,
                // whose command lines are empty). A process of our own user
                // that refuses us (non-dumpable, an init of the sandbox) is
                // not "another user's".
                let user_process =
                    || std::fs::read(dir.join("cmdline")).is_ok_and(|c| !c.is_empty());
                if e.kind() == std::io::ErrorKind::PermissionDenied
                    && other_owner(&dir)
                    && user_process()
                {
                    hidden.push(pid);
                }
                unwatched.push(pid);
                continue;
            }
        };
        let marked = env.iter().any(|(k, v)| *k == rule.key && *v == rule.value);
        if !marked && !explicit {
            // A process caught between fork and exec still shows its parent's
            // environment: only settled (older) processes are remembered.
            if settled(&dir, uptime) {
                unwatched.push(pid);
            }
            continue;
        }
        let Some(id) = read_identity(&dir) else {
            continue;
        };
        let cgroup = super::read_small(&dir.join("cgroup")).unwrap_or_default();
        let labels = labels_from(&env, &cgroup);
        let netns = super::process::read_netns(&dir);
        let nccl: Vec<(String, String)> = env
            .iter()
            .filter(|(k, _)| super::nccl_env::KEYS.contains(&k.as_str()))
            .cloned()
            .collect();
        let nic_numa = super::numa::nic_nodes(&roots.sys, &nccl);
        out.push(Watched {
            key: ProcKey {
                pid,
                start_time: id.start_time,
            },
            comm: Text::new(&id.comm),
            ppid: id.ppid,
            nccl,
            nic_numa,
            role: Role::Rank,
            labels,
            cgroup,
            netns,
        });
    }
    out.sort_by_key(|w| (w.labels.job.clone(), w.labels.rank, w.key.pid));
    Ok(Found {
        watched: out,
        unwatched,
        hidden,
    })
}

/// Is the process owned by a user other than ours?
fn other_owner(dir: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    std::fs::metadata(dir).is_ok_and(|m| m.uid() != me)
}

/// The environment, at most 1 MiB of it (the listed keys come first in
/// practice; a process cannot make kitty read gigabytes).
fn read_environ(dir: &std::path::Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut out = Vec::new();
    std::fs::File::open(dir.join("environ"))?
        .take(1 << 20)
        .read_to_end(&mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_marked_child_and_not_an_unmarked_one() {
        let mut marked = std::process::Command::new("sleep")
            .arg("30")
            .env("KITTY_WATCH", "1")
            .env("RANK", "5")
            .env("SECRET_TOKEN", "x")
            .spawn()
            .unwrap();
        let mut plain = std::process::Command::new("sleep")
            .arg("30")
            .env_remove("KITTY_WATCH")
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(200));
        let found = discover(&Roots::default(), &WatchRule::default()).unwrap();
        let _ = (marked.kill(), plain.kill(), marked.wait(), plain.wait());
        let me = found
            .iter()
            .find(|w| w.key.pid == marked.id())
            .expect("marked child found");
        assert_eq!(me.labels.rank, Some(5));
        assert!(!found.iter().any(|w| w.key.pid == plain.id()));
        assert!(!found.iter().any(|w| w.key.pid == std::process::id()));
    }

    #[test]
    fn explicit_pid_is_watched_without_marker() {
        let mut plain = std::process::Command::new("sleep")
            .arg("30")
            .env_remove("KITTY_WATCH")
            .spawn()
            .unwrap();
        let rule = WatchRule {
            pids: vec![plain.id()],
            ..Default::default()
        };
        let found = discover(&Roots::default(), &rule).unwrap();
        let _ = (plain.kill(), plain.wait());
        assert!(found.iter().any(|w| w.key.pid == plain.id()));
    }

    #[test]
    fn skipped_pids_are_not_examined_again() {
        let mut marked = std::process::Command::new("sleep")
            .arg("30")
            .env("KITTY_WATCH", "1")
            .spawn()
            .unwrap();
        let mut plain = std::process::Command::new("sleep")
            .arg("30")
            .env_remove("KITTY_WATCH")
            .spawn()
            .unwrap();
        // Let both finish exec: before it, /proc shows the parent's environment.
        std::thread::sleep(std::time::Duration::from_millis(200));
        let f = discover_skipping(
            &Roots::default(),
            &WatchRule::default(),
            &HashSet::new(),
            None,
        )
        .unwrap();
        let (found, unwatched) = (f.watched, f.unwatched);
        assert!(
            !unwatched.contains(&plain.id()),
            "a young process is not remembered"
        );
        let up = std::fs::read_to_string("/proc/uptime").unwrap();
        let up: f64 = up.split_whitespace().next().unwrap().parse().unwrap();
        assert!(
            settled(std::path::Path::new("/proc/1"), Some(up)),
            "init is settled"
        );
        assert!(
            !unwatched.contains(&marked.id()),
            "marked child is not unwatched"
        );
        assert!(found.iter().any(|w| w.key.pid == marked.id()));
        let skip: HashSet<u32> = [marked.id()].into();
        let found = discover_skipping(&Roots::default(), &WatchRule::default(), &skip, None)
            .unwrap()
            .watched;
        let only = discover_skipping(
            &Roots::default(),
            &WatchRule::default(),
            &HashSet::new(),
            Some(&[marked.id()]),
        )
        .unwrap()
        .watched;
        assert_eq!(only.len(), 1, "`only` looks at the listed pids alone");
        let _ = (marked.kill(), plain.kill(), marked.wait(), plain.wait());
        assert!(
            !found.iter().any(|w| w.key.pid == marked.id()),
            "a skipped pid is not read"
        );
    }

    #[test]
    fn unreadable_root_is_an_error() {
        assert!(discover(&Roots::new("/nonexistent/proc"), &WatchRule::default()).is_err());
    }

    #[test]
    fn watch_env_spec() {
        assert_eq!(
            WatchRule::parse_env("A=b").unwrap(),
            ("A".into(), "b".into())
        );
        assert!(WatchRule::parse_env("=b").is_err());
        assert!(WatchRule::parse_env("nope").is_err());
    }
}
