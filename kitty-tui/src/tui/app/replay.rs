//! Time travel: stepping through live frames while paused, and replaying a
//! recording (play, pause, step, speed, seek), rebuilding the history that
//! leads to the shown frame.

use super::App;
use kitty_core::sinks::record::Reader;
use std::time::Duration;

/// Where frames come from in replay: the file, read on demand.
pub struct ReplayState {
    reader: Reader,
    pos: usize,
    playing: bool,
    speed: f64,
}

/// Frames read back before the shown one when jumping, to fill the charts.
const LEAD_IN: usize = 120;

impl ReplayState {
    pub fn new(reader: Reader) -> Self {
        ReplayState {
            reader,
            pos: 0,
            playing: true,
            speed: 1.0,
        }
    }

    pub fn pos(&self) -> usize {
        self.pos
    }

    pub fn len(&self) -> usize {
        self.reader.len()
    }

    pub fn is_empty(&self) -> bool {
        self.reader.is_empty()
    }

    pub fn playing(&self) -> bool {
        self.playing
    }

    pub fn speed(&self) -> f64 {
        self.speed
    }

    pub fn interval_ms(&self) -> u64 {
        self.reader.header().interval_ms
    }

    /// Wall time of a frame (from the record heads, no decoding).
    pub fn wall_ns(&self, i: usize) -> Option<u64> {
        self.reader.index().get(i).map(|e| e.wall_ns)
    }

    /// How long after the shown frame the next is due, when playing.
    pub fn next_due(&self) -> Option<Duration> {
        if !self.playing || self.pos + 1 >= self.reader.len() {
            return None;
        }
        let idx = self.reader.index();
        let dt = idx[self.pos + 1]
            .mono_ns
            .saturating_sub(idx[self.pos].mono_ns) as f64
            / 1e9
            / self.speed;
        Some(Duration::from_secs_f64(dt.min(10.0)))
    }

    fn seek_wall(&self, wall_ns: u64) -> usize {
        self.reader.seek_wall(wall_ns)
    }
}

impl App {
    /// Shows replay frame `i`, rebuilding the history window that leads to it.
    pub fn replay_show(&mut self, i: usize) {
        let Some(r) = self.replay.as_ref() else {
            return;
        };
        if r.reader.is_empty() {
            return;
        }
        let i = i.min(r.reader.len() - 1);
        let from = if i == r.pos + 1 && self.frame.is_some() {
            i
        } else {
            i.saturating_sub(LEAD_IN)
        };
        if from != i {
            self.forget();
        }
        let mut shown = None;
        for j in from..=i {
            let read = self.replay.as_mut().expect("checked above").reader.frame(j);
            match read {
                Ok(f) => {
                    self.remember(&f);
                    shown = Some(f);
                }
                Err(e) => self.message = Some(format!("{e}; skipped")),
            }
        }
        if let Some(r) = self.replay.as_mut() {
            r.pos = i;
        }
        if shown.is_some() {
            self.frame = shown;
        }
    }

    /// The next replay frame is due: show it.
    pub fn replay_advance(&mut self) {
        let next = self.replay.as_ref().map_or(0, |r| r.pos + 1);
        self.replay_show(next);
    }

    pub(super) fn toggle_pause(&mut self) {
        if let Some(r) = self.replay.as_mut() {
            r.playing = !r.playing;
            return;
        }
        self.live.paused = !self.live.paused;
        if self.live.paused {
            self.live.cursor = Some(self.live.buffer.len().saturating_sub(1));
        } else {
            self.live.cursor = None;
            self.frame = self.live.buffer.back().cloned();
        }
    }

    pub(super) fn step(&mut self, d: i64) {
        if let Some(r) = self.replay.as_mut() {
            r.playing = false;
            let i = (r.pos as i64 + d).max(0) as usize;
            self.replay_show(i);
            return;
        }
        if !self.live.paused {
            self.message = Some("press space to pause first, then t/T step".into());
            return;
        }
        let c = self.live.cursor.unwrap_or(0) as i64 + d;
        let c = c.clamp(0, self.live.buffer.len() as i64 - 1).max(0) as usize;
        self.live.cursor = Some(c);
        self.frame = self.live.buffer.get(c).cloned();
    }

    pub(super) fn speed(&mut self, mult: f64) {
        match self.replay.as_mut() {
            Some(r) => {
                r.speed = (r.speed * mult).clamp(0.25, 64.0);
                self.message = Some(format!("replay speed {}x", r.speed));
            }
            None => self.message = Some("speed applies to replay".into()),
        }
    }

    /// `seek +30s`, `seek -2m`, `seek 12:03:04` (UTC), `seek start`, `seek end`.
    pub(super) fn seek(&mut self, expr: &str) {
        let Some(r) = self.replay.as_ref() else {
            self.message = Some("seek applies to replay".into());
            return;
        };
        let len = r.reader.len();
        if len == 0 {
            return;
        }
        let cur_wall = r.reader.index()[r.pos].wall_ns;
        let target = match expr {
            "start" => Some(0),
            "end" => Some(len - 1),
            e if e.starts_with('+') || e.starts_with('-') => {
                kitty_core::model::time::parse_duration(&e[1..])
                    .ok()
                    .map(|d| {
                        let ns = d.as_nanos() as u64;
                        let w = if e.starts_with('+') {
                            cur_wall.saturating_add(ns)
                        } else {
                            cur_wall.saturating_sub(ns)
                        };
                        r.seek_wall(w)
                    })
            }
            e => super::command::parse_clock(e).map(|secs_of_day| {
                let day = cur_wall / 1_000_000_000 / 86_400 * 86_400;
                r.seek_wall((day + secs_of_day) * 1_000_000_000)
            }),
        };
        match target {
            Some(i) => {
                if let Some(r) = self.replay.as_mut() {
                    r.playing = false;
                }
                self.replay_show(i)
            }
            None => {
                self.message = Some(format!(
                    "cannot seek to {expr:?}: use +30s, -2m, HH:MM:SS, start or end"
                ))
            }
        }
    }
}
