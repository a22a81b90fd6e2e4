//! `snapshot --json`: sample for a while, print the final frame as JSON
//! (with every event of the run). `demo --headless` and `cluster --json`
//! use it too.

use super::{at_least_one_interval, stop_flag};
use crate::cli::SnapshotArgs;
use crate::pipeline;
use color_eyre::eyre::{eyre, Result};
use kitty_core::engine::{Delivery, End, Engine, FrameSource, Pipeline};
use kitty_core::model::Frame;
use kitty_core::sampler::Sampler;
use kitty_core::sinks::record::Writer;
use std::io::Write;
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

pub fn run(a: SnapshotArgs) -> Result<i32> {
    let cfg = pipeline::sampler_config(&a.sampling)?;
    at_least_one_interval("the duration", a.duration, cfg.interval)?;
    let p = pipeline::build(&a.sampling, &cfg);
    run_with(Box::new(Sampler::new(cfg)), p, a.duration, None)
}

/// Samples for `duration` (and at least two frames, so rates exist) and
/// prints the final state; with a recorder (`demo --headless --record`,
/// `cluster --json --record`) every frame is also recorded.
pub fn run_with(
    source: Box<dyn FrameSource>,
    pipeline: Pipeline,
    duration: Duration,
    recorder: Option<(Writer, String)>,
) -> Result<i32> {
    let mut writer = recorder.map(|r| r.0);
    let stop = stop_flag();
    let (mut engine, mut frames) = Engine::start_source(source, pipeline, Delivery::Lossless);
    super::wake_on_stop(&mut frames);
    let start = Instant::now();
    let mut last: Option<Frame> = None;
    // Events happen in one frame each: keep all of them for the document.
    let mut events = Vec::new();
    let mut n = 0;
    let end = frames.drive(
        &stop,
        None,
        |mut f| -> Result<_, std::convert::Infallible> {
            events.extend(f.events.iter().cloned());
            if let Some(w) = writer.as_mut() {
                if let Err(e) = w.append_in_place(&mut f) {
                    crate::say::line(format_args!("recording stopped: {e}"));
                    writer = None;
                }
            }
            last = Some(f);
            n += 1;
            Ok(if start.elapsed() >= duration && n >= 2 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            })
        },
    );
    engine.stop();
    if let Some(w) = writer {
        w.finish()?;
    }
    if matches!(end, Ok(End::SourceDied)) {
        return Err(eyre!("the sampling thread died"));
    }
    let mut frame = last.ok_or_else(|| eyre!("no frame was sampled"))?;
    frame.events = events;
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, &kitty_core::sinks::snapshot::snapshot(&frame))
        .map_err(std::io::Error::from)?;
    writeln!(out)?;
    out.flush()?;
    Ok(crate::error::OK)
}
