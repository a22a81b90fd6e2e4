//! App state: the frames the app was given, the user's navigation, and what
//! the user asked for that needs the outside world (a profile, a file).
//! No drawing, no /proc and no files here: the event loop carries out
//! [`Request`]s, the views only read this state.

mod command;
pub mod dumps;
pub mod flame;
mod keys;
mod replay;

pub use replay::ReplayState;

use super::keymap::KeyMap;
use super::profiler::Progress;
use flame::FlameState;
use kitty_core::analysis::bands::PeerBands;
use kitty_core::model::history::History;
use kitty_core::model::{Event, EventKind, Frame, ProcKey, RankFrame, Severity, Sig, Verdict};
use kitty_core::sources::node_api::RankDetail;
use std::collections::VecDeque;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    Main,
    Detail,
    Help,
    Events,
    Gpus,
    /// The RDMA ports.
    Nics,
    /// The last Flight Recorder dumps.
    FlightRecorder,
    Flows,
    Flame,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    Filter(String),
    Command(String),
}

/// What a sort key sorts by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortBy {
    Rank,
    Signal(Sig),
    Verdict,
}

/// Sortable columns, cycled with `s`: (name for `:sort`, what). The first
/// is the default: the worst straggler on top, its consequences under it.
pub const SORTS: &[(&str, SortBy)] = &[
    ("verdict", SortBy::Verdict),
    ("rank", SortBy::Rank),
    ("cpu", SortBy::Signal(Sig::CpuPct)),
    ("runq", SortBy::Signal(Sig::RunDelayMsPerS)),
    ("retx", SortBy::Signal(Sig::RetransPerS)),
    ("txq", SortBy::Signal(Sig::TxQueueBytes)),
];

/// Work the app asks the event loop to do (it needs the outside world).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Profile this process on-CPU and show its flame graph.
    Profile { pid: u32, name: String },
    /// Write the flame view's profile as folded stacks and SVG.
    WriteProfile,
    /// Clear and redraw the whole screen (Ctrl-L).
    Redraw,
    /// Ask these ranks' Flight Recorders for a dump.
    FlightRecorder(Vec<dumps::DumpTarget>),
    /// Ask a cluster rank's node (its `serve`) for what the series lack.
    Drill {
        key: ProcKey,
        endpoint: String,
        job: Option<String>,
        rank: Option<u32>,
    },
}

/// Where the views drew what a click can hit (written while drawing, the
/// one thing a view writes: the layout is only known then).
#[derive(Debug, Default)]
pub struct Layout {
    /// The first rank row's line and how many rows are visible.
    pub rank_rows: std::cell::Cell<Option<(u16, u16)>>,
    /// The rank table's header line and its sortable columns: (first
    /// column, last column, index in `SORTS`).
    pub sort_headers: std::cell::RefCell<(u16, Vec<HeaderSpan>)>,
}

/// A sortable header's columns on screen and its index in `SORTS`.
pub type HeaderSpan = (u16, u16, usize);

/// The cluster drill-down of one rank: asked for, answered, or why not.
#[derive(Debug, Clone, PartialEq)]
pub enum Drill {
    Pending,
    Got(Box<RankDetail>),
    Failed(String),
}

/// Signals charted in the detail view (their peer bands are kept too).
pub const DETAIL_SIGNALS: &[Sig] = &[
    Sig::CpuPct,
    Sig::RunDelayMsPerS,
    Sig::MigrationsPerS,
    Sig::CfsThrottledMsPerS,
    Sig::RetransPerS,
    Sig::OutSegsPerS,
    Sig::TxQueueBytes,
    Sig::SrttMaxUs,
    Sig::BytesSentPerS,
    Sig::CtxInvoluntaryPerS,
    Sig::NcclLateMs,
    Sig::RdmaXmitWaitPerS,
    Sig::RdmaCnpPerS,
];

