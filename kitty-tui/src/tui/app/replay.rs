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

    /// Whether the recording kept each tick's latency histograms.
    pub fn keeps_histograms(&self) -> bool {
        self.reader.header().keeps_histograms()
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

    /// `:seek EXPR`: a seek that cannot be done says why.
    pub(super) fn seek(&mut self, expr: &str) {
        match self.seek_to(expr) {
            Ok(note) => self.message = note,
            Err(e) => self.message = Some(e),
        }
    }

    /// Seeks the replay: `+30s` / `-2m` from the frame shown, `5m ago`
    /// (before now), `HH:MM[:SS]` (on the shown frame's day, in the zone the
    /// header shows), an RFC 3339 time, `start`, `end`. A time outside the
    /// recording goes to its first or last frame and says so (the note).
    pub fn seek_to(&mut self, expr: &str) -> Result<Option<String>, String> {
        let utc = self.utc;
        let Some(r) = self.replay.as_ref() else {
            return Err("seek applies to replay".into());
        };
        let len = r.reader.len();
        if len == 0 {
            return Ok(None);
        }
        let cur_wall = r.reader.index()[r.pos].wall_ns;
        let bad = || {
            format!(
            "cannot seek to {expr:?}: use +30s, -2m, 5m ago, HH:MM:SS, a date (RFC 3339), start or end"
        )
        };
        let dur = |s: &str| {
            kitty_core::model::time::parse_duration(s.trim()).map(|d| d.as_nanos() as u64)
        };
        let wall: u64 = match expr.trim() {
            "start" => r.reader.index()[0].wall_ns,
            "end" => r.reader.index()[len - 1].wall_ns,
            e if e.starts_with('+') => cur_wall.saturating_add(dur(&e[1..]).map_err(|_| bad())?),
            e if e.starts_with('-') => cur_wall.saturating_sub(dur(&e[1..]).map_err(|_| bad())?),
            e if e.ends_with("ago") => {
                let d = dur(e.trim_end_matches("ago")).map_err(|_| bad())?;
                kitty_core::model::time::wall_ns().saturating_sub(d)
            }
            e => match super::command::parse_clock(e) {
                Some(secs_of_day) => {
                    // The day of the shown frame, in the zone shown.
                    let off = kitty_core::model::time::civil(cur_wall, utc).offset_s;
                    let local = (cur_wall / 1_000_000_000) as i64 + off;
                    let day_start = local.div_euclid(86_400) * 86_400 - off;
                    (day_start + secs_of_day as i64).max(0) as u64 * 1_000_000_000
                }
                None => humantime::parse_rfc3339_weak(e)
                    .ok()
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map(|d| d.as_nanos() as u64)
                    .ok_or_else(bad)?,
            },
        };
        let (first, last) = (
            r.reader.index()[0].wall_ns,
            r.reader.index()[len - 1].wall_ns,
        );
        let shown = |w: u64| {
            let c = kitty_core::model::time::civil(w, utc);
            format!("{} {} {}", c.date, c.time, c.zone)
        };
        let note = if wall < first {
            Some(format!(
                "{expr} is before the recording starts ({}): at its first frame",
                shown(first)
            ))
        } else if wall > last + r.reader.header().interval_ms * 1_000_000 {
            Some(format!(
                "{expr} is after the recording ends ({}): at its last frame",
                shown(last)
            ))
        } else {
            None
        };
        let i = r.seek_wall(wall);
        if let Some(r) = self.replay.as_mut() {
            r.playing = false;
        }
        self.replay_show(i);
        Ok(note)
    }
}
