//! `doctor`: prints the node's checks as text or JSON.

use crate::cli::DoctorArgs;
use color_eyre::eyre::Result;
use kitty_core::doctor::{Check, CheckStatus};
use kitty_core::sources::Roots;
use std::io::Write;

/// Loads the probes once and reports each: attached (strategy) or why not.
/// They are released again when this returns.
fn ebpf_checks(no_task_iter: bool) -> Vec<Check> {
    let probes = kitty_probe_ebpf::Probes::start(Default::default());
    let tried = probes.rtt_tried();
    let profiler = kitty_probe_ebpf::profile::check()
        .map(|()| "perf_event BPF on cpu-clock attaches: `p` and `kitty-tui profile` work".into())
        .map_err(|e| format!("unavailable: {e}"));
    let off_cpu = kitty_probe_ebpf::profile::check_off_cpu()
        .map(|()| "tp_btf/sched_switch attaches: off-CPU profiles (`p`'s second tab, `profile --off-cpu`) work".into())
        .map_err(|e| format!("unavailable: {e}"));
    let mut out: Vec<Check> = probes
        .statuses()
        .iter()
        .map(|(name, st)| {
            let outcome = if st.is_ok() {
                let mut detail = format!("attached ({})", st.strategy.as_deref().unwrap_or(""));
                if *name == kitty_core::model::Source::EbpfRtt && !tried.is_empty() {
                    detail.push_str(&format!(
                        "; better strategies not available here: {}",
                        tried.join("; ")
                    ));
                }
                Ok(detail)
            } else {
                Err(format!(
                    "unavailable: {}",
                    st.reason.as_deref().unwrap_or_default()
                ))
            };
            Check::new(name.name(), outcome, true)
        })
        .collect();
    out.push(Check::new("ebpf.profile", profiler, true));
    out.push(Check::new("ebpf.offcpu", off_cpu, true));
    out.push(Check::new("ebpf.tasks", task_iter(no_task_iter), true));
    out
}

/// The task iterator: loads it and walks this process's own threads once.
fn task_iter(off: bool) -> Result<String, String> {
    use kitty_core::sources::tasks::TaskCounters;
    if off {
        return Err("off (--no-task-iter): per-thread counters from procfs".into());
    }
    let own = std::iter::once(std::process::id()).collect();
    kitty_probe_ebpf::tasks::TaskIter::start()
        .map_err(|e| e.to_string())
        .and_then(|mut it| {
            let neighbours = match it.node_walk() {
                Ok(()) => "the neighbours scan from one walk of every task".to_string(),
                Err(why) => format!("the neighbours scan from each process's stat ({why})"),
            };
            let files = match it.file_walk() {
                Ok(()) => "open fds from one walk of each rank's files (iter/task_file)".to_string(),
                Err(why) => format!("open fds from /proc/<pid>/fd ({why})"),
            };
            let sockets = match it.socket_walk() {
                Ok(()) => "TCP sockets' tcp_info from one run over them all".to_string(),
                Err(why) => format!("TCP sockets' tcp_info from sock_diag ({why})"),
            };
            Ok((it.read(&own)?, it.walk_said(), files, sockets, neighbours))
        })
        .map(|(rows, how, files, sockets, neighbours)| {
            format!(
                "{how} loads: per-thread counters without procfs ({} threads of doctor itself read); {files}; {sockets}; {neighbours}",
                rows.len()
            )
        })
        .map_err(|e| format!("unavailable: {e}; per-thread counters from procfs"))
}

#[derive(serde::Serialize)]
struct Report<'a> {
    kitty_version: &'static str,
    node: String,
    checks: &'a [Check],
}

pub fn run(a: DoctorArgs) -> Result<i32> {
    if let Some(sys) = a.node.sys_root.as_ref().filter(|s| !s.is_dir()) {
        return Err(crate::error::UsageError(format!(
            "--sys-root {} is not a directory",
            sys.display()
        ))
        .into());
    }
    // An unreadable proc root is doctor's first failed check, not a usage error.
    let roots = crate::pipeline::proc_root(&a.node).unwrap_or_else(|_| {
        let r = Roots::new(&a.node.proc_root);
        match &a.node.sys_root {
            Some(s) => r.with_sys(s),
            None => r,
        }
    });
    let mut checks = kitty_core::doctor::run(&roots);
    checks.push(kitty_core::doctor::rdma_check(&roots));
    checks.extend(kitty_core::doctor::nccl_checks(&roots, &Default::default()));
    if !a.node.no_gpu {
        checks.push(kitty_core::doctor::nvml_check(a.node.nvml_lib.clone()));
    }
    if !a.node.no_ebpf {
        checks.extend(ebpf_checks(a.node.no_task_iter));
    }
    let mut out = std::io::stdout().lock();
    if a.json {
        let doc = Report {
            kitty_version: kitty_core::KITTY_VERSION,
            node: kitty_core::sources::node::node_name(&a.node.proc_root),
            checks: &checks,
        };
        serde_json::to_writer_pretty(&mut out, &doc).map_err(std::io::Error::from)?;
        writeln!(out)?;
    } else {
        for ch in &checks {
            let mark = match ch.status {
                CheckStatus::Ok => "ok  ",
                CheckStatus::Warn => "warn",
                CheckStatus::Fail => "FAIL",
            };
            writeln!(out, "{mark}  {:<18} {}", ch.name, ch.detail)?;
        }
    }
    out.flush()?;
    Ok(kitty_core::doctor::exit_code(&checks))
}
