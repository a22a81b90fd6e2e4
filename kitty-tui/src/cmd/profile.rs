//! `profile`: headless on-CPU profile of one process, written as folded
//! stacks or an SVG flame graph; a summary (and what was lost) on stderr.

use crate::cli::ProfileFormat;
use kitty_probe_ebpf::profile::{self, Request};
use std::path::Path;
use std::sync::atomic::Ordering;

pub fn run(
    req: &Request,
    format: ProfileFormat,
    per_thread: bool,
    output: Option<&Path>,
) -> super::Result<i32> {
    req.validate()?;
    let stop = super::stop_flag();
    // Said once sampling has begun (a refused profile prints only its error).
    let mut announced = false;
    let p = profile::run(req, &stop, |_| {
        if !announced {
            announced = true;
            eprintln!(
                "kitty-tui: profiling pid {} at {} Hz for {:.0} s (Ctrl-C stops early)",
                req.pid,
                req.frequency_hz,
                req.duration.as_secs_f64()
            );
        }
    })?;
    let body = match format {
        ProfileFormat::Folded => p.folded(per_thread).into_bytes(),
        ProfileFormat::Svg => p.svg(per_thread)?,
    };
    match output {
        Some(path) => std::fs::write(path, &body)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?,
        None => {
            use std::io::Write;
            std::io::stdout()
                .write_all(&body)
                .map_err(|e| format!("stdout: {e}"))?;
        }
    }
    eprintln!(
        "kitty-tui: {} samples in {} stacks; lost stacks: {} user, {} kernel; {} collisions; {} dropped",
        p.samples,
        p.stacks.len(),
        p.lost_user_stacks,
        p.lost_kernel_stacks,
        p.collisions,
        p.dropped
    );
    for n in &p.notes {
        eprintln!("kitty-tui: note: {n}");
    }
    if let Some(path) = output {
        eprintln!("kitty-tui: wrote {}", path.display());
    }
    // Ctrl-C ends the profile early, not in error.
    let _ = stop.load(Ordering::SeqCst);
    Ok(0)
}
