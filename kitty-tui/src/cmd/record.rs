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
use kitty_core::sinks::record::{Header, Sink, Writer};
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
    let mut writer = Writer::new(
        sink,
        target.describe(),
        &Header::now(&cfg.node, cfg.interval).with_histograms(a.histograms),
    )?;
    let pipeline = pipeline::build(&a.sampling, &cfg);
    let stop = stop_flag();
    let (mut engine, mut frames) = Engine::start(cfg, pipeline, Delivery::Lossless);
    super::wake_on_stop(&mut frames);
    let end = frames.drive(&stop, a.duration, |mut f| {
        writer
            .append_in_place(&mut f)
            .map(|_| ControlFlow::Continue(()))
    });
    engine.stop();
    let end = end.wrap_err("recording stopped")?;
    // Frames already produced but not yet written are kept.
    for mut f in frames.drain() {
        writer
            .append_in_place(&mut f)
            .wrap_err("recording stopped")?;
    }
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
