//! The engine: a sampling thread that ticks the sampler on a fixed grid,
//! runs the pipeline of enrichers and the analysis on each frame, and hands
//! frames to one consumer through a queue with that consumer's delivery
//! policy, or to a last stage on the sampling thread itself
//! ([`Pipeline::finish_with`]). The UI thread never samples.
//!
//! ```text
//! Sampler::tick -> Pipeline (enrichers, in order) -> Analysis -> Queue -> sink
//!                                                             \-> finish (on the thread)
//! ```

mod clock;
mod queue;
pub mod stages;

pub use queue::{Delivery, Recv};

use crate::analysis::{Analysis, AnalysisConfig};
use crate::model::{Event, EventKind, Frame};
use crate::sampler::{Sampler, SamplerConfig};
use crate::sources::Enricher;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The enrichers that add to each frame after the sampler, in order. Built
/// in one place by the binary (probes, NVML, a demo job's step times).
#[derive(Default)]
pub struct Pipeline {
    stages: Vec<Box<dyn Enricher>>,
    /// The analysis that judges each enriched frame.
    pub analysis: AnalysisConfig,
    /// Takes each judged frame on the sampling thread instead of the queue.
    finish: Option<Finish>,
    /// Where each tick's stage times go, when asked ([`stages`]).
    pub stage_times: Option<stages::StageTimes>,
}

/// A consumer run on the sampling thread as the pipeline's last stage
/// (`record` encodes and writes each frame there, `serve` adds it to the
/// exporter's totals): no other thread is woken per tick, which cost
/// `record` ~5 % of its CPU and `serve` ~11 % on the 8-rank ring. False
/// stops sampling. It must not block for long: a tick waits for it.
pub type Finish = Box<dyn FnMut(&mut Frame) -> bool + Send>;

impl Pipeline {
    pub fn new() -> Self {
        Pipeline::default()
    }

    pub fn push(&mut self, stage: Box<dyn Enricher>) {
        self.stages.push(stage);
    }

    /// The stages' names, in order.
    pub fn names(&self) -> Vec<&'static str> {
        self.stages.iter().map(|s| s.name()).collect()
    }

    /// Hands each frame to `finish` on the sampling thread: the queue then
    /// delivers none, and closes when sampling ends.
    pub fn finish_with(&mut self, finish: Finish) {
        self.finish = Some(finish);
    }

    fn run(&mut self, frame: &mut Frame) {
        for s in &mut self.stages {
            s.enrich(frame);
        }
    }
}

/// How often a drive loop looks at its stop flag while no frame comes.
const POLL_STOP: Duration = Duration::from_millis(250);
/// The same when the flag's setter wakes the loop: only a backstop.
const WOKEN_POLL: Duration = Duration::from_secs(60);

pub struct Engine {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

/// The consumer's end: frames in order, per its delivery policy.
pub struct Frames {
    queue: Arc<queue::Queue>,
    /// Whoever sets the drive loop's stop flag wakes it ([`StopWaker`]):
    /// it then waits for frames alone instead of polling the flag.
    woken_on_stop: bool,
}

/// Wakes a drive loop to look at its stop flag at once; call it after
/// setting the flag.
#[derive(Clone)]
pub struct StopWaker(Arc<queue::Queue>);

impl StopWaker {
    pub fn wake(&self) {
        self.0.interrupt();
    }
}

/// Why a drive loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The stop flag was set (a signal) or the sink said it was done.
    Stopped,
    /// The requested duration passed.
    Elapsed,
    /// The sampling thread ended on its own (it died).
    SourceDied,
}

/// What makes frames at a steady interval: this node's sampler, or the
/// cluster view's reader of Prometheus.
pub trait FrameSource: Send {
    fn interval(&self) -> Duration;
    fn tick(&mut self) -> Frame;
}

impl FrameSource for Sampler {
    fn interval(&self) -> Duration {
        self.config().interval
    }
    fn tick(&mut self) -> Frame {
        Sampler::tick(self)
    }
}

impl Engine {
    /// Starts sampling this node; frames arrive on the returned [`Frames`].
    pub fn start(cfg: SamplerConfig, pipeline: Pipeline, delivery: Delivery) -> (Engine, Frames) {
        Engine::start_source(Box::new(Sampler::new(cfg)), pipeline, delivery)
    }

