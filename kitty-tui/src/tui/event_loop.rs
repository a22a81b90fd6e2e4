//! The event loop: one channel carries input, frames and signals into the
//! app (bottom's habit); the screen is redrawn only when something changed;
//! what the app asks for (a profile, writing it, a cluster drill-down) is
//! carried out here.

use super::app::{App, Request};
use super::driller::Driller;
use super::dumper::Dumper;
use super::profiler::{self, Profiler};
use super::views;
use crossterm::event::{Event as TermEvent, KeyEventKind};
use kitty_core::model::Frame;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub enum Msg {
    Input(TermEvent),
    /// A frame is waiting in the [`Latest`] slot.
    FrameReady,
    SourceDied,
    Signal,
}

/// The newest frame for the view: a new one replaces an unread one, and the
/// replaced frames are counted, so a slow view stays current and says so.
#[derive(Default)]
pub struct Latest(Mutex<(Option<Frame>, u64)>);

impl Latest {
    /// Puts a frame in; true when the slot was empty (the loop must be told).
    pub fn put(&self, f: Frame) -> bool {
        let mut s = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let was_empty = s.0.is_none();
        if !was_empty {
            s.1 += 1;
        }
        s.0 = Some(f);
        was_empty
    }

    /// The frame, with the frames it replaced added to its drop count.
    pub fn take(&self) -> Option<Frame> {
        let mut s = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let mut f = s.0.take()?;
        f.dropped_frames += std::mem::take(&mut s.1);
        Some(f)
    }
}

pub fn spawn_input(tx: mpsc::Sender<Msg>) {
    std::thread::spawn(move || {
        while let Ok(ev) = crossterm::event::read() {
            if tx.send(Msg::Input(ev)).is_err() {
                return;
            }
        }
    });
}

pub fn spawn_signals(tx: mpsc::Sender<Msg>) {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    if let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) {
        std::thread::spawn(move || {
            if signals.forever().next().is_some() {
                let _ = tx.send(Msg::Signal);
            }
        });
    }
}

/// Carries out what the app asked for.
fn serve_requests<B: ratatui::backend::Backend>(
    app: &mut App,
    term: &mut ratatui::Terminal<B>,
    profiler: &mut Profiler,
    driller: &mut Driller,
    dumper: &mut Dumper,
) -> std::io::Result<()> {
    for r in app.take_requests() {
        match r {
            Request::Redraw => {
                term.clear()?;
                term.draw(|f| views::draw(f, app))?;
            }
            Request::Profile { pid, name } => {
                let p = profiler.start(pid, name);
                app.profile_started(p);
            }
            Request::WriteProfile => {
                if let Some(fl) = app.flame() {
                    let said = profiler::write(fl.profile(), fl.per_thread);
                    app.profile_written(said);
                }
            }
            Request::Drill {
                key,
                endpoint,
                job,
                rank,
            } => driller.start(key, endpoint, job, rank),
            Request::FlightRecorder(targets) => dumper.start(targets),
        }
    }
    Ok(())
}

pub fn run<B: ratatui::backend::Backend>(
    app: &mut App,
    term: &mut ratatui::Terminal<B>,
    rx: &mpsc::Receiver<Msg>,
    latest: &Arc<Latest>,
) -> std::io::Result<i32> {
    let mut dirty = true;
    let mut shown_at = Instant::now();
    let mut profiler = Profiler::default();
    let mut driller = Driller::default();
    let mut dumper = Dumper::default();
    loop {
        if dirty {
            term.draw(|f| views::draw(f, app))?;
            dirty = false;
        }
        if app.should_quit() {
            return Ok(0);
        }
        // Wake for the next replay frame, or to watch a running profile.
        let replay_due = app
            .replay()
            .and_then(|r| r.next_due())
            .map(|d| shown_at + d);
        let profile_tick = (profiler.running() || driller.running() || dumper.running())
            .then(|| Instant::now() + Duration::from_millis(200));
        let wake = match (replay_due, profile_tick) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let msg = match wake {
            Some(w) => match rx.recv_timeout(w.saturating_duration_since(Instant::now())) {
                Ok(m) => Some(m),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => return Ok(0),
            },
            None => match rx.recv() {
                Ok(m) => Some(m),
                Err(_) => return Ok(0),
            },
        };
        if let Some(res) = profiler.poll() {
            app.profile_finished(res);
            dirty = true;
        } else if profiler.running() {
            dirty = true;
        }
        if let Some((key, r)) = driller.poll() {
            app.drill_finished(key, r);
            dirty = true;
        }
        if let Some(answers) = dumper.poll() {
            app.dumps_finished(answers);
            dirty = true;
        }
        match msg {
            None => {
                if replay_due.is_some_and(|d| Instant::now() >= d) {
                    app.replay_advance();
                    shown_at = Instant::now();
                    dirty = true;
                }
            }
            Some(Msg::Input(TermEvent::Key(k))) if k.kind != KeyEventKind::Release => {
                let before = app.replay().map(|r| r.pos());
                app.on_key(k);
                if app.replay().map(|r| r.pos()) != before {
                    shown_at = Instant::now();
                }
                dirty = true;
            }
            Some(Msg::Input(TermEvent::Resize(..))) => dirty = true,
            Some(Msg::Input(TermEvent::Mouse(m))) => dirty = app.on_mouse(m),
            Some(Msg::Input(_)) => {}
            Some(Msg::FrameReady) => {
                if let Some(f) = latest.take() {
                    app.on_frame(f);
                    dirty = !app.is_paused() || app.frame().is_none();
                }
            }
            Some(Msg::SourceDied) => {
                app.set_message("the sampling thread stopped; press q to quit");
                dirty = true;
            }
            Some(Msg::Signal) => return Ok(0),
        }
        serve_requests(app, term, &mut profiler, &mut driller, &mut dumper)?;
    }
}
