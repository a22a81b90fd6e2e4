//! Runs what the app asks for that takes time or touches the system: an
//! on-CPU and an off-CPU profile over the same seconds on a background
//! thread (the app gets a [`Progress`] to draw and cancel), and writing a
//! profile to files.

use kitty_core::profile::Profile;
use kitty_probe_ebpf::profile::{Kinds, Request};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// Default profile of the TUI: 99 Hz for 5 s (seed 004's on-demand profile).
pub const FREQUENCY_HZ: u64 = 99;
pub const DURATION: Duration = Duration::from_secs(5);

/// What the view shows of a profile being taken, and how to cancel it.
#[derive(Debug, Clone)]
pub struct Progress {
    pub pid: u32,
    pub name: String,
    fraction: Arc<Mutex<f64>>,
    cancel: Arc<AtomicBool>,
}

impl Progress {
    pub fn fraction(&self) -> f64 {
        *self.fraction.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn cancel(&self) {
        self.cancel.store(true, Ordering::SeqCst);
    }
}

/// The profile thread, owned by the event loop.
#[derive(Default)]
pub struct Profiler {
    job: Option<JoinHandle<Result<Vec<Profile>, String>>>,
}

impl Profiler {
    pub fn start(&mut self, pid: u32, name: String) -> Progress {
        let p = Progress {
            pid,
            name,
            fraction: Arc::new(Mutex::new(0.0)),
            cancel: Arc::new(AtomicBool::new(false)),
        };
        let (f, c) = (p.fraction.clone(), p.cancel.clone());
        self.job = std::thread::Builder::new()
            .name("kitty-profile".into())
            .spawn(move || {
                let req = Request {
                    pid,
                    frequency_hz: FREQUENCY_HZ,
                    duration: DURATION,
                    kinds: Kinds::Both,
                };
                kitty_probe_ebpf::profile::run(&req, &c, |x| {
                    *f.lock().unwrap_or_else(|e| e.into_inner()) = x
                })
                .map_err(|e| e.to_string())
            })
            .ok();
        p
    }

    pub fn running(&self) -> bool {
        self.job.is_some()
    }

    /// The result once the thread is done.
    pub fn poll(&mut self) -> Option<Result<Vec<Profile>, String>> {
        if !self.job.as_ref()?.is_finished() {
            return None;
        }
        let h = self.job.take()?;
        Some(
            h.join()
                .unwrap_or_else(|_| Err("the profiler thread panicked".into())),
        )
    }
}

/// Writes folded stacks and an SVG next to each other (in the current
/// directory, else the temporary one); says where, or why not.
pub fn write(profile: &Profile, per_thread: bool) -> String {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let dir = std::env::current_dir()
        .ok()
        .filter(|d| std::fs::metadata(d).is_ok_and(|m| !m.permissions().readonly()))
        .unwrap_or_else(std::env::temp_dir);
    let kind = match profile.kind {
        kitty_core::profile::ProfileKind::OnCpu => "profile",
        kitty_core::profile::ProfileKind::OffCpu => "offcpu",
    };
    let base = dir.join(format!("kitty-{kind}-{}-{stamp}", profile.pid));
    let folded = base.with_extension("folded");
    let svg = base.with_extension("svg");
    let r = kitty_core::sinks::files::write_new(&folded, profile.folded(per_thread).as_bytes())
        .and_then(|_| profile.svg(per_thread).map_err(|e| e.to_string()))
        .and_then(|bytes| kitty_core::sinks::files::write_new(&svg, &bytes));
    match r {
        Ok(()) => format!("wrote {} and {}", folded.display(), svg.display()),
        Err(e) => format!("could not write the profile: {e}"),
    }
}
