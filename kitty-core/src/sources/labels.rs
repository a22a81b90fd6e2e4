//! Labels of a watched process: rank / job from a few environment keys, pod
//! and container from /proc/<pid>/cgroup. Only the listed keys are ever kept:
//! the environment holds secrets.

use crate::model::{Labels, Text};

pub const RANK_KEYS: &[&str] = &["RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"];
pub const LOCAL_RANK_KEYS: &[&str] = &["LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK"];
pub const WORLD_SIZE_KEYS: &[&str] = &[
    "WORLD_SIZE",
    "SLURM_NTASKS",
    "OMPI_COMM_WORLD_SIZE",
    "PMI_SIZE",
];
pub const JOB_KEYS: &[&str] = &["JOB_NAME", "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID"];

/// What identifies one launch of a job, strongest first.
pub const JOB_ID_KEYS: &[&str] = &[
    "TORCHELASTIC_RUN_ID",
    "SLURM_JOB_ID",
    "SLURM_STEP_ID",
    "PMIX_NAMESPACE",
    "OMPI_MCA_ess_base_jobid",
    "MASTER_ADDR",
    "MASTER_PORT",
];

/// The environment keys kitty may read; everything else is dropped unread.
pub fn wanted_key(key: &str, watch_key: &str) -> bool {
    key == watch_key
        || RANK_KEYS.contains(&key)
        || LOCAL_RANK_KEYS.contains(&key)
        || WORLD_SIZE_KEYS.contains(&key)
        || JOB_KEYS.contains(&key)
        || JOB_ID_KEYS.contains(&key)
        || crate::sources::nccl_env::KEYS.contains(&key)
}

/// The launch's identity from the environment, when a launcher put one there.
fn job_id(env: &[(String, String)]) -> Option<String> {
    let get = |k: &str| first(env, &[k]).filter(|v| !v.trim().is_empty());
    if let Some(id) = get("TORCHELASTIC_RUN_ID") {
        return Some(format!("torchelastic:{id}"));
    }
    if let Some(job) = get("SLURM_JOB_ID") {
        return Some(match get("SLURM_STEP_ID") {
            Some(step) => format!("slurm:{job}.{step}"),
            None => format!("slurm:{job}"),
        });
    }
    if let Some(ns) = get("PMIX_NAMESPACE") {
        return Some(format!("pmix:{ns}"));
    }
    if let Some(id) = get("OMPI_MCA_ess_base_jobid") {
        return Some(format!("ompi:{id}"));
    }
    match (get("MASTER_ADDR"), get("MASTER_PORT")) {
        (Some(a), Some(p)) => Some(format!("master:{a}:{p}")),
        _ => None,
    }
}

/// Parses a NUL-separated environ blob, keeping only wanted keys.
pub fn filter_environ(blob: &[u8], watch_key: &str) -> Vec<(String, String)> {
    blob.split(|b| *b == 0)
        .filter_map(|kv| {
            let eq = kv.iter().position(|b| *b == b'=')?;
            let key = std::str::from_utf8(&kv[..eq]).ok()?;
            if !wanted_key(key, watch_key) {
                return None;
            }
            let value = std::str::from_utf8(&kv[eq + 1..]).ok()?;
            Some((key.to_string(), value.to_string()))
        })
        .collect()
}

fn first<'a>(env: &'a [(String, String)], keys: &[&str]) -> Option<&'a str> {
    keys.iter()
        .find_map(|k| env.iter().find(|(ek, _)| ek == k).map(|(_, v)| v.as_str()))
}

/// Labels from the kept environment keys and the cgroup file's text.
pub fn labels_from(env: &[(String, String)], cgroup: &str) -> Labels {
    let mut labels = Labels {
        rank: first(env, RANK_KEYS).and_then(|v| v.trim().parse().ok()),
        local_rank: first(env, LOCAL_RANK_KEYS).and_then(|v| v.trim().parse().ok()),
        world_size: first(env, WORLD_SIZE_KEYS).and_then(|v| v.trim().parse().ok()),
        job: first(env, JOB_KEYS).map(Text::new),
        job_id: job_id(env).as_deref().map(Text::new),
        slurm_job_id: first(env, &["SLURM_JOB_ID"]).map(Text::new),
        ..Default::default()
    };
    let c = container_from_cgroup(cgroup);
    labels.pod_uid = c.pod_uid.as_deref().map(Text::new);
    labels.container_id = c.container_id.as_deref().map(Text::new);
    labels.runtime = c.runtime.as_deref().map(Text::new);
    labels
}

#[derive(Debug, Default, PartialEq)]
pub struct ContainerInfo {
    pub pod_uid: Option<String>,
    pub container_id: Option<String>,
    pub runtime: Option<String>,
}

/// Pod uid, container id and runtime from cgroup paths (v1 or v2; cgroupfs
/// or systemd drivers; kubepods, docker, containerd, cri-o).
pub fn container_from_cgroup(cgroup: &str) -> ContainerInfo {
    let mut info = ContainerInfo::default();
    for line in cgroup.lines() {
        let Some(path) = line.splitn(3, ':').nth(2) else {
            continue;
        };
        for seg in path.split('/') {
            let seg = seg.trim_end_matches(".slice").trim_end_matches(".scope");
            if info.pod_uid.is_none() {
                if let Some(pos) = seg.rfind("pod") {
                    let uid = &seg[pos + 3..];
                    let uid = uid.replace('_', "-");
                    if is_uid(&uid) {
                        info.pod_uid = Some(uid);
                    }
                }
            }
            if info.container_id.is_none() {
                let (runtime, id) = if let Some(id) = seg.strip_prefix("docker-") {
                    (Some("docker"), id)
                } else if let Some(id) = seg.strip_prefix("cri-containerd-") {
                    (Some("containerd"), id)
                } else if let Some(id) = seg.strip_prefix("crio-") {
                    (Some("cri-o"), id)
                } else {
                    (None, seg)
                };
                if is_container_id(id) {
                    info.container_id = Some(id.to_string());
                    info.runtime = runtime
                        .map(str::to_string)
                        .or_else(|| path.contains("/docker/").then(|| "docker".to_string()));
                }
            }
        }
    }
    info
}

