//! The engine: a sampling thread that ticks the sampler at a fixed interval,
//! runs the analysis on each frame and hands frames to the sinks over a
//! channel. The UI thread never samples.

use crate::analysis::Analysis;
use crate::frame::Frame;
use crate::sampler::{Sampler, SamplerConfig};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub struct Engine {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

/// Something besides procfs that adds to each frame (GPU, probes, the demo's
/// own step times). Runs on the sampling thread; must not block for long.
pub trait Enricher: Send {
    fn enrich(&mut self, frame: &mut Frame);
}

impl Engine {
    /// Starts sampling; frames arrive on the returned receiver. A slow
    /// consumer is never waited on for long: the channel holds a few frames
    /// and the oldest unsent one is dropped past that.
    pub fn start(
        cfg: SamplerConfig,
        mut enrichers: Vec<Box<dyn Enricher>>,
    ) -> (Engine, Receiver<Frame>) {
        if let Some(n) = &cfg.nvml {
            let nvml = crate::sources::nvml::NvmlSource::start(
                n.lib_path.clone(),
                cfg.interval,
                cfg.roots.proc.clone(),
            );
            enrichers.push(Box::new(nvml));
        }
        let (tx, rx) = std::sync::mpsc::sync_channel(64);
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let handle = std::thread::Builder::new()
            .name("kitty-sampler".into())
            .spawn(move || run(cfg, &mut enrichers, tx, stop2))
            .expect("spawn sampler thread");
        (
            Engine {
                stop,
                handle: Some(handle),
            },
            rx,
        )
    }

    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.stop();
    }
}

fn run(
    cfg: SamplerConfig,
    enrichers: &mut [Box<dyn Enricher>],
    tx: SyncSender<Frame>,
    stop: Arc<AtomicBool>,
) {
    let interval = cfg.interval;
    let mut sampler = Sampler::new(cfg);
    let mut analysis = Analysis::default();
    let start = Instant::now();
    let mut n: u32 = 0;
    while !stop.load(Ordering::SeqCst) {
        let mut frame = sampler.tick();
        for e in enrichers.iter_mut() {
            e.enrich(&mut frame);
        }
        crate::links::attribute(&mut frame);
        analysis.apply(&mut frame);
        match tx.try_send(frame) {
            Ok(()) => {}
            Err(std::sync::mpsc::TrySendError::Full(_)) => {}
            Err(std::sync::mpsc::TrySendError::Disconnected(_)) => return,
        }
        n += 1;
        let next = start + interval * n;
        while !stop.load(Ordering::SeqCst) {
            let now = Instant::now();
            if now >= next {
                break;
            }
            std::thread::sleep((next - now).min(Duration::from_millis(50)));
        }
    }
}