/// What the user navigates: the view, the selected row, sort and filter.
#[derive(Debug, Clone)]
struct Nav {
    view: View,
    selected: usize,
    sort: usize,
    /// The sort order turned round (`S`).
    reversed: bool,
    filter: String,
    input: Option<Input>,
}

/// Live mode: recent frames kept for stepping while paused.
#[derive(Default)]
struct Live {
    buffer: VecDeque<Frame>,
    cursor: Option<usize>,
    paused: bool,
    /// Frames the engine dropped because the view was slower (reported).
    skipped: u64,
}

/// The profile drill-down: one being taken, the last one, or why it failed.
#[derive(Default)]
struct Profiling {
    running: Option<Progress>,
    flame: Option<FlameState>,
    error: Option<String>,
}

pub struct App {
    keymap: KeyMap,
    frame: Option<Frame>,
    history: History,
    bands: PeerBands,
    events: VecDeque<Event>,
    live: Live,
    replay: Option<ReplayState>,
    nav: Nav,
    profiling: Profiling,
    requests: Vec<Request>,
    /// The last drill-down, for the rank it was asked for.
    drill: Option<(ProcKey, Drill)>,
    /// The last Flight Recorder dumps.
    dumps: dumps::Dumps,
    /// Where the last draw put things the mouse can click.
    pub layout: Layout,
    message: Option<String>,
    recording: Option<String>,
    kernel: String,
    color: bool,
    utc: bool,
    quit: bool,
}

/// Live frames kept for stepping back while paused.
const BUFFER: usize = 240;
/// Events listed in the events pane and view.
const EVENTS: usize = 500;
/// History window.
const WINDOW: Duration = Duration::from_secs(900);

impl App {
    pub fn new(keymap: KeyMap, interval: Duration) -> Self {
        let history = History::new(WINDOW, interval);
        let bands = PeerBands::new(DETAIL_SIGNALS, history.capacity());
        App {
            keymap,
            frame: None,
            history,
            bands,
            events: VecDeque::new(),
            live: Live::default(),
            replay: None,
            nav: Nav {
                view: View::Main,
                selected: 0,
                sort: 0,
                reversed: false,
                filter: String::new(),
                input: None,
            },
            profiling: Profiling::default(),
            requests: Vec::new(),
            drill: None,
            dumps: Default::default(),
            layout: Layout::default(),
            message: None,
            recording: None,
            kernel: String::new(),
            color: true,
            utc: false,
            quit: false,
        }
    }

    /// For a replay: frames come from the file.
    pub fn with_replay(mut self, r: ReplayState) -> Self {
        self.replay = Some(r);
        self.replay_show(0);
        self
    }

    pub fn set_recording(&mut self, path: Option<String>) {
        self.recording = path;
    }

    /// Times in UTC instead of the local zone (`--utc`).
    pub fn set_utc(&mut self, on: bool) {
        self.utc = on;
    }

    pub fn utc(&self) -> bool {
        self.utc
    }

    pub fn set_color(&mut self, on: bool) {
        self.color = on;
    }

    pub fn set_kernel(&mut self, k: impl Into<String>) {
        self.kernel = k.into();
    }

    pub fn set_message(&mut self, m: impl Into<String>) {
        self.message = Some(m.into());
    }

    /// A new live frame: always kept in history; shown unless paused.
    pub fn on_frame(&mut self, f: Frame) {
        if f.dropped_frames > 0 {
            self.live.skipped += f.dropped_frames;
            self.push_event(Event::new(
                f.wall_ns,
                EventKind::FramesSkipped,
                format!(
                    "the view skipped {} frame(s) to stay current ({} in all); recording is not affected",
                    f.dropped_frames, self.live.skipped
                ),
            ));
        }
        self.remember(&f);
        self.live.buffer.push_back(f.clone());
        if self.live.buffer.len() > BUFFER {
            self.live.buffer.pop_front();
            if let Some(c) = self.live.cursor.as_mut() {
                *c = c.saturating_sub(1);
            }
        }
        if !self.live.paused {
            self.frame = Some(f);
        }
    }