fn is_uid(s: &str) -> bool {
    s.len() == 36 && s.chars().all(|c| c.is_ascii_hexdigit() || c == '-')
}

fn is_container_id(s: &str) -> bool {
    s.len() == 64 && s.chars().all(|c| c.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    const CID: &str = "3f1e0a9c2b7d4e6f8a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f";

    #[test]
    fn environ_keeps_only_wanted_keys() {
        let blob = b"PATH=/bin\0AWS_SECRET_ACCESS_KEY=hunter2\0KITTY_WATCH=1\0RANK=3\0JOB_NAME=gpt\0LOCAL_RANK=1\0";
        let env = filter_environ(blob, "KITTY_WATCH");
        assert_eq!(env.len(), 4);
        assert!(env
            .iter()
            .all(|(k, _)| k != "AWS_SECRET_ACCESS_KEY" && k != "PATH"));
        let l = labels_from(&env, "");
        assert_eq!(
            (l.rank, l.local_rank, l.job.as_deref()),
            (Some(3), Some(1), Some("gpt"))
        );
    }

    #[test]
    fn launches_are_told_apart_by_their_launcher_ids() {
        let id = |blob: &[u8]| labels_from(&filter_environ(blob, "KITTY_WATCH"), "").job_id;
        assert_eq!(
            id(b"JOB_NAME=a\0MASTER_ADDR=10.0.0.1\0MASTER_PORT=29500\0").as_deref(),
            Some("master:10.0.0.1:29500")
        );
        assert_eq!(
            id(b"SLURM_JOB_ID=77\0SLURM_STEP_ID=2\0MASTER_PORT=1\0").as_deref(),
            Some("slurm:77.2")
        );
        assert_eq!(
            id(b"TORCHELASTIC_RUN_ID=r1\0SLURM_JOB_ID=77\0").as_deref(),
            Some("torchelastic:r1")
        );
        assert_eq!(id(b"JOB_NAME=a\0").as_deref(), None);
    }

    #[test]
    fn slurm_and_mpi_keys() {
        let env = filter_environ(
            b"SLURM_PROCID=7\0SLURM_JOB_ID=991\0SLURM_LOCALID=3\0",
            "KITTY_WATCH",
        );
        let l = labels_from(&env, "");
        assert_eq!(
            (l.rank, l.local_rank, l.job.as_deref()),
            (Some(7), Some(3), Some("991"))
        );
        let env = filter_environ(b"OMPI_COMM_WORLD_RANK=5\0", "KITTY_WATCH");
        assert_eq!(labels_from(&env, "").rank, Some(5));
        let env = filter_environ(b"PMI_RANK=2\0RANK=x\0", "KITTY_WATCH");
        assert_eq!(
            labels_from(&env, "").rank,
            None,
            "RANK wins over PMI_RANK even when it does not parse"
        );
    }

    #[test]
    fn kubepods_v2_systemd() {
        let cg = format!("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1c2d3e4f_aaaa_bbbb_cccc_0123456789ab.slice/cri-containerd-{CID}.scope\n");
        let c = container_from_cgroup(&cg);
        assert_eq!(
            c.pod_uid.as_deref(),
            Some("1c2d3e4f-aaaa-bbbb-cccc-0123456789ab")
        );
        assert_eq!(c.container_id.as_deref(), Some(CID));
        assert_eq!(c.runtime.as_deref(), Some("containerd"));
    }

    #[test]
    fn kubepods_v1_cgroupfs_and_crio() {
        let cg = format!("12:cpu,cpuacct:/kubepods/besteffort/pod1c2d3e4f-aaaa-bbbb-cccc-0123456789ab/{CID}\n11:memory:/kubepods/besteffort/pod1c2d3e4f-aaaa-bbbb-cccc-0123456789ab/{CID}\n");
        let c = container_from_cgroup(&cg);
        assert_eq!(
            c.pod_uid.as_deref(),
            Some("1c2d3e4f-aaaa-bbbb-cccc-0123456789ab")
        );
        assert_eq!(c.container_id.as_deref(), Some(CID));
        let cg = format!("0::/kubepods.slice/kubepods-pod1c2d3e4f_aaaa_bbbb_cccc_0123456789ab.slice/crio-{CID}.scope");
        assert_eq!(container_from_cgroup(&cg).runtime.as_deref(), Some("cri-o"));
    }

    #[test]
    fn docker_paths() {
        let c = container_from_cgroup(&format!("0::/system.slice/docker-{CID}.scope\n"));
        assert_eq!(
            (c.container_id.as_deref(), c.runtime.as_deref()),
            (Some(CID), Some("docker"))
        );
        let c = container_from_cgroup(&format!("4:memory:/docker/{CID}\n"));
        assert_eq!(
            (c.container_id.as_deref(), c.runtime.as_deref()),
            (Some(CID), Some("docker"))
        );
        assert_eq!(
            container_from_cgroup(&format!("4:memory:/docker/{CID}\n")).pod_uid,
            None
        );
    }

    #[test]
    fn captured_host_cgroup_has_no_container() {
        let c = container_from_cgroup(include_str!("../../tests/fixtures/proc/cgroup"));
        assert_eq!(c, ContainerInfo::default());
    }
}
