//! App state and what each key does. No drawing and no /proc here: the app
//! only holds frames it was given and the user's navigation state.

use super::keymap::{Action, KeyMap};
use crossterm::event::{KeyCode, KeyEvent};
use kitty_core::frame::{Event, Frame, RankFrame, Severity};
use kitty_core::history::History;
use kitty_core::record::Reader;
use std::collections::VecDeque;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    Main,
    Detail,
    Help,
    Events,
    Gpus,
    Flows,
    Flame,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    Filter(String),
    Command(String),
}

/// Sortable columns, cycled with `s`.
pub const SORTS: &[(&str, &str)] = &[
    ("rank", "rank"),
    ("cpu", "cpu_pct"),
    ("runq", "run_delay_ms_per_s"),
    ("retx", "retrans_per_s"),
    ("txq", "tx_queue_bytes"),
    ("verdict", "verdict"),
];

/// Where frames come from in replay: the file, read on demand.
pub struct ReplayState {
    pub reader: Reader,
    pub pos: usize,
    pub playing: bool,
    pub speed: f64,
}

pub struct App {
    pub keymap: KeyMap,
    pub frame: Option<Frame>,
    pub history: History,
    /// Recent live frames, for stepping while paused.
    pub buffer: VecDeque<Frame>,
    pub cursor: Option<usize>,
    pub paused: bool,
    pub replay: Option<ReplayState>,
    pub view: View,
    pub selected: usize,
    pub sort: usize,
    pub filter: String,
    pub input: Option<Input>,
    pub events: VecDeque<Event>,
    pub message: Option<String>,
    pub recording: Option<String>,
    pub kernel: String,
    pub quit: bool,
    pub color: bool,
    /// A profile being taken, and the last one taken (the flame view).
    pub profiling: Option<super::flame::Running>,
    pub flame: Option<super::flame::Flame>,
    pub profile_error: Option<String>,
}

const BUFFER: usize = 240;

impl App {
    pub fn new(keymap: KeyMap, interval: Duration) -> Self {
        App {
            keymap,
            frame: None,
            history: History::new(Duration::from_secs(900), interval),
            buffer: VecDeque::new(),
            cursor: None,
            paused: false,
            replay: None,
            view: View::Main,
            selected: 0,
            sort: 0,
            filter: String::new(),
            input: None,
            events: VecDeque::new(),
            message: None,
            recording: None,
            kernel: kernel_release(),
            quit: false,
            color: std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
            profiling: None,
            flame: None,
            profile_error: None,
        }
    }

    /// A new live frame: always kept in history; shown unless paused.
    pub fn on_frame(&mut self, f: Frame) {
        self.history.push(&f);
        for e in &f.events {
            self.push_event(e.clone());
        }
        self.buffer.push_back(f.clone());
        if self.buffer.len() > BUFFER {
            self.buffer.pop_front();
            if let Some(c) = self.cursor.as_mut() {
                *c = c.saturating_sub(1);
            }
        }
        if !self.paused {
            self.frame = Some(f);
        }
    }

    fn push_event(&mut self, e: Event) {
        self.events.push_back(e);
        if self.events.len() > 500 {
            self.events.pop_front();
        }
    }

    /// Shows replay frame `i`, rebuilding the history window that leads to it.
    pub fn replay_show(&mut self, i: usize) {
        let Some(r) = self.replay.as_mut() else {
            return;
        };
        if r.reader.is_empty() {
            return;
        }
        let i = i.min(r.reader.len() - 1);
        let from = if i == r.pos + 1 && self.frame.is_some() {
            i
        } else {
            i.saturating_sub(120)
        };
        if from != i {
            self.history = History::new(
                Duration::from_secs(900),
                Duration::from_millis(r.reader.header().interval_ms.max(1)),
            );
            self.events.clear();
        }
        let mut shown = None;
        for j in from..=i {
            match r.reader.frame(j) {
                Ok(f) => {
                    self.history.push(&f);
                    for e in &f.events {
                        self.events.push_back(e.clone());
                    }
                    shown = Some(f);
                }
                Err(e) => self.message = Some(format!("{e}; skipped")),
            }
        }
        r.pos = i;
        if shown.is_some() {
            self.frame = shown;
        }
    }

