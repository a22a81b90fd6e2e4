//! Building the sampling side from the options, in one place: the sampler's
//! configuration, and the ordered pipeline of enrichers that add to each
//! frame (eBPF probes, then NVML; a demo job adds its step times last).

use crate::cli::{NodeArgs, Sampling};
use crate::error::UsageError;
use kitty_core::analysis::AnalysisConfig;
use kitty_core::engine::stages::StageTimes;
use kitty_core::engine::Pipeline;
use kitty_core::sampler::SamplerConfig;
use kitty_core::sources::discovery::WatchRule;
use kitty_core::sources::nvml::NvmlSource;
use kitty_core::sources::tasks::TaskSource;
use kitty_core::sources::Roots;

/// Validates the sampling options and builds the sampler's configuration.
pub fn sampler_config(s: &Sampling) -> Result<SamplerConfig, UsageError> {
    let roots = proc_root(&s.node)?;
    for pid in &s.pids {
        if !roots.pid_dir(*pid).join("stat").exists() {
            return Err(UsageError(format!(
                "pid {pid} does not exist under {}",
                roots.proc.display()
            )));
        }
    }
    let (key, value) = WatchRule::parse_env(&s.watch_env).map_err(UsageError)?;
    Ok(SamplerConfig {
        node: kitty_core::sources::node::node_name(&roots.proc),
        roots,
        rule: WatchRule {
            key,
            value,
            pids: s.pids.clone(),
        },
        interval: s.interval,
        sock_diag: !s.no_sock_diag,
        tasks: task_source(&s.node),
        ..SamplerConfig::default()
    })
}

/// Per-thread counters: the task iterator unless told otherwise (it falls
/// back to procfs by itself, with the reason, when it cannot load).
fn task_source(n: &NodeArgs) -> TaskSource {
    if n.no_ebpf {
        TaskSource::Procfs(None)
    } else if n.no_task_iter {
        TaskSource::Procfs(Some("off (--no-task-iter)".into()))
    } else {
        TaskSource::Iterator(kitty_probe_ebpf::tasks::TaskIter::open)
    }
}

/// The proc root, checked to be a procfs, and the sys root (beside it
/// unless `--sys-root` names one, which must be a directory).
pub fn proc_root(n: &NodeArgs) -> Result<Roots, UsageError> {
    let mut roots = Roots::new(&n.proc_root);
    if let Some(sys) = &n.sys_root {
        if !sys.is_dir() {
            return Err(UsageError(format!(
                "--sys-root {} is not a directory",
                sys.display()
            )));
        }
        roots = roots.with_sys(sys);
    }
    std::fs::read_dir(&roots.proc).map_err(|e| {
        UsageError(format!(
            "cannot read proc root {}: {e}",
            roots.proc.display()
        ))
    })?;
    if !roots.proc.join("self").exists() && !roots.proc.join("1").exists() {
        return Err(UsageError(format!(
            "{} does not look like a procfs",
            roots.proc.display()
        )));
    }
    Ok(roots)
}

/// The enrichers, in order: the eBPF probes unless `--no-ebpf` (each
/// degrades on its own; an unprivileged user gets their reasons in the
/// header, not an error), then NVML unless `--no-gpu`; and the analysis
/// settings.
pub fn build(s: &Sampling, cfg: &SamplerConfig) -> Pipeline {
    let n = &s.node;
    let mut p = Pipeline::new();
    p.analysis = AnalysisConfig {
        findings_window_s: s.findings_window.as_secs_f64(),
        ..AnalysisConfig::default()
    };
    if !n.no_ebpf {
        p.push(Box::new(kitty_probe_ebpf::Probes::start(cfg.hints.clone())));
    }
    p.stage_times = stage_times();
    if !n.no_gpu {
        p.push(Box::new(NvmlSource::start(
            n.nvml_lib.clone(),
            cfg.interval,
            cfg.roots.proc.clone(),
            cfg.roots.sys.clone(),
        )));
    }
    p
}

/// `KITTY_STAGE_TIMES=FILE`: each tick's stages timed by the sampling
/// thread's CPU clock into FILE, for measuring kitty itself (see
/// `kitty_core::engine::stages` and `scripts/stage-times.sh`). A file that
/// cannot be made is said in one line, and kitty runs without it.
fn stage_times() -> Option<StageTimes> {
    let path = std::env::var_os("KITTY_STAGE_TIMES")?;
    StageTimes::to_file(std::path::Path::new(&path))
        .inspect_err(|e| crate::say::line(format_args!("KITTY_STAGE_TIMES: {e}; not timing")))
        .ok()
}