    /// Starts any frame source (the same pipeline, analysis and delivery).
    pub fn start_source(
        source: Box<dyn FrameSource>,
        pipeline: Pipeline,
        delivery: Delivery,
    ) -> (Engine, Frames) {
        let cfg = source;
        let q = Arc::new(queue::Queue::new(delivery));
        let stop = Arc::new(AtomicBool::new(false));
        let (stop2, q2) = (stop.clone(), q.clone());
        let handle = std::thread::Builder::new()
            .name("kitty-sampler".into())
            .spawn(move || {
                run(cfg, pipeline, &q2, &stop2);
                q2.close();
            })
            .expect("spawn sampler thread");
        (
            Engine {
                stop,
                handle: Some(handle),
            },
            Frames {
                queue: q,
                woken_on_stop: false,
            },
        )
    }

    /// Stops sampling and waits for the thread; frames already queued stay
    /// readable.
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            // The sampler parks between ticks: wake it to see the flag.
            h.thread().unpark();
            let _ = h.join();
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Frames {
    /// A waker for `drive`'s stop flag. From then on `drive` does not poll
    /// the flag (a wakeup every 250 ms while frames come every 500): the
    /// one who sets it must call [`StopWaker::wake`].
    pub fn stop_waker(&mut self) -> StopWaker {
        self.woken_on_stop = true;
        StopWaker(self.queue.clone())
    }

    pub fn recv_timeout(&self, wait: Duration) -> Recv {
        self.queue.recv_timeout(wait)
    }

    /// Frames already queued, without waiting.
    pub fn drain(&self) -> Vec<Frame> {
        let mut out = Vec::new();
        while let Recv::Frame(f) = self.queue.recv_timeout(Duration::ZERO) {
            out.push(*f);
        }
        out
    }

    /// The one receive loop of every sink: hands each frame to `sink` until
    /// `stop` is set, `until` has passed, the sink breaks, or the sampler
    /// dies.
    pub fn drive<E>(
        &self,
        stop: &AtomicBool,
        until: Option<Duration>,
        mut sink: impl FnMut(Frame) -> Result<ControlFlow<()>, E>,
    ) -> Result<End, E> {
        let start = Instant::now();
        loop {
            if stop.load(Ordering::SeqCst) {
                return Ok(End::Stopped);
            }
            let left = until.map(|d| d.saturating_sub(start.elapsed()));
            if left == Some(Duration::ZERO) {
                return Ok(End::Elapsed);
            }
            // Unless whoever sets `stop` wakes the queue (`stop_waker`),
            // it is polled, at a quarter second (a wakeup costs a context
            // switch; a stop within 250 ms is soon enough); `until` is
            // kept to the millisecond.
            let poll = if self.woken_on_stop {
                WOKEN_POLL
            } else {
                POLL_STOP
            };
            let wait = left.map_or(poll, |l| l.min(poll));
            match self.recv_timeout(wait) {
                Recv::Frame(f) => {
                    if sink(*f)?.is_break() {
                        return Ok(End::Stopped);
                    }
                }
                Recv::Timeout => {}
                Recv::Closed => return Ok(End::SourceDied),
            }
        }
    }
}

impl Drop for Frames {
    fn drop(&mut self) {
        self.queue.abandon();
    }
}

fn run(
    mut sampler: Box<dyn FrameSource>,
    mut pipeline: Pipeline,
    q: &queue::Queue,
    stop: &AtomicBool,
) {
    let interval = sampler.interval();
    let mut ticker = clock::Ticker::new(interval);
    let mut analysis = Analysis::new(pipeline.analysis.clone());
    let mut missed = 0;
    let mut clock = stages::TickClock::new(pipeline.stage_times.take());
    while !stop.load(Ordering::SeqCst) {
        clock.start();
        let mut frame = sampler.tick();
        clock.lap();
        if missed > 0 {
            frame.missed_ticks = missed;
            let secs = (missed as f64 + 1.0) * interval.as_secs_f64();
            frame.events.push(Event::new(
                frame.wall_ns,
                EventKind::SamplingGap,
                format!("sampling stalled for about {secs:.1} s: {missed} ticks skipped"),
            ));
        }
        pipeline.run(&mut frame);
        clock.lap();
        analysis.apply(&mut frame);
        clock.lap();
        let delivered = match pipeline.finish.as_mut() {
            Some(finish) => {
                let taken = finish(&mut frame);
                drop(frame);
                taken
            }
            None => q.push(frame, stop),
        };
        clock.lap();
        clock.end();
        if !delivered {
            return;
        }
        missed = ticker.wait(stop);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Sig, Text};
    use crate::sinks::record::{Reader, Writer};

    /// An enricher that offers values no frame may hold.
    struct Poison;

    impl Enricher for Poison {
        fn name(&self) -> &'static str {
            "poison"
        }
        fn enrich(&mut self, f: &mut Frame) {
            // Signals the sampler itself never sets.
            f.host.signals.set(Sig::ExecsPerS, f64::NAN);
            f.host.signals.set(Sig::FlowCoveragePct, f64::INFINITY);
            f.host.signals.set(Sig::TcpClosedPerS, 3.0);
            f.job_step_ms.set(Text::new("j"), f64::NEG_INFINITY);
            for r in &mut f.ranks {
                r.signals.set(Sig::RunDelayMsPerS, f64::NAN);
            }
        }
    }

