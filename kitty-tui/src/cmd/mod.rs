//! Commands: each file turns its arguments into an engine and a sink (or
//! reads a recording), and reports failures as errors with context.

mod cluster;
mod demo;
mod doctor;
mod export;
mod live;
mod profile;
mod record;
mod replay;
mod serve;
mod snapshot;

use crate::cli::{Cli, Command};
use color_eyre::eyre::Result;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

pub fn dispatch(cli: Cli) -> Result<i32> {
    match cli.command {
        None => live::run(cli.live),
        Some(Command::Record(a)) => record::run(a),
        Some(Command::Snapshot(a)) => snapshot::run(a),
        Some(Command::Doctor(a)) => doctor::run(a),
        Some(Command::Serve(a)) => serve::run(a),
        Some(Command::Cluster(a)) => cluster::run(a),
        Some(Command::Replay(a)) => replay::run(a),
        Some(Command::Export(a)) => export::run(a),
        Some(Command::Profile(a)) => profile::run(a),
        Some(Command::Demo(a)) => demo::run(a),
        Some(Command::Completions { shell }) => {
            use clap::CommandFactory;
            let mut out = std::io::stdout().lock();
            clap_complete::generate(shell, &mut Cli::command(), "kitty-tui", &mut out);
            std::io::Write::flush(&mut out)?;
            Ok(crate::error::OK)
        }
        Some(Command::Man) => {
            use clap::CommandFactory;
            let mut out = std::io::stdout().lock();
            clap_mangen::Man::new(Cli::command()).render(&mut out)?;
            std::io::Write::flush(&mut out)?;
            Ok(crate::error::OK)
        }
        Some(Command::DemoRank(a)) => Ok(crate::demo::ring::run(a)?),
        Some(Command::DemoFlow(a)) => Ok(crate::demo::flow::run(a)?),
        Some(Command::DemoHog { cpu, threads, nice }) => Ok(crate::demo::hog(cpu, threads, nice)?),
    }
}

/// SIGINT, SIGTERM and SIGHUP set this flag; loops poll it.
pub fn stop_flag() -> Arc<AtomicBool> {
    let flag = Arc::new(AtomicBool::new(false));
    for sig in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        let _ = signal_hook::flag::register(sig, flag.clone());
    }
    flag
}

/// A sampling run must see at least one interval.
fn at_least_one_interval(
    what: &str,
    d: std::time::Duration,
    interval: std::time::Duration,
) -> Result<(), crate::error::UsageError> {
    if d < interval {
        return Err(crate::error::UsageError(format!(
            "{what} {} is shorter than one interval ({}): nothing would be sampled",
            humantime::format_duration(d),
            humantime::format_duration(interval)
        )));
    }
    Ok(())
}

/// Checks an output path before any sampling starts; a refused path is a
/// usage error.
fn check_output(
    path: &std::path::Path,
    kind: kitty_core::sinks::files::Kind,
    force: bool,
) -> Result<kitty_core::sinks::files::Target> {
    let t = kitty_core::sinks::files::Target::from_arg(path);
    if let kitty_core::sinks::files::Target::File(p) = &t {
        kitty_core::sinks::files::check(p, kind, force).map_err(crate::error::UsageError::new)?;
    }
    Ok(t)
}
