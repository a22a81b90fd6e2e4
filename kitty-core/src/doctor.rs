//! `doctor`: what works on this node and, when something does not, why.

use crate::named_enum;
use crate::sources::cgroup::CgroupMounts;
use crate::sources::Roots;
use serde::Serialize;

named_enum! {
    /// A check's outcome: ok, a warning (kitty works without it), or a
    /// failure (kitty cannot do its job here).
    pub enum CheckStatus {
        Ok = "ok",
        Warn = "warn",
        Fail = "fail",
    }
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Check {
    pub name: String,
    pub status: CheckStatus,
    pub detail: String,
}

impl Check {
    /// Ok with its detail, or the reason as a warning or a failure.
    pub fn new(name: &str, outcome: Result<String, String>, fail_is_warn: bool) -> Check {
        let (status, detail) = match outcome {
            Ok(d) => (CheckStatus::Ok, d),
            Err(d) if fail_is_warn => (CheckStatus::Warn, d),
            Err(d) => (CheckStatus::Fail, d),
        };
        Check {
            name: name.into(),
            status,
            detail,
        }
    }
}

fn check(name: &str, ok: Result<String, String>, fail_is_warn: bool) -> Check {
    Check::new(name, ok, fail_is_warn)
}

pub fn run(roots: &Roots) -> Vec<Check> {
    let mut out = Vec::new();
    let proc = &roots.proc;
    out.push(check(
        "proc_root",
        match std::fs::read_dir(proc) {
            Ok(_) if proc.join("self").exists() || proc.join("1").exists() => {
                Ok(format!("{} readable", proc.display()))
            }
            Ok(_) => Err(format!("{} is not a procfs", proc.display())),
            Err(e) => Err(format!("{}: {e}", proc.display())),
        },
        false,
    ));
    if proc == std::path::Path::new("/proc") && std::path::Path::new("/host/proc/1").exists() {
        out.push(check(
            "host_proc",
            Err("/host/proc exists: running in a container? use --proc-root /host/proc to see the node".into()),
            true,
        ));
    }
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    out.push(check(
        "permissions",
        if euid == 0 {
            Ok("running as root".into())
        } else {
            match std::fs::read(proc.join("1/environ")) {
                Ok(_) => Ok(format!("uid {euid}; other processes' environ readable")),
                Err(e) => Err(format!(
                    "uid {euid}: other users' processes cannot be discovered ({e}); run with sudo"
                )),
            }
        },
        true,
    ));
    out.push(check(
        "schedstat",
        match std::fs::read_to_string(proc.join("self/schedstat")) {
            Ok(s) if s.split_whitespace().count() >= 3 => {
                Ok("per-thread run_delay available".into())
            }
            Ok(_) => Err("schedstat is malformed".into()),
            Err(e) => Err(format!(
                "no /proc/<pid>/schedstat ({e}): run-queue delay unavailable (CONFIG_SCHED_INFO)"
            )),
        },
        false,
    ));
    out.push(check(
        "sched_migrations",
        match std::fs::read_to_string(proc.join("self/sched")) {
            Ok(s) if crate::sources::sched::parse_nr_migrations(&s).is_some() => {
                Ok("se.nr_migrations available".into())
            }
            Ok(_) => Err(
                "se.nr_migrations missing from /proc/<pid>/sched: migrations unavailable".into(),
            ),
            Err(e) => Err(format!(
                "no /proc/<pid>/sched ({e}): migrations unavailable (CONFIG_SCHED_DEBUG)"
            )),
        },
        true,
    ));
    let mounts = CgroupMounts::load(roots);
    out.push(check(
        "cgroup",
        match (&mounts.v1_cpu, &mounts.v2) {
            (Some(v1), Some(v2)) => Ok(format!(
                "hybrid: v1 cpu at {}, v2 at {}",
                v1.display(),
                v2.display()
            )),
            (Some(v1), None) => Ok(format!("v1: cpu at {}", v1.display())),
            (None, Some(v2)) => Ok(format!("v2 at {}", v2.display())),
            (None, None) => {
                Err("no cgroup cpu controller mounted: CFS throttling unavailable".into())
            }
        },
        true,
    ));
    out.push(check(
        "sock_diag",
        (|| {
            let mut sd = crate::sources::sockdiag::SockDiag::default();
            let me = proc.join("self");
            let ns = crate::sources::process::read_netns(&me).ok_or("cannot read own netns")?;
            let n = sd.dump(ns, &me).map_err(|e| e.to_string())?.len();
            Ok(format!(
                "tcp_info via NETLINK_SOCK_DIAG ({n} sockets in this namespace)"
            ))
        })()
        .map_err(|e: String| {
            format!("{e}: per-socket tcp_info unavailable, falling back to /proc/<pid>/net/tcp")
        }),
        true,
    ));
    out.push(check(
        "pressure",
        if proc.join("pressure/cpu").exists() {
            Ok("PSI available".into())
        } else {
            Err("no /proc/pressure: PSI unavailable (psi=1 on the kernel command line)".into())
        },
        true,
    ));
    out
}

/// NVML: loads it and lists the GPUs, or says why not (a warning: kitty
/// works without GPUs).
pub fn nvml_check(lib_path: Option<std::path::PathBuf>) -> Check {
    check(
        "nvml",
        crate::sources::nvml::NvmlSource::probe(lib_path),
        true,
    )
}

/// RDMA: the ports under the sys root with their state and rate, the
/// uverbs devices, and whether the RoCE netdevs give pause counters; or
/// why there is nothing (a warning: most nodes have no RDMA).
pub fn rdma_check(roots: &Roots) -> Check {
    let sys = &roots.sys;
    let mut pause_ok = Vec::new();
    let mut pause = |nd: &str| {
        let s = crate::sources::rdma::ethtool::pause_stats(nd);
        if !s.is_empty() {
            pause_ok.push(nd.to_string());
        }
        s
    };
    let outcome = match crate::sources::rdma::read_ports(sys, &mut pause) {
        None => Err(format!(
            "no RDMA devices: {} does not exist (no InfiniBand/RoCE/EFA driver loaded); RDMA signals absent",
            sys.join("class/infiniband").display()
        )),
        Some(p) if p.is_empty() => Err(format!(
            "no RDMA ports under {}",
            sys.join("class/infiniband").display()
        )),
        Some(ports) => {
            let list: Vec<String> = ports
                .iter()
                .map(|p| {
                    format!(
                        "{} {} {} ({}, {} counters)",
                        p.id(),
                        p.state.as_ref().map_or("?", |s| s.1.as_str()),
                        p.rate_gbps.map_or("?".into(), |r| format!("{r} Gb/s")),
                        p.link_layer.as_deref().unwrap_or("?"),
                        p.counters.len()
                    )
                })
                .collect();
            let uverbs = crate::sources::rdma::uverbs_devices(sys).len();
            let qps = match crate::sources::rdma::netlink::qp_owners() {
                Ok(q) => format!("{} owned QPs over RDMA netlink (ranks map to the ports of their QPs)", q.len()),
                Err(e) => e,
            };
            Ok(format!(
                "{}; {qps}; {uverbs} uverbs devices (else ranks map by their open uverbs fds, then NCCL_IB_HCA); pause counters from {}",
                list.join(", "),
                if pause_ok.is_empty() {
                    "no netdev (ethtool -S has none here)".to_string()
                } else {
                    pause_ok.join(", ")
                }
            ))
        }
    };
    check("rdma", outcome, true)
}

/// NCCL's own sources: which watched ranks enable NCCL Inspector (and
/// where it writes), and whether a RAS port answers on this node.
pub fn nccl_checks(roots: &Roots, rule: &crate::sources::discovery::WatchRule) -> Vec<Check> {
    let found =
        crate::sources::discovery::discover_skipping(roots, rule, &Default::default(), None);
    let ranks = found.map(|f| f.watched).unwrap_or_default();
    let mut dirs = Vec::new();
    for w in &ranks {
        if let Some(d) =
            crate::sources::nccl_inspector::dump_dir(&w.nccl, w.labels.slurm_job_id.as_deref())
        {
            dirs.push(match d {
                Ok(d) => format!("pid {} writes {d}", w.key.pid),
                Err(e) => format!("pid {}: {e}", w.key.pid),
            });
        }
    }
    let inspector = if dirs.is_empty() {
        Err(format!(
            "{} watched processes, none enables NCCL Inspector (NCCL_PROFILER_PLUGIN=<path>/libnccl-profiler-inspector.so NCCL_INSPECTOR_ENABLE=1 NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS=500000): no late-arrival verdicts",
            ranks.len()
        ))
    } else {
        Ok(dirs.join("; "))
    };
    let addr = ranks
        .iter()
        .find_map(|w| {
            w.nccl
                .iter()
                .find(|(k, _)| k == "NCCL_RAS_ADDR")
                .map(|(_, v)| v.clone())
        })
        .unwrap_or_else(|| crate::sources::nccl_ras::DEFAULT_ADDR.to_string());
    let ras = crate::sources::nccl_ras::query(&addr, std::time::Duration::from_secs(2), 2)
        .and_then(|body| crate::sources::nccl_ras::parse(&body))
        .map(|r| {
            format!(
                "NCCL {} answers on {addr}: {} communicators",
                r.nccl_version,
                r.communicators.len()
            )
        })
        .map_err(|e| format!("{e}: no NCCL 2.24+ job with RAS runs here (or NCCL_RAS_ENABLE=0)"));
    vec![
        check("nccl.inspector", inspector, true),
        check("nccl.ras", ras, true),
    ]
}

/// The process exit status doctor should use: non-zero when something failed.
pub fn exit_code(checks: &[Check]) -> i32 {
    if checks.iter().any(|c| c.status == CheckStatus::Fail) {
        1
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_node_passes_core_checks() {
        let c = run(&Roots::default());
        let get = |n: &str| c.iter().find(|x| x.name == n).unwrap().status;
        assert_eq!(get("proc_root"), CheckStatus::Ok);
        assert_eq!(get("schedstat"), CheckStatus::Ok);
        assert_eq!(exit_code(&c), 0);
    }

    #[test]
    fn rdma_and_nccl_checks_say_what_they_see_or_why_not() {
        use crate::sources::rdma::standin::{Kind, Tree};
        let d = tempfile::tempdir().unwrap();
        let roots = Roots::default().with_sys(d.path());
        let c = rdma_check(&roots);
        assert_eq!(c.status, CheckStatus::Warn);
        assert!(c.detail.contains("no RDMA devices"), "{}", c.detail);
        Tree::new(d.path())
            .add_device("mlx5_0", Kind::Mlx5Ib, 1, "200 Gb/sec (4X HDR)", 0)
            .unwrap();
        let c = rdma_check(&roots);
        assert_eq!(c.status, CheckStatus::Ok);
        assert!(
            c.detail
                .contains("mlx5_0/1 ACTIVE 200 Gb/s (InfiniBand, 21 counters)"),
            "{}",
            c.detail
        );
        let rule = crate::sources::discovery::WatchRule {
            key: "KITTY_DOCTOR_TEST_NOBODY".into(),
            value: "1".into(),
            pids: vec![],
        };
        let n = nccl_checks(&Roots::default(), &rule);
        let names: Vec<&str> = n.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["nccl.inspector", "nccl.ras"]);
        assert_eq!(n[0].status, CheckStatus::Warn);
        assert!(
            n[0].detail.contains("none enables NCCL Inspector"),
            "{}",
            n[0].detail
        );
        assert!(n[1].detail.contains("localhost:28028"), "{}", n[1].detail);
    }

    #[test]
    fn missing_proc_root_fails() {
        let c = run(&Roots::new("/nonexistent/proc"));
        assert_eq!(c[0].status, CheckStatus::Fail);
        assert_eq!(exit_code(&c), 1);
    }
}