    /// History, peer bands and events of a frame.
    fn remember(&mut self, f: &Frame) {
        self.history.push(f);
        self.bands.push(f);
        for e in &f.events {
            self.push_event(e.clone());
        }
    }

    fn forget(&mut self) {
        let interval = self.history_interval();
        self.history = History::new(WINDOW, interval);
        self.bands.clear();
        self.events.clear();
    }

    fn history_interval(&self) -> Duration {
        let ms = self
            .replay
            .as_ref()
            .map(|r| r.interval_ms())
            .or(self.frame.as_ref().map(|f| f.interval_ms))
            .unwrap_or(500);
        Duration::from_millis(ms.max(1))
    }

    fn push_event(&mut self, e: Event) {
        self.events.push_back(e);
        if self.events.len() > EVENTS {
            self.events.pop_front();
        }
    }

    // ---- what the views read ----

    pub fn frame(&self) -> Option<&Frame> {
        self.frame.as_ref()
    }

    pub fn history(&self) -> &History {
        &self.history
    }

    pub fn bands(&self) -> &PeerBands {
        &self.bands
    }

    /// Recent events, oldest first.
    pub fn events(&self) -> impl DoubleEndedIterator<Item = &Event> {
        self.events.iter()
    }

    pub fn view(&self) -> View {
        self.nav.view
    }

    pub fn input(&self) -> Option<&Input> {
        self.nav.input.as_ref()
    }

    pub fn filter(&self) -> &str {
        &self.nav.filter
    }

    pub fn sort_reversed(&self) -> bool {
        self.nav.reversed
    }

    pub fn sort(&self) -> (&'static str, SortBy) {
        SORTS[self.nav.sort]
    }

    pub fn message(&self) -> Option<&str> {
        self.message.as_deref()
    }

    pub fn recording(&self) -> Option<&str> {
        self.recording.as_deref()
    }

    pub fn kernel(&self) -> &str {
        &self.kernel
    }

    pub fn color(&self) -> bool {
        self.color
    }

    pub fn keymap(&self) -> &KeyMap {
        &self.keymap
    }

    pub fn replay(&self) -> Option<&ReplayState> {
        self.replay.as_ref()
    }

    /// A replay of a recording that left each tick's latency histograms
    /// out (their percentiles are in the signals).
    pub fn histograms_not_recorded(&self) -> bool {
        self.replay.as_ref().is_some_and(|r| !r.keeps_histograms())
    }

    pub fn is_paused(&self) -> bool {
        self.live.paused
    }

    /// (position, frames kept) while paused in live mode.
    pub fn paused_at(&self) -> (usize, usize) {
        (
            self.live.cursor.map_or(0, |c| c + 1),
            self.live.buffer.len(),
        )
    }

    /// Frames the view skipped so far (shown in the header when any).
    pub fn skipped(&self) -> u64 {
        self.live.skipped
    }

    pub fn should_quit(&self) -> bool {
        self.quit
    }

    pub fn profile_progress(&self) -> Option<&Progress> {
        self.profiling.running.as_ref()
    }

    pub fn flame(&self) -> Option<&FlameState> {
        self.profiling.flame.as_ref()
    }

    pub fn profile_error(&self) -> Option<&str> {
        self.profiling.error.as_deref()
    }

    /// What the user asked for since the last call, for the event loop.
    /// The drill-down of this rank, when one was asked for.
    pub fn drill_of(&self, key: ProcKey) -> Option<&Drill> {
        self.drill.as_ref().filter(|(k, _)| *k == key).map(|d| &d.1)
    }

    /// The node answered (or did not) for the rank.
    pub fn drill_finished(&mut self, key: ProcKey, r: Result<RankDetail, String>) {
        if self.drill.as_ref().is_some_and(|(k, _)| *k == key) {
            self.drill = Some((
                key,
                match r {
                    Ok(d) => Drill::Got(Box::new(d)),
                    Err(e) => Drill::Failed(e),
                },
            ));
        }
    }

