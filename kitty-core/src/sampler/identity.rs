//! Which watched processes are ranks, and which launch they belong to.
//!
//! The environment marks more than ranks: a wrapper (`timeout`, a shell),
//! a launcher (torchrun's agent) and a rank's forked helpers (data-loader
//! workers) inherit `KITTY_WATCH` and the labels. Among the watched
//! processes of one job name:
//!
//! 1. a process with a watched descendant that has a rank label is a
//!    launcher (not a rank) when it has no rank label itself, or when it has
//!    the same one and is a known wrapper (`WRAPPERS`);
//! 2. a process whose nearest watched ancestor that is not a launcher has
//!    the same rank label is a helper of that rank (not a rank);
//! 3. the others are ranks.
//!
//! Two launches of one job name are two jobs: the launch is the launcher's
//! run id from the environment (`Labels::job_id`), else the rank's launcher
//! process: its nearest ancestor that is not a wrapper (torchrun's agent,
//! mpirun's daemon, slurmstepd, kitty's demo).

use crate::model::Text;
use crate::sources::discovery::{Role, Watched};
use crate::sources::process::read_identity;
use crate::sources::Roots;
use std::collections::HashMap;

/// Programs that run a rank without being one (their comm).
pub const WRAPPERS: &[&str] = &[
    "timeout",
    "bash",
    "sh",
    "dash",
    "zsh",
    "ksh",
    "env",
    "nohup",
    "stdbuf",
    "numactl",
    "taskset",
    "chrt",
    "nice",
    "ionice",
    "time",
    "setsid",
    "sudo",
    "su",
    "runuser",
    "tini",
    "dumb-init",
    "gosu",
    "su-exec",
    "script",
    "flock",
];

fn is_wrapper(comm: &str) -> bool {
    WRAPPERS.contains(&comm)
}

/// Sets each watched process's role, and the launch of ranks without one.
pub fn assign(watched: &mut [Watched], roots: &Roots) {
    let by_pid: HashMap<u32, usize> = watched
        .iter()
        .enumerate()
        .map(|(i, w)| (w.key.pid, i))
        .collect();
    // The watched parent of each process, within its job name.
    let parent: Vec<Option<usize>> = watched
        .iter()
        .map(|w| {
            by_pid
                .get(&w.ppid)
                .copied()
                .filter(|&p| watched[p].labels.job == w.labels.job)
        })
        .collect();
    let ancestors = |i: usize| {
        let mut out = Vec::new();
        let mut at = parent[i];
        while let Some(p) = at {
            if out.contains(&p) || out.len() > 64 {
                break;
            }
            out.push(p);
            at = parent[p];
        }
        out
    };
    let mut role = vec![Role::Rank; watched.len()];
    for (i, w) in watched.iter().enumerate() {
        for a in ancestors(i) {
            let anc = &watched[a];
            if w.labels.rank.is_some()
                && (anc.labels.rank.is_none()
                    || (anc.labels.rank == w.labels.rank && is_wrapper(&anc.comm)))
            {
                role[a] = Role::Launcher;
            }
        }
    }
    for i in 0..watched.len() {
        if role[i] != Role::Rank {
            continue;
        }
        let nearest = ancestors(i)
            .into_iter()
            .find(|a| role[*a] != Role::Launcher);
        if nearest.is_some_and(|a| watched[a].labels.rank == watched[i].labels.rank) {
            role[i] = Role::Helper;
        }
    }
    let mut names = HashMap::new();
    for i in 0..watched.len() {
        watched[i].role = role[i];
        if role[i] == Role::Rank && watched[i].labels.job_id.is_none() {
            let launcher = launcher_of(watched, &by_pid, i, roots, &mut names);
            watched[i].labels.job_id = Some(Text::new(&format!("launcher:{launcher}")));
        }
    }
}

/// The nearest ancestor of `i` that is not a wrapper.
fn launcher_of(
    watched: &[Watched],
    by_pid: &HashMap<u32, usize>,
    i: usize,
    roots: &Roots,
    names: &mut HashMap<u32, Option<(String, u32)>>,
) -> u32 {
    let mut pid = watched[i].ppid;
    for _ in 0..16 {
        if pid <= 1 {
            return pid;
        }
        let (comm, ppid) = match by_pid.get(&pid) {
            Some(&j) => (watched[j].comm.to_string(), watched[j].ppid),
            None => {
                let id = names.entry(pid).or_insert_with(|| {
                    read_identity(&roots.pid_dir(pid)).map(|x| (x.comm, x.ppid))
                });
                match id {
                    Some((comm, ppid)) => (comm.clone(), *ppid),
                    None => return pid,
                }
            }
        };
        if !is_wrapper(&comm) {
            return pid;
        }
        pid = ppid;
    }
    pid
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Labels, ProcKey};

    fn w(pid: u32, ppid: u32, comm: &str, rank: Option<u32>) -> Watched {
        Watched {
            key: ProcKey { pid, start_time: 1 },
            comm: Text::new(comm),
            ppid,
            labels: Labels {
                rank,
                job: Some(Text::new("j")),
                ..Default::default()
            },
            nccl: vec![],
            nic_numa: vec![],
            role: Role::Rank,
            cgroup: String::new(),
            netns: None,
        }
    }

    #[test]
    fn wrappers_launchers_and_helpers_are_not_ranks() {
        // torchrun agent (no rank) -> timeout (rank 0) -> python (rank 0) -> worker (rank 0)
        let mut ps = vec![
            w(10, 1, "torchrun", None),
            w(11, 10, "timeout", Some(0)),
            w(12, 11, "python3", Some(0)),
            w(13, 12, "pt_data_worker", Some(0)),
            w(14, 10, "python3", Some(1)),
        ];
        assign(&mut ps, &Roots::default());
        let roles: Vec<Role> = ps.iter().map(|p| p.role).collect();
        assert_eq!(
            roles,
            vec![
                Role::Launcher,
                Role::Launcher,
                Role::Rank,
                Role::Helper,
                Role::Rank
            ]
        );
        assert_eq!(ps[2].labels.job_id.as_deref(), Some("launcher:10"));
        assert_eq!(ps[4].labels.job_id, ps[2].labels.job_id, "one launch");
    }

    #[test]
    fn a_rank_that_is_a_shell_with_no_watched_child_stays_a_rank() {
        let mut ps = vec![w(20, 1, "bash", Some(3)), w(21, 1, "python3", Some(4))];
        assign(&mut ps, &Roots::default());
        assert!(ps.iter().all(|p| p.role == Role::Rank));
    }
}
