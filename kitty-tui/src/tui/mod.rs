//! The terminal UI: a live session over the engine (optionally recording
//! while viewing) or a replay of a recording, both drawn by the same views.
//!
//! - `app`: state and what each key does (no drawing, no I/O);
//! - `views`: one file per part of the screen, plus `theme` and `widgets`;
//! - `event_loop`: input, frames and signals into the app; carries out the
//!   app's requests (`profiler`);
//! - `terminal`: raw mode and the alternate screen, always restored;
//! - `keymap`: bindings and the file that changes them.

pub mod app;
mod driller;
mod dumper;
mod event_loop;
pub mod keymap;
pub mod profiler;
mod terminal;
#[cfg(test)]
mod tests;
pub mod theme;
pub mod views;
pub mod widgets;

use app::{App, ReplayState};
use event_loop::{Latest, Msg};
use kitty_core::engine::{Delivery, Engine, FrameSource, Pipeline};
use kitty_core::sinks::record::{Reader, RecordError, Writer};
use std::ops::ControlFlow;
use std::sync::mpsc;
use std::sync::Arc;

/// Why the TUI could not run.
#[derive(Debug, thiserror::Error)]
pub enum TuiError {
    #[error("cannot use this terminal: {0}")]
    Terminal(#[from] std::io::Error),
    #[error(transparent)]
    KeyMap(#[from] keymap::KeyMapError),
    #[error("{0}: no readable frame in the recording")]
    Empty(String),
    #[error(transparent)]
    Record(#[from] RecordError),
    #[error("--at: {0}")]
    At(String),
}

/// Session settings from the environment.
fn app(interval: std::time::Duration) -> Result<App, TuiError> {
    let km = keymap::KeyMap::load()?;
    let warning = match km.warnings() {
        [] => None,
        [w] => Some(w.clone()),
        [w, rest @ ..] => Some(format!("{w} (and {} more)", rest.len())),
    };
    let mut a = App::new(km, interval);
    if let Some(w) = warning {
        a.set_message(w);
    }
    a.set_color(std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()));
    a.set_kernel(
        kitty_core::sources::node::kernel_release()
            .map(|k| k.to_string())
            .unwrap_or_default(),
    );
    Ok(a)
}

/// The live TUI. With a recorder, every frame is recorded (lossless) on
/// the forwarding thread, so pausing or a slow view never loses one; the
/// view may skip frames to stay current, and says so.
pub fn run_live(
    source: Box<dyn FrameSource>,
    pipeline: Pipeline,
    recorder: Option<(Writer, String)>,
) -> Result<i32, TuiError> {
    let mut app = app(source.interval())?;
    app.set_recording(recorder.as_ref().map(|(_, name)| name.clone()));
    let delivery = if recorder.is_some() {
        Delivery::Lossless
    } else {
        Delivery::Latest
    };
    let (tx, rx) = mpsc::channel();
    let latest = Arc::new(Latest::default());
    let (mut engine, frames) = Engine::start_source(source, pipeline, delivery);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (ftx, flatest, fstop) = (tx.clone(), latest.clone(), stop.clone());
    let forwarder = std::thread::spawn(move || {
        let mut writer = recorder.map(|r| r.0);
        let _ = frames.drive(&fstop, None, |mut f| -> Result<_, ()> {
            if let Some(w) = writer.as_mut() {
                if let Err(e) = w.append_in_place(&mut f) {
                    let _ = ftx.send(Msg::SourceDied);
                    crate::say::line(format_args!("recording stopped: {e}"));
                    writer = None;
                }
            }
            if flatest.put(f) && ftx.send(Msg::FrameReady).is_err() {
                return Ok(ControlFlow::Break(()));
            }
            Ok(ControlFlow::Continue(()))
        });
        if let Some(mut w) = writer {
            for mut f in frames.drain() {
                let _ = w.append_in_place(&mut f);
            }
            let _ = w.finish();
        }
        let _ = ftx.send(Msg::SourceDied);
    });
    let (guard, mut term) = terminal::enter()?;
    event_loop::spawn_input(tx.clone());
    event_loop::spawn_signals(tx.clone());
    let result = event_loop::run(&mut app, &mut term, &rx, &latest);
    drop(term);
    drop(guard);
    engine.stop();
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let _ = forwarder.join();
    Ok(result?)
}

/// The same TUI over a recording.
pub fn run_replay(
    reader: Reader,
    name: &str,
    at: Option<&str>,
    utc: bool,
) -> Result<i32, TuiError> {
    if reader.is_empty() {
        return Err(TuiError::Empty(name.to_string()));
    }
    let interval = std::time::Duration::from_millis(reader.header().interval_ms.max(1));
    let mut app = app(interval)?;
    app.set_utc(utc);
    // The recording's kernel, not this machine's (unknown before format 5.1).
    app.set_kernel(
        reader
            .header()
            .kernel
            .as_ref()
            .map(|k| k.to_string())
            .unwrap_or_default(),
    );
    let mut app = app.with_replay(ReplayState::new(reader));
    if let Some(at) = at {
        // A time that cannot be read is a usage error, before the screen.
        if let Some(note) = app.seek_to(at).map_err(TuiError::At)? {
            app.set_message(note);
        }
    }
    let (tx, rx) = mpsc::channel();
    let (guard, mut term) = terminal::enter()?;
    event_loop::spawn_input(tx.clone());
    event_loop::spawn_signals(tx);
    let result = event_loop::run(&mut app, &mut term, &rx, &Arc::new(Latest::default()));
    drop(term);
    drop(guard);
    Ok(result?)
}
