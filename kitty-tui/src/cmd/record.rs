//! `record`: headless recorder. Exits non-zero if the sampling thread died.

use kitty_core::engine::{Engine, Enricher};
use kitty_core::record::Writer;
use kitty_core::sampler::SamplerConfig;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

pub fn run(
    cfg: SamplerConfig,
    enrichers: Vec<Box<dyn Enricher>>,
    output: &Path,
    duration: Option<Duration>,
) -> super::Result<i32> {
    let mut writer = Writer::create(output, &super::header_for(&cfg)).map_err(|e| e.to_string())?;
    let stop = super::stop_flag();
    let (mut engine, rx) = Engine::start(cfg, enrichers);
    let start = Instant::now();
    let mut code = 0;
    loop {
        if stop.load(Ordering::SeqCst) || duration.is_some_and(|d| start.elapsed() >= d) {
            break;
        }
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(frame) => {
                if let Err(e) = writer.append(&frame) {
                    eprintln!("kitty-tui: {e}");
                    code = 1;
                    break;
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                eprintln!(
                    "kitty-tui: the sampling thread died; {} frames were saved",
                    writer.frames()
                );
                code = 1;
                break;
            }
        }
    }
    engine.stop();
    // Frames already produced but not yet written are kept.
    while let Ok(frame) = rx.try_recv() {
        let _ = writer.append(&frame);
    }
    let (frames, bytes) = (writer.frames(), writer.bytes());
    writer.finish().map_err(|e| e.to_string())?;
    eprintln!(
        "kitty-tui: recorded {frames} frames ({bytes} bytes) to {}",
        output.display()
    );
    Ok(code)
}