    fn cfg(interval_ms: u64) -> SamplerConfig {
        SamplerConfig {
            interval: Duration::from_millis(interval_ms),
            ..SamplerConfig::default()
        }
    }

    fn take(frames: &Frames, n: usize) -> Vec<Frame> {
        let mut out = Vec::new();
        let stop = AtomicBool::new(false);
        let _ = frames.drive(&stop, Some(Duration::from_secs(20)), |f| {
            out.push(f);
            Ok::<_, ()>(if out.len() >= n {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            })
        });
        out
    }

    #[test]
    fn non_finite_values_from_an_enricher_never_reach_a_recording() {
        let mut p = Pipeline::new();
        p.push(Box::new(Poison));
        let (mut engine, frames) = Engine::start(cfg(50), p, Delivery::Lossless);
        let got = take(&frames, 4);
        engine.stop();
        assert_eq!(got.len(), 4);
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("poison.kitty");
        let header = crate::sinks::record::Header::now("n", Duration::from_millis(50));
        let mut w = Writer::create(&path, &header).unwrap();
        for f in &got {
            w.append(f).unwrap();
        }
        w.finish().unwrap();
        let mut r = Reader::open(&path).unwrap();
        let (back, skipped) = r.read_all();
        assert!(skipped.is_empty(), "{skipped:?}");
        let recorded: Vec<_> = got
            .iter()
            .map(crate::sinks::record::digits::recorded)
            .collect();
        assert_eq!(back, recorded, "every frame replays as written");
        let h = &back[0].host.signals;
        assert_eq!(h.get(Sig::ExecsPerS), None, "NaN was never stored");
        assert_eq!(
            h.get(Sig::FlowCoveragePct),
            None,
            "infinity was never stored"
        );
        assert_eq!(h.get(Sig::TcpClosedPerS), Some(3.0));
        assert!(back
            .iter()
            .all(|f| f.host.signals.iter().all(|(_, v)| v.is_finite())));
        assert!(back[0].job_step_ms.is_empty());
    }

    /// `record`'s way: the last stage takes every frame, in order, on the
    /// sampling thread; none reaches the queue; its false stops sampling,
    /// which the consumer sees as the source's end.
    #[test]
    fn a_finishing_stage_takes_every_frame_on_the_sampling_thread_and_can_stop_it() {
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut p = Pipeline::new();
        let log = seen.clone();
        p.finish_with(Box::new(move |f| {
            let mut log = log.lock().unwrap();
            let thread = std::thread::current().name().map(String::from);
            log.push((f.seq, thread));
            log.len() < 5
        }));
        let (mut engine, frames) = Engine::start(cfg(50), p, Delivery::Lossless);
        let stop = AtomicBool::new(false);
        let end = frames.drive(&stop, Some(Duration::from_secs(30)), |_| {
            Err::<ControlFlow<()>, _>("a frame reached the queue")
        });
        engine.stop();
        assert_eq!(end, Ok(End::SourceDied));
        let seen = seen.lock().unwrap();
        let seqs: Vec<u64> = seen.iter().map(|s| s.0).collect();
        assert_eq!(seqs, [0, 1, 2, 3, 4]);
        assert!(seen.iter().all(|s| s.1.as_deref() == Some("kitty-sampler")));
    }