    /// Ranks in display order (sorted, filtered).
    pub fn rows(&self) -> Vec<&RankFrame> {
        let Some(f) = &self.frame else {
            return Vec::new();
        };
        let needle = self.filter.to_lowercase();
        let mut rows: Vec<&RankFrame> = f
            .ranks
            .iter()
            .filter(|r| {
                if needle.is_empty() {
                    return true;
                }
                let verdicts = f
                    .verdicts
                    .iter()
                    .filter(|v| v.pid == r.key.pid)
                    .map(|v| v.message.as_str());
                let hay = format!(
                    "{} pid {} {} {} {}",
                    r.display_name(),
                    r.key.pid,
                    r.comm,
                    r.labels.job.as_deref().unwrap_or(""),
                    verdicts.collect::<Vec<_>>().join(" ")
                )
                .to_lowercase();
                hay.contains(&needle)
            })
            .collect();
        let key = SORTS[self.sort].1;
        let worst = |r: &RankFrame| {
            f.verdicts
                .iter()
                .filter(|v| v.pid == r.key.pid)
                .map(|v| (v.severity, v.ratio))
                .fold(None, |a, b| match a {
                    None => Some(b),
                    Some(a) if b > a => Some(b),
                    a => a,
                })
        };
        match key {
            "rank" => rows.sort_by_key(|r| {
                (
                    r.labels.job.clone(),
                    r.labels.rank.unwrap_or(u32::MAX),
                    r.key.pid,
                )
            }),
            "verdict" => rows.sort_by(|a, b| {
                let (wa, wb) = (worst(a), worst(b));
                wb.partial_cmp(&wa).unwrap_or(std::cmp::Ordering::Equal)
            }),
            sig => rows.sort_by(|a, b| {
                b.signal(sig)
                    .unwrap_or(f64::MIN)
                    .total_cmp(&a.signal(sig).unwrap_or(f64::MIN))
            }),
        }
        rows
    }

    pub fn selected_rank(&self) -> Option<&RankFrame> {
        let rows = self.rows();
        rows.get(self.selected.min(rows.len().saturating_sub(1)))
            .copied()
    }

    /// The worst verdict severity of a rank for one signal, for cell highlighting.
    pub fn severity(&self, pid: u32, signal: &str) -> Option<Severity> {
        self.frame
            .as_ref()?
            .verdicts
            .iter()
            .filter(|v| v.pid == pid && v.signal == signal)
            .map(|v| v.severity)
            .max()
    }

    pub fn on_key(&mut self, ev: KeyEvent) {
        if let Some(input) = self.input.take() {
            self.on_input_key(input, ev);
            return;
        }
        self.message = None;
        if self.view == View::Flame && self.flame_key(ev) {
            return;
        }
        let Some(action) = self.keymap.action(&ev) else {
            return;
        };
        let n = self.rows().len();
        match action {
            Action::Quit => self.quit = true,
            Action::Help => {
                self.view = if self.view == View::Help {
                    View::Main
                } else {
                    View::Help
                }
            }
            Action::Up => self.selected = self.selected.saturating_sub(1),
            Action::Down => self.selected = (self.selected + 1).min(n.saturating_sub(1)),
            Action::Top => self.selected = 0,
            Action::Bottom => self.selected = n.saturating_sub(1),
            Action::Open => {
                if self.view == View::Main && n > 0 {
                    self.view = View::Detail;
                }
            }
            Action::Back => {
                if self.view != View::Main {
                    self.view = View::Main;
                } else {
                    self.filter.clear();
                }
            }
            Action::Filter => self.input = Some(Input::Filter(self.filter.clone())),
            Action::Command => self.input = Some(Input::Command(String::new())),
            Action::Sort => self.sort = (self.sort + 1) % SORTS.len(),
            Action::Pause => self.toggle_pause(),
            Action::StepBack => self.step(-1),
            Action::StepForward => self.step(1),
            Action::Faster => self.speed(2.0),
            Action::Slower => self.speed(0.5),
            Action::Profile => self.start_profile(),
        }
    }

    /// Keys of the flame view; false lets the global bindings have the key.
    fn flame_key(&mut self, ev: KeyEvent) -> bool {
        if let Some(r) = &self.profiling {
            if ev.code == KeyCode::Esc {
                r.cancel.store(true, std::sync::atomic::Ordering::SeqCst);
                return true;
            }
            return false;
        }
        if self.flame.as_mut().is_some_and(|f| f.on_key(ev)) {
            return true;
        }
        if ev.code == KeyCode::Esc {
            self.view = View::Main;
            return true;
        }
        false
    }

    /// `p`: profile the selected rank on a background thread.
    fn start_profile(&mut self) {
        if self.replay.is_some() {
            self.message = Some("profiling needs a live process; this is a replay".into());
            return;
        }
        if self.profiling.is_some() {
            self.view = View::Flame;
            return;
        }
        let Some(r) = self.selected_rank() else {
            self.message = Some("no rank selected to profile".into());
            return;
        };
        let (pid, name) = (r.key.pid, r.display_name());
        self.profile_error = None;
        self.profiling = Some(super::flame::Running::start(pid, name));
        self.view = View::Flame;
    }

