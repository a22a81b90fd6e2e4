//! `profile`: headless on-CPU (or, with `--off-cpu`, off-CPU) profile of
//! one process, written as folded stacks or an SVG flame graph; a summary
//! (and what was lost) on stderr.
//! The output is checked before sampling and written atomically after.

use super::{check_output, stop_flag};
use crate::cli::{ProfileArgs, ProfileFormat};
use crate::error::UsageError;
use color_eyre::eyre::Result;
use kitty_core::sinks::files::{AtomicFile, Kind, Target};
use kitty_probe_ebpf::profile::{self, Kinds, ProfileError, Request};
use std::io::Write;

fn usage_or_failure(e: ProfileError) -> color_eyre::eyre::Report {
    if e.is_usage() {
        UsageError::new(e).into()
    } else {
        e.into()
    }
}

pub fn run(a: ProfileArgs) -> Result<i32> {
    let req = Request {
        pid: a
            .pid
            .ok_or_else(|| UsageError::new(ProfileError::NoTarget))?,
        frequency_hz: a.frequency,
        duration: a.duration,
        kinds: if a.off_cpu {
            Kinds::OffCpu
        } else {
            Kinds::OnCpu
        },
    };
    req.validate().map_err(usage_or_failure)?;
    let kind = match a.format {
        ProfileFormat::Folded => Kind::Folded,
        ProfileFormat::Svg => Kind::Svg,
    };
    let target = match &a.output {
        Some(p) => check_output(p, kind, a.force)?,
        None => Target::Stdout,
    };
    let stop = stop_flag();
    // Said once sampling has begun (a refused profile prints only its error).
    let mut announced = false;
    let p = profile::run(&req, &stop, |_| {
        if !announced {
            announced = true;
            if a.off_cpu {
                crate::say::line(format_args!(
                    "profiling where pid {} waits for {:.0} s (Ctrl-C stops early)",
                    req.pid,
                    req.duration.as_secs_f64()
                ));
            } else {
                crate::say::line(format_args!(
                    "profiling pid {} at {} Hz for {:.0} s (Ctrl-C stops early)",
                    req.pid,
                    req.frequency_hz,
                    req.duration.as_secs_f64()
                ));
            }
        }
    })
    .map_err(usage_or_failure)?
    .pop()
    .ok_or_else(|| color_eyre::eyre::eyre!("the profiler returned no profile"))?;
    let body = match a.format {
        ProfileFormat::Folded => p.folded(a.per_thread).into_bytes(),
        ProfileFormat::Svg => p.svg(a.per_thread)?,
    };
    match &target {
        Target::Stdout => {
            let mut out = std::io::stdout().lock();
            out.write_all(&body)?;
            out.flush()?;
        }
        Target::File(path) => {
            let mut f = AtomicFile::create(path)?;
            f.write_all(&body)?;
            f.commit()?;
        }
    }
    if p.kind == kitty_core::profile::ProfileKind::OffCpu {
        crate::say::line(format_args!(
            "off-CPU {:.2} s runnable (waiting for a CPU), {:.2} s blocked, over {} switches",
            p.runnable_us as f64 / 1e6,
            p.blocked_us as f64 / 1e6,
            p.samples
        ));
    }
    crate::say::line(format_args!(
        "{} {} in {} stacks; lost stacks: {} user, {} kernel; {} collisions; {} dropped",
        if p.kind == kitty_core::profile::ProfileKind::OffCpu {
            p.stacks.iter().map(|s| s.count).sum::<u64>()
        } else {
            p.samples
        },
        p.kind.unit(),
        p.stacks.len(),
        p.lost_user_stacks,
        p.lost_kernel_stacks,
        p.collisions,
        p.dropped
    ));
    for n in &p.notes {
        crate::say::line(format_args!("note: {n}"));
    }
    if let Target::File(path) = &target {
        crate::say::line(format_args!("wrote {}", path.display()));
    }
    Ok(crate::error::OK)
}
