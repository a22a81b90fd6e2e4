//! Commands: each turns CLI arguments into an engine and a sink.

mod doctor;
mod export;
mod profile;
mod record;
mod replay;
mod serve;

pub use replay::open as replay_open;
pub mod snapshot;

use crate::cli::{Cli, Command, Common};
use kitty_core::engine::Enricher;
use kitty_core::sampler::SamplerConfig;
use kitty_core::sources::discovery::WatchRule;
use kitty_core::sources::Roots;

/// A command's failure: printed as one line, exit status 2.
pub type Result<T> = std::result::Result<T, String>;

pub fn dispatch(cli: Cli) -> Result<i32> {
    let common = cli.common.clone();
    match cli.command {
        None => crate::tui::run_live(sampler_config(&common)?, cli.record, enrichers(&common)),
        Some(Command::Record { output, duration }) => record::run(
            sampler_config(&common)?,
            enrichers(&common),
            &output,
            duration,
        ),
        Some(Command::Snapshot { json: _, duration }) => {
            snapshot::run_with(sampler_config(&common)?, duration, enrichers(&common))
        }
        Some(Command::Doctor { json }) => doctor::run(&common, json),
        Some(Command::Serve {
            listen,
            grace,
            socket_series,
        }) => serve::run(
            sampler_config(&common)?,
            enrichers(&common),
            listen,
            kitty_core::exporter::ExporterConfig {
                grace,
                socket_series: socket_series as usize,
            },
        ),
        Some(Command::Replay { file, dump }) => {
            if dump {
                replay::dump(&file)
            } else {
                crate::tui::run_replay(&file)
            }
        }
        Some(Command::Export {
            file,
            format,
            output,
        }) => export::run(&file, format, output.as_deref()),
        Some(Command::Profile {
            duration,
            frequency,
            format,
            per_thread,
            output,
        }) => profile::run(
            &kitty_probe_ebpf::profile::Request {
                pid: match common.pids.as_slice() {
                    [pid] => *pid,
                    [] => return Err("profile needs a target: --pid PID".into()),
                    _ => return Err("profile takes one --pid".into()),
                },
                frequency_hz: frequency,
                duration,
            },
            format,
            per_thread,
            output.as_deref(),
        ),
        Some(Command::Demo(args)) => {
            let cfg = sampler_config(&common)?;
            crate::demo::run(args, cfg, cli.record, enrichers(&common))
        }
        Some(Command::DemoRank(args)) => crate::demo::ring::run(args),
        Some(Command::DemoFlow(args)) => crate::demo::flow::run(args),
        Some(Command::DemoHog { cpu, threads }) => crate::demo::hog(cpu, threads),
    }
}

/// What adds to the sampler's frames besides procfs: the eBPF probes unless
/// `--no-ebpf` (each degrades on its own; an unprivileged user gets their
/// reasons in the header, not an error).
pub fn enrichers(c: &Common) -> Vec<Box<dyn Enricher>> {
    let mut out: Vec<Box<dyn Enricher>> = Vec::new();
    if !c.no_ebpf {
        out.push(Box::new(kitty_probe_ebpf::Probes::start()));
    }
    out
}

/// Validates the common options and builds the sampler's configuration.
pub fn sampler_config(c: &Common) -> Result<SamplerConfig> {
    let roots = Roots::new(&c.proc_root);
    std::fs::read_dir(&roots.proc)
        .map_err(|e| format!("cannot read proc root {}: {e}", roots.proc.display()))?;
    if !roots.proc.join("self").exists() && !roots.proc.join("1").exists() {
        return Err(format!(
            "{} does not look like a procfs",
            roots.proc.display()
        ));
    }
    for pid in &c.pids {
        if !roots.pid_dir(*pid).join("stat").exists() {
            return Err(format!(
                "pid {pid} does not exist under {}",
                roots.proc.display()
            ));
        }
    }
    let (key, value) = WatchRule::parse_env(&c.watch_env)?;
    Ok(SamplerConfig {
        roots,
        rule: WatchRule {
            key,
            value,
            pids: c.pids.clone(),
        },
        interval: c.interval,
        sock_diag: !c.no_sock_diag,
        nvml: (!c.no_gpu).then(|| kitty_core::sampler::NvmlConfig {
            lib_path: c.nvml_lib.clone(),
        }),
        ..SamplerConfig::default()
    })
}

/// SIGINT, SIGTERM and SIGHUP set this flag; loops poll it.
pub fn stop_flag() -> std::sync::Arc<std::sync::atomic::AtomicBool> {
    let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for sig in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        let _ = signal_hook::flag::register(sig, flag.clone());
    }
    flag
}

/// The header written at the start of a recording.
pub fn header_for(cfg: &SamplerConfig) -> kitty_core::record::Header {
    kitty_core::record::Header {
        kitty_version: kitty_core::KITTY_VERSION.into(),
        frame_version: kitty_core::frame::FRAME_VERSION,
        host: cfg.node.clone(),
        interval_ms: cfg.interval.as_millis() as u64,
        start_wall_ns: kitty_core::sampler::wall_ns(),
    }
}
