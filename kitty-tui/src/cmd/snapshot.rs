//! `snapshot --json`: sample for a while, print the final frame as JSON
//! (with every event of the run).

use kitty_core::engine::{Engine, Enricher};
use kitty_core::sampler::SamplerConfig;
use std::time::{Duration, Instant};

/// Samples for `duration` with these extra sources (probes, the demo's step
/// times) and prints the final state.
pub fn run_with(
    cfg: SamplerConfig,
    duration: Duration,
    enrichers: Vec<Box<dyn Enricher>>,
) -> super::Result<i32> {
    let stop = super::stop_flag();
    let (mut engine, rx) = Engine::start(cfg, enrichers);
    let start = Instant::now();
    let mut last: Option<kitty_core::frame::Frame> = None;
    // Events happen in one frame each: keep all of them for the document.
    let mut events = Vec::new();
    // At least two frames, so rates exist.
    let mut n = 0;
    while (start.elapsed() < duration || n < 2) && !stop.load(std::sync::atomic::Ordering::SeqCst) {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(f) => {
                events.extend(f.events.iter().cloned());
                last = Some(f);
                n += 1;
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(_) => return Err("the sampling thread died".into()),
        }
    }
    engine.stop();
    let mut frame = last.ok_or("no frame was sampled")?;
    frame.events = events;
    let doc = kitty_core::snapshot::snapshot_json(&frame);
    println!("{}", serde_json::to_string_pretty(&doc).expect("json"));
    Ok(0)
}
