//! The terminal UI: one event channel (input, frames, signals) feeding the
//! app; a redraw only when something changed. The terminal is restored on
//! quit, panic, SIGINT, SIGTERM and SIGHUP.

pub mod app;
pub mod draw;
mod flame;
pub mod keymap;
mod netview;
#[cfg(test)]
mod tests;

use app::{App, ReplayState};
use crossterm::event::{Event as TermEvent, KeyEventKind};
use crossterm::{cursor, execute, terminal};
use kitty_core::engine::{Engine, Enricher};
use kitty_core::frame::Frame;
use kitty_core::record::Writer;
use kitty_core::sampler::SamplerConfig;
use ratatui::backend::CrosstermBackend;
use ratatui::Terminal;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

enum Msg {
    Input(TermEvent),
    Frame(Box<Frame>),
    SourceDied,
    Signal,
}

/// Restores the terminal when dropped (normal exit, error or panic unwind).
struct TermGuard;

fn restore_terminal() {
    let _ = terminal::disable_raw_mode();
    let _ = execute!(
        std::io::stdout(),
        terminal::LeaveAlternateScreen,
        cursor::Show
    );
}

impl Drop for TermGuard {
    fn drop(&mut self) {
        restore_terminal();
    }
}

fn enter_terminal() -> crate::cmd::Result<(TermGuard, Terminal<CrosstermBackend<std::io::Stdout>>)>
{
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore_terminal();
        prev(info);
    }));
    terminal::enable_raw_mode().map_err(|e| format!("cannot use this terminal: {e}"))?;
    let guard = TermGuard;
    execute!(
        std::io::stdout(),
        terminal::EnterAlternateScreen,
        cursor::Hide
    )
    .map_err(|e| e.to_string())?;
    let term =
        Terminal::new(CrosstermBackend::new(std::io::stdout())).map_err(|e| e.to_string())?;
    Ok((guard, term))
}

fn spawn_input(tx: mpsc::Sender<Msg>) {
    std::thread::spawn(move || {
        while let Ok(ev) = crossterm::event::read() {
            if tx.send(Msg::Input(ev)).is_err() {
                return;
            }
        }
    });
}

fn spawn_signals(tx: mpsc::Sender<Msg>) {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    if let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) {
        std::thread::spawn(move || {
            if signals.forever().next().is_some() {
                let _ = tx.send(Msg::Signal);
            }
        });
    }
}

pub fn run_live(
    cfg: SamplerConfig,
    record: Option<PathBuf>,
    enrichers: Vec<Box<dyn Enricher>>,
) -> crate::cmd::Result<i32> {
    let keymap = keymap::KeyMap::load()?;
    // The recorder lives on the forwarding thread, so pausing the view never pauses recording.
    let mut writer = match &record {
        Some(p) => {
            Some(Writer::create(p, &crate::cmd::header_for(&cfg)).map_err(|e| e.to_string())?)
        }
        None => None,
    };
    let mut app = App::new(keymap, cfg.interval);
    app.recording = record.as_ref().map(|p| p.display().to_string());
    let (tx, rx) = mpsc::channel();
    let (mut engine, frames) = Engine::start(cfg, enrichers);
    let ftx = tx.clone();
    let forwarder = std::thread::spawn(move || {
        for f in frames {
            if let Some(w) = writer.as_mut() {
                if let Err(e) = w.append(&f) {
                    eprintln!("kitty-tui: recording stopped: {e}");
                    writer = None;
                }
            }
            if ftx.send(Msg::Frame(Box::new(f))).is_err() {
                break;
            }
        }
        if let Some(w) = writer {
            let _ = w.finish();
        }
        let _ = ftx.send(Msg::SourceDied);
    });
    let (guard, mut term) = enter_terminal()?;
    spawn_input(tx.clone());
    spawn_signals(tx.clone());
    let result = event_loop(&mut app, &mut term, &rx);
    drop(term);
    drop(guard);
    engine.stop();
    let _ = forwarder.join();
    result
}

pub fn run_replay(file: &Path) -> crate::cmd::Result<i32> {
    let reader = crate::cmd::replay_open(file)?;
    if reader.is_empty() {
        return Err(format!(
            "{}: no readable frame in the recording",
            file.display()
        ));
    }
    let keymap = keymap::KeyMap::load()?;
    let interval = Duration::from_millis(reader.header().interval_ms.max(1));
    let mut app = App::new(keymap, interval);
    app.replay = Some(ReplayState {
        reader,
        pos: 0,
        playing: true,
        speed: 1.0,
    });
    app.replay_show(0);
    let (tx, rx) = mpsc::channel();
    let (guard, mut term) = enter_terminal()?;
    spawn_input(tx.clone());
    spawn_signals(tx);
    let result = event_loop(&mut app, &mut term, &rx);
    drop(term);
    drop(guard);
    result
}

/// When the next replay frame is due, if playing.
fn replay_due(app: &App, shown_at: Instant) -> Option<Instant> {
    let r = app.replay.as_ref()?;
    if !r.playing || r.pos + 1 >= r.reader.len() {
        return None;
    }
    let idx = r.reader.index();
    let dt = idx[r.pos + 1].mono_ns.saturating_sub(idx[r.pos].mono_ns) as f64 / 1e9 / r.speed;
    Some(shown_at + Duration::from_secs_f64(dt.min(10.0)))
}

fn event_loop<B: ratatui::backend::Backend>(
    app: &mut App,
    term: &mut Terminal<B>,
    rx: &mpsc::Receiver<Msg>,
) -> crate::cmd::Result<i32> {
    let mut dirty = true;
    let mut shown_at = Instant::now();
    loop {
        if dirty {
            term.draw(|f| draw::draw(f, app))
                .map_err(|e| e.to_string())?;
            dirty = false;
        }
        if app.quit {
            return Ok(0);
        }
        let msg = match replay_due(app, shown_at) {
            Some(due) => match rx.recv_timeout(due.saturating_duration_since(Instant::now())) {
                Ok(m) => Some(m),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => return Ok(0),
            },
            None => match rx.recv() {
                Ok(m) => Some(m),
                Err(_) => return Ok(0),
            },
        };
        if app.poll_profile() {
            dirty = true;
        }
        match msg {
            None => {
                // A replay frame is due.
                let next = app.replay.as_ref().map_or(0, |r| r.pos + 1);
                app.replay_show(next);
                shown_at = Instant::now();
                dirty = true;
            }
            Some(Msg::Input(TermEvent::Key(k))) if k.kind != KeyEventKind::Release => {
                let before = app.replay.as_ref().map(|r| r.pos);
                app.on_key(k);
                if app.replay.as_ref().map(|r| r.pos) != before {
                    shown_at = Instant::now();
                }
                dirty = true;
            }
            Some(Msg::Input(TermEvent::Resize(..))) => dirty = true,
            Some(Msg::Input(_)) => {}
            Some(Msg::Frame(f)) => {
                app.on_frame(*f);
                dirty = !app.paused || app.frame.is_none();
            }
            Some(Msg::SourceDied) => {
                app.message = Some("the sampling thread stopped; press q to quit".into());
                dirty = true;
            }
            Some(Msg::Signal) => return Ok(0),
        }
    }
}