    #[test]
    fn stage_times_asked_for_give_a_line_for_each_tick_sampled() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("stages");
        let mut p = Pipeline::new();
        p.stage_times = Some(stages::StageTimes::to_file(&path).unwrap());
        let mut n = 0;
        p.finish_with(Box::new(move |_| {
            n += 1;
            n < 4
        }));
        let (mut engine, frames) = Engine::start(cfg(50), p, Delivery::Lossless);
        let stop = AtomicBool::new(false);
        let end = frames.drive(&stop, Some(Duration::from_secs(30)), |_| {
            Ok::<_, ()>(ControlFlow::Continue(()))
        });
        engine.stop();
        assert_eq!(end, Ok(End::SourceDied));
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], stages::HEADER);
        assert_eq!(lines.len(), 1 + 4, "{text}");
        for l in &lines[1..] {
            let ns: Vec<u64> = l.split(' ').map(|x| x.parse().unwrap()).collect();
            // A tick of the sampler reads /proc: never free.
            assert!(ns.len() == 4 && ns[0] > 0, "{l}");
        }
    }

    #[test]
    fn a_lossless_consumer_slower_than_the_interval_loses_no_frame() {
        let (mut engine, frames) = Engine::start(cfg(50), Pipeline::new(), Delivery::Lossless);
        let mut seqs = Vec::new();
        for f in take(&frames, 12) {
            // Four intervals per frame: the queue fills, the sampler waits.
            std::thread::sleep(Duration::from_millis(200));
            seqs.push(f.seq);
        }
        engine.stop();
        let want: Vec<u64> = (seqs[0]..seqs[0] + seqs.len() as u64).collect();
        assert_eq!(seqs, want, "no frame dropped");
    }

    #[test]
    fn a_latest_consumer_skips_frames_and_is_told_how_many() {
        let (mut engine, frames) = Engine::start(cfg(50), Pipeline::new(), Delivery::Latest);
        // Let more than the queue's room accrue unread.
        std::thread::sleep(Duration::from_millis(600));
        let got = take(&frames, 2);
        engine.stop();
        let dropped: u64 = got.iter().map(|f| f.dropped_frames).sum();
        assert!(dropped > 0, "frames were skipped and counted");
        let gap = got[1].seq - got[0].seq - 1;
        assert!(got[0].seq >= dropped, "the skipped frames came before");
        assert_eq!(
            got[1].dropped_frames, gap,
            "each delivery counts its own drops"
        );
    }

    #[test]
    fn a_drive_loop_with_a_stop_waker_stops_when_woken_not_at_its_poll() {
        // A 30 s interval: no frame comes to end the wait after the first.
        let (mut engine, mut frames) =
            Engine::start(cfg(30_000), Pipeline::new(), Delivery::Lossless);
        let waker = frames.stop_waker();
        let stop = Arc::new(AtomicBool::new(false));
        let setter = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(300));
                stop.store(true, Ordering::SeqCst);
                waker.wake();
            })
        };
        let t = std::time::Instant::now();
        let end = frames.drive(&stop, None, |_| Ok::<_, ()>(ControlFlow::Continue(())));
        setter.join().unwrap();
        engine.stop();
        assert_eq!(end, Ok(End::Stopped));
        // Unwoken it would have slept for its backstop (60 s).
        assert!(t.elapsed() < WOKEN_POLL / 2, "{:?}", t.elapsed());
    }

    #[test]
    fn a_wake_before_the_wait_is_not_lost() {
        let q = queue::Queue::new(Delivery::Lossless);
        q.interrupt();
        assert!(matches!(
            q.recv_timeout(Duration::from_secs(60)),
            Recv::Timeout
        ));
        // Taken by that wait: the next one waits as asked.
        assert!(matches!(
            q.recv_timeout(Duration::from_millis(10)),
            Recv::Timeout
        ));
        let stop = AtomicBool::new(false);
        q.interrupt();
        assert!(q.push(Frame::default(), &stop));
        // A frame there is delivered rather than the wake.
        assert!(matches!(
            q.recv_timeout(Duration::from_secs(60)),
            Recv::Frame(_)
        ));
    }
}
