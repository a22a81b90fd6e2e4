//! `snapshot --json`: sample for a while, print the final frame as JSON.

use kitty_core::engine::{Engine, Enricher};
use kitty_core::sampler::SamplerConfig;
use std::time::{Duration, Instant};

pub fn run(cfg: SamplerConfig, duration: Duration) -> super::Result<i32> {
    run_with(cfg, duration, Vec::new())
}

/// The same, with extra sources (the demo adds its job's step times).
pub fn run_with(
    cfg: SamplerConfig,
    duration: Duration,
    enrichers: Vec<Box<dyn Enricher>>,
) -> super::Result<i32> {
    let stop = super::stop_flag();
    let (mut engine, rx) = Engine::start(cfg, enrichers);
    let start = Instant::now();
    let mut last = None;
    // At least two frames, so rates exist.
    let mut n = 0;
    while (start.elapsed() < duration || n < 2) && !stop.load(std::sync::atomic::Ordering::SeqCst) {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(f) => {
                last = Some(f);
                n += 1;
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(_) => return Err("the sampling thread died".into()),
        }
    }
    engine.stop();
    let frame = last.ok_or("no frame was sampled")?;
    let doc = kitty_core::snapshot::snapshot_json(&frame);
    println!("{}", serde_json::to_string_pretty(&doc).expect("json"));
    Ok(0)
}
