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
use kitty_core::engine::{Frames, StopWaker};
use std::sync::atomic::{AtomicBool, Ordering};
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

/// What to wake when the stop flag is set (drive loops, the server).
type Wake = Box<dyn Fn() + Send>;
static WAKERS: std::sync::Mutex<Vec<Wake>> = std::sync::Mutex::new(Vec::new());
static STOP: std::sync::OnceLock<Arc<AtomicBool>> = std::sync::OnceLock::new();

/// SIGINT, SIGTERM and SIGHUP set this flag, then wake what was given to
/// [`wake_on_stop`] and [`on_stop`]: a thread waits for them (a signal
/// handler could only set the flag, and loops would have to poll it).
/// Where the handlers cannot be installed, a signal ends the process as
/// by default.
pub fn stop_flag() -> Arc<AtomicBool> {
    STOP.get_or_init(|| {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
        let flag = Arc::new(AtomicBool::new(false));
        if let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) {
            let f = flag.clone();
            let spawned = std::thread::Builder::new()
                .name("kitty-signals".into())
                .spawn(move || {
                    for _ in signals.forever() {
                        f.store(true, Ordering::SeqCst);
                        for w in WAKERS.lock().unwrap_or_else(|e| e.into_inner()).iter() {
                            w();
                        }
                    }
                });
            assert!(spawned.is_ok(), "cannot start the signal thread");
        }
        flag
    })
    .clone()
}

/// Lets a drive loop on [`stop_flag`] wait for frames alone: a signal
/// wakes it.
pub fn wake_on_stop(frames: &mut Frames) {
    let waker: StopWaker = frames.stop_waker();
    on_stop(move || waker.wake());
}

/// Runs `wake` (on the signal thread) each time the stop flag is set, so a
/// loop can wait for its work alone instead of polling the flag.
pub fn on_stop(wake: impl Fn() + Send + 'static) {
    WAKERS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(Box::new(wake));
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