    pub fn take_requests(&mut self) -> Vec<Request> {
        std::mem::take(&mut self.requests)
    }

    /// Ranks in display order (sorted, filtered).
    pub fn rows(&self) -> Vec<&RankFrame> {
        let Some(f) = &self.frame else {
            return Vec::new();
        };
        let needle = self.nav.filter.to_lowercase();
        let mut rows: Vec<&RankFrame> = f
            .ranks
            .iter()
            .filter(|r| needle.is_empty() || haystack(f, r).contains(&needle))
            .collect();
        let by_rank = |a: &&RankFrame, b: &&RankFrame| {
            (
                a.labels.job_key(),
                a.labels.rank.unwrap_or(u32::MAX),
                a.key.pid,
            )
                .cmp(&(
                    b.labels.job_key(),
                    b.labels.rank.unwrap_or(u32::MAX),
                    b.key.pid,
                ))
        };
        match SORTS[self.nav.sort].1 {
            SortBy::Rank => rows.sort_by(by_rank),
            SortBy::Verdict => rows.sort_by(|a, b| {
                badness(f, b)
                    .partial_cmp(&badness(f, a))
                    .unwrap_or(std::cmp::Ordering::Equal)
                    .then_with(|| by_rank(a, b))
            }),
            SortBy::Signal(sig) => rows.sort_by(|a, b| {
                b.signal(sig)
                    .unwrap_or(f64::MIN)
                    .total_cmp(&a.signal(sig).unwrap_or(f64::MIN))
            }),
        }
        if self.nav.reversed {
            rows.reverse();
        }
        rows
    }

    /// The selected row's index, kept inside the rows.
    pub fn selected_index(&self) -> usize {
        self.nav.selected.min(self.rows().len().saturating_sub(1))
    }

    pub fn selected_rank(&self) -> Option<&RankFrame> {
        self.rows().get(self.selected_index()).copied()
    }

    /// The verdicts of one process in the shown frame.
    pub fn verdicts_of(&self, pid: u32) -> Vec<&Verdict> {
        self.frame
            .as_ref()
            .map(|f| f.verdicts_of(pid).collect())
            .unwrap_or_default()
    }

    /// The worst verdict severity of a rank for one signal, for cell highlighting.
    pub fn severity(&self, pid: u32, signal: Sig) -> Option<Severity> {
        self.frame
            .as_ref()?
            .verdicts_of(pid)
            .filter(|v| v.signal == signal)
            .map(|v| v.severity)
            .max()
    }
}

/// How bad a rank looks, for the default sort: its worst straggler
/// verdict (severity, score); a rank with only consequences sorts just
/// under the rank that causes them; a healthy rank last.
fn badness(f: &Frame, r: &RankFrame) -> (u8, u8, f64, u8) {
    let worst = |pid: u32| {
        f.verdicts_of(pid)
            .filter(|v| !v.is_consequence())
            .map(|v| (v.severity as u8, v.score))
            .fold(None, |a: Option<(u8, f64)>, b| match a {
                Some(a) if a >= b => Some(a),
                _ => Some(b),
            })
    };
    if let Some((sev, score)) = worst(r.key.pid) {
        return (2, sev, score, 1);
    }
    let cause = f
        .verdicts_of(r.key.pid)
        .find_map(|v| v.consequence_of.as_ref())
        .and_then(|c| worst(c.pid));
    match cause {
        Some((sev, score)) => (2, sev, score, 0),
        None => (0, 0, 0.0, 0),
    }
}

/// What the filter matches a row against.
fn haystack(f: &Frame, r: &RankFrame) -> String {
    let verdicts: Vec<&str> = f
        .verdicts_of(r.key.pid)
        .map(|v| v.message.as_str())
        .collect();
    format!(
        "{} pid {} {} {} {} {}",
        r.display_name(),
        r.key.pid,
        r.node.as_deref().unwrap_or(""),
        r.comm,
        r.labels.job.as_deref().unwrap_or(""),
        verdicts.join(" ")
    )
    .to_lowercase()
}
