//! `cluster`: the live TUI (or one JSON document) over every node's series
//! in Prometheus. The same pipeline judges the frames; only the source
//! differs.

use crate::cli::ClusterArgs;
use crate::error::UsageError;
use color_eyre::eyre::Result;
use kitty_core::engine::Pipeline;
use kitty_core::sampler::cluster::{ClusterConfig, ClusterSampler};
use kitty_core::sources::prometheus::{PromConfig, PromError, Prometheus};

pub fn run(a: ClusterArgs) -> Result<i32> {
    let prom = Prometheus::new(PromConfig {
        url: a.prometheus.clone(),
        bearer_token_file: a.bearer_token_file.clone(),
        basic_auth: a
            .basic_auth_user
            .clone()
            .zip(a.basic_auth_password_file.clone()),
        ca_file: a.ca_file.clone(),
        timeout: a.timeout,
    })
    .map_err(|e| match e {
        PromError::Config(why) => color_eyre::eyre::Report::from(UsageError(why)),
        e => e.into(),
    })?;
    let cfg = ClusterConfig {
        interval: a.interval,
        window: a.window,
        stale_after: a.stale_after,
        job: a.job.clone(),
        node_selector: a.node_selector.clone(),
    };
    // A script asking for the cluster's state gets a failure, not an empty
    // document, when Prometheus does not answer at all (the TUI shows the
    // error on screen and keeps trying).
    if a.json {
        prom.query("vector(1)")?;
    }
    let source = Box::new(ClusterSampler::new(prom, cfg));
    let host = format!("cluster via {}", source.url());
    let rec = super::live::recorder(a.record.as_deref(), a.force, &host, a.interval)?;
    if a.json {
        return super::snapshot::run_with(source, Pipeline::new(), a.duration.max(a.interval), rec);
    }
    Ok(crate::tui::run_live(source, Pipeline::new(), rec)?)
}
