//! `record`: headless recorder. Every frame is written (each tick's latency
//! histograms only with `--histograms`: their percentiles are always kept);
//! exits non-zero if the sampling thread died.

use super::{at_least_one_interval, check_output, stop_flag};
use crate::cli::RecordArgs;
use crate::error;
use crate::pipeline;
use color_eyre::eyre::{Result, WrapErr};
use kitty_core::engine::{Delivery, End, Engine};
use kitty_core::sinks::files::{self as output, Kind, Target};
use kitty_core::sinks::record::spool::{self, TickWriter};
use kitty_core::sinks::record::{Header, RecordEncoder, RecordFile, Sink};
use std::ops::ControlFlow;

pub fn run(a: RecordArgs) -> Result<i32> {
    let cfg = pipeline::sampler_config(&a.sampling)?;
    if let Some(d) = a.duration {
        at_least_one_interval("the duration", d, cfg.interval)?;
    }
    let target = check_output(&a.output, Kind::Recording, a.force)?;
    let sink = match &target {
        Target::Stdout => Sink::Stream(Box::new(std::io::stdout())),
        Target::File(p) => Sink::File(output::create_in_place(p)?),
    };
    let header = Header::now(&cfg.node, cfg.interval).with_histograms(a.histograms);
    let file = RecordFile::new(sink, target.describe(), &header)?;
    let mut pipeline = pipeline::build(&a.sampling, &cfg);
    // Each frame is encoded and written on the sampling thread (a stream
    // from a thread of its own; see `TickWriter`): no frame reaches this
    // one.
    let encoder = RecordEncoder::new(&header);
    let (mut writer, outcome) = TickWriter::new(file, encoder, spool::SLOW_WRITE);
    if matches!(target, Target::Stdout) {
        writer.spool();
    }
    pipeline.finish_with(Box::new(move |f| writer.take(f)));
    let stop = stop_flag();
    let (mut engine, mut frames) = Engine::start(cfg, pipeline, Delivery::Lossless);
    super::wake_on_stop(&mut frames);
    let end = frames.drive(&stop, a.duration, |_| {
        Ok::<_, std::convert::Infallible>(ControlFlow::Continue(()))
    });
    // The sampling thread ends, and with it the writer: a spool's records
    // are written first; a failed write (which stopped the sampler too) is
    // the error.
    engine.stop();
    let writer = outcome.take().wrap_err("recording stopped")?;
    let Ok(end) = end;
    let (n, bytes) = (writer.frames(), writer.bytes());
    writer.finish()?;
    if end == End::SourceDied {
        crate::say::line(format_args!(
            "the sampling thread died; {n} frames were saved to {}",
            target.describe()
        ));
        return Ok(error::FAILURE);
    }
    crate::say::line(format_args!(
        "recorded {n} frames ({bytes} bytes) to {}",
        target.describe()
    ));
    Ok(error::OK)
}
