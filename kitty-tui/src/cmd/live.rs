//! The live TUI on this node (no subcommand), optionally recording.

use super::check_output;
use crate::cli::LiveArgs;
use crate::pipeline;
use color_eyre::eyre::Result;
use kitty_core::sinks::files::{self as output, Kind, Target};
use kitty_core::sinks::record::{Header, Sink, Writer};

/// The recorder of `--record FILE`, checked and opened before sampling; as
/// `record` without `--histograms`, it leaves each tick's latency
/// histograms out (the view still draws them live).
pub fn recorder(
    path: Option<&std::path::Path>,
    force: bool,
    host: &str,
    interval: std::time::Duration,
) -> Result<Option<(Writer, String)>> {
    let Some(p) = path else { return Ok(None) };
    let Target::File(p) = check_output(p, Kind::Recording, force)? else {
        return Err(crate::error::UsageError::new(
            "--record - would write into the terminal the TUI draws on; use `record -o -`",
        )
        .into());
    };
    let file = output::create_in_place(&p)?;
    let name = p.display().to_string();
    let w = Writer::new(
        Sink::File(file),
        name.clone(),
        &Header::now(host, interval).with_histograms(false),
    )?;
    Ok(Some((w, name)))
}

pub fn run(a: LiveArgs) -> Result<i32> {
    let cfg = pipeline::sampler_config(&a.sampling)?;
    let rec = recorder(a.record.as_deref(), a.force, &cfg.node, cfg.interval)?;
    let p = pipeline::build(&a.sampling, &cfg);
    Ok(crate::tui::run_live(
        Box::new(kitty_core::sampler::Sampler::new(cfg)),
        p,
        rec,
    )?)
}
