//! `demo`: starts the demo job, then watches it in the TUI (optionally
//! recording) or headless for a snapshot. The job's processes die with it.

use crate::cli::DemoCmd;
use crate::demo::{self, DemoError};
use crate::error::UsageError;
use crate::pipeline;
use color_eyre::eyre::Result;

pub fn run(a: DemoCmd) -> Result<i32> {
    let cfg = pipeline::sampler_config(&a.sampling)?;
    let rec = super::live::recorder(a.record.as_deref(), a.force, &cfg.node, cfg.interval)?;
    let job = demo::start(&a.demo, a.fault_after).map_err(|e| match e {
        DemoError::Ranks | DemoError::NeedsRoot | DemoError::NoLab => UsageError::new(e).into(),
        e => color_eyre::eyre::Report::from(e),
    })?;
    let mut p = pipeline::build(&a.sampling, &cfg);
    p.push(Box::new(job.step_times()));
    let code = match a.headless {
        Some(d) => {
            super::snapshot::run_with(Box::new(kitty_core::sampler::Sampler::new(cfg)), p, d, rec)
        }
        None => Ok(crate::tui::run_live(
            Box::new(kitty_core::sampler::Sampler::new(cfg)),
            p,
            rec,
        )?),
    };
    drop(job);
    code
}