    /// Picks up a finished profile; true when the screen changed.
    pub fn poll_profile(&mut self) -> bool {
        let Some(r) = self.profiling.as_mut() else {
            return false;
        };
        match r.poll() {
            None => self.view == View::Flame,
            Some(res) => {
                self.profiling = None;
                match res {
                    Ok(p) => self.flame = Some(super::flame::Flame::new(p)),
                    Err(e) => {
                        self.message = Some(format!("profile: {e}"));
                        self.profile_error = Some(e);
                    }
                }
                true
            }
        }
    }

    fn toggle_pause(&mut self) {
        if let Some(r) = self.replay.as_mut() {
            r.playing = !r.playing;
            return;
        }
        self.paused = !self.paused;
        if self.paused {
            self.cursor = Some(self.buffer.len().saturating_sub(1));
        } else {
            self.cursor = None;
            self.frame = self.buffer.back().cloned();
        }
    }

    fn step(&mut self, d: i64) {
        if let Some(r) = self.replay.as_mut() {
            r.playing = false;
            let i = (r.pos as i64 + d).max(0) as usize;
            self.replay_show(i);
            return;
        }
        if !self.paused {
            self.message = Some("press space to pause first, then t/T step".into());
            return;
        }
        let c = self.cursor.unwrap_or(0) as i64 + d;
        let c = c.clamp(0, self.buffer.len() as i64 - 1).max(0) as usize;
        self.cursor = Some(c);
        self.frame = self.buffer.get(c).cloned();
    }

    fn speed(&mut self, mult: f64) {
        match self.replay.as_mut() {
            Some(r) => {
                r.speed = (r.speed * mult).clamp(0.25, 64.0);
                self.message = Some(format!("replay speed {}x", r.speed));
            }
            None => self.message = Some("speed applies to replay".into()),
        }
    }

    fn on_input_key(&mut self, input: Input, ev: KeyEvent) {
        let (mut text, is_filter) = match input {
            Input::Filter(t) => (t, true),
            Input::Command(t) => (t, false),
        };
        match ev.code {
            KeyCode::Esc => {
                if is_filter {
                    self.filter.clear();
                }
                return;
            }
            KeyCode::Enter => {
                if is_filter {
                    self.filter = text;
                    self.selected = 0;
                } else {
                    self.run_command(text.trim());
                }
                return;
            }
            KeyCode::Backspace => {
                text.pop();
            }
            KeyCode::Char(c) => text.push(c),
            _ => {}
        }
        if is_filter {
            // Live filtering as the user types.
            self.filter = text.clone();
            self.selected = 0;
            self.input = Some(Input::Filter(text));
        } else {
            self.input = Some(Input::Command(text));
        }
    }

    pub fn run_command(&mut self, cmd: &str) {
        let mut parts = cmd.split_whitespace();
        match (parts.next(), parts.next()) {
            (Some("q" | "quit" | "q!"), _) => self.quit = true,
            (Some("ranks" | "rank" | "main"), _) => self.view = View::Main,
            (Some("events" | "ev"), _) => self.view = View::Events,
            (Some("gpus" | "gpu"), _) => self.view = View::Gpus,
            (Some("flows" | "talkers" | "net"), _) => self.view = View::Flows,
            (Some("flame" | "profile"), _) => self.view = View::Flame,
            (Some("help" | "h"), _) => self.view = View::Help,
            (Some("sort"), Some(col)) => match SORTS.iter().position(|(n, _)| *n == col) {
                Some(i) => self.sort = i,
                None => {
                    self.message = Some(format!(
                        "unknown column {col:?}; one of {}",
                        SORTS.iter().map(|s| s.0).collect::<Vec<_>>().join(", ")
                    ))
                }
            },
            (Some("seek"), Some(expr)) => self.seek(expr),
            (None, _) => {}
            (Some(other), _) => {
                self.message = Some(format!("unknown command :{other} (try :help)"))
            }
        }
    }

    /// `seek +30s`, `seek -2m`, `seek 12:03:04` (UTC), `seek start`, `seek end`.
    fn seek(&mut self, expr: &str) {
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
                kitty_core::timefmt::parse_duration(&e[1..]).ok().map(|d| {
                    let ns = d.as_nanos() as u64;
                    let w = if e.starts_with('+') {
                        cur_wall.saturating_add(ns)
                    } else {
                        cur_wall.saturating_sub(ns)
                    };
                    r.reader.seek_wall(w)
                })
            }
            e => parse_clock(e).map(|secs_of_day| {
                let day = cur_wall / 1_000_000_000 / 86_400 * 86_400;
                r.reader.seek_wall((day + secs_of_day) * 1_000_000_000)
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

fn parse_clock(s: &str) -> Option<u64> {
    let v: Vec<u64> = s
        .split(':')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    match v.as_slice() {
        [h, m, sec] if *h < 24 && *m < 60 && *sec < 60 => Some(h * 3600 + m * 60 + sec),
        [h, m] if *h < 24 && *m < 60 => Some(h * 3600 + m * 60),
        _ => None,
    }
}

pub fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}
