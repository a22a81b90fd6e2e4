//! The profile drill-down: `p` on a rank samples it on-CPU (a gauge, Esc
//! cancels), then an icicle graph of its stacks: widths by samples, arrows
//! or hjkl move between frames, Enter zooms, Esc zooms out, `/` highlights
//! matching frames with their share, `t` toggles merged / per-thread, `w`
//! writes folded stacks and an SVG flame graph.

use super::draw::Theme;
use crossterm::event::{KeyCode, KeyEvent};
use kitty_core::flame::FlameTree;
use kitty_core::profile::Profile;
use kitty_probe_ebpf::profile::Request;
use ratatui::prelude::*;
use ratatui::widgets::{Block, Gauge, Paragraph, Wrap};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// Default profile of the TUI: 99 Hz for 5 s (seed 004's on-demand profile).
pub const FREQUENCY_HZ: u64 = 99;
pub const DURATION: Duration = Duration::from_secs(5);

/// A profile being taken on a background thread.
pub struct Running {
    pub pid: u32,
    pub name: String,
    pub fraction: Arc<Mutex<f64>>,
    pub cancel: Arc<AtomicBool>,
    handle: Option<JoinHandle<Result<Profile, String>>>,
}

impl Running {
    pub fn start(pid: u32, name: String) -> Running {
        let fraction = Arc::new(Mutex::new(0.0));
        let cancel = Arc::new(AtomicBool::new(false));
        let (f2, c2) = (fraction.clone(), cancel.clone());
        let handle = std::thread::Builder::new()
            .name("kitty-profile".into())
            .spawn(move || {
                let req = Request {
                    pid,
                    frequency_hz: FREQUENCY_HZ,
                    duration: DURATION,
                };
                kitty_probe_ebpf::profile::run(&req, &c2, |x| *f2.lock().unwrap() = x)
            })
            .expect("spawn profile thread");
        Running {
            pid,
            name,
            fraction,
            cancel,
            handle: Some(handle),
        }
    }

    /// The result once the thread is done.
    pub fn poll(&mut self) -> Option<Result<Profile, String>> {
        if !self.handle.as_ref()?.is_finished() {
            return None;
        }
        let h = self.handle.take()?;
        Some(
            h.join()
                .unwrap_or_else(|_| Err("the profiler thread panicked".into())),
        )
    }
}

/// What the flame view shows: a finished profile and where the user is in it.
pub struct Flame {
    pub profile: Profile,
    pub tree: FlameTree,
    pub per_thread: bool,
    pub selected: usize,
    pub zoom: usize,
    pub search: Option<String>,
    /// Typing a search (after `/`).
    pub typing: bool,
    pub message: Option<String>,
}

impl Flame {
    pub fn new(profile: Profile) -> Flame {
        let tree = FlameTree::build(&profile, false);
        Flame {
            profile,
            tree,
            per_thread: false,
            selected: 0,
            zoom: 0,
            search: None,
            typing: false,
            message: None,
        }
    }

    /// Handles a key; false means "not mine" (Esc at the top leaves the view).
    pub fn on_key(&mut self, ev: KeyEvent) -> bool {
        if self.typing {
            let q = self.search.get_or_insert_with(String::new);
            match ev.code {
                KeyCode::Enter => self.typing = false,
                KeyCode::Esc => {
                    self.typing = false;
                    self.search = None;
                }
                KeyCode::Backspace => {
                    q.pop();
                }
                KeyCode::Char(c) => q.push(c),
                _ => {}
            }
            return true;
        }
        let t = &self.tree;
        let n = self.selected;
        match ev.code {
            KeyCode::Left | KeyCode::Char('h') => self.selected = t.sibling(n, false),
            KeyCode::Right | KeyCode::Char('l') => self.selected = t.sibling(n, true),
            KeyCode::Up | KeyCode::Char('k') => {
                if n != self.zoom {
                    self.selected = t.nodes[n].parent.unwrap_or(n);
                }
            }
            KeyCode::Down | KeyCode::Char('j') => {
                if let Some(&c) = t.nodes[n].children.first() {
                    self.selected = c;
                }
            }
            KeyCode::Enter => self.zoom = n,
            KeyCode::Esc => {
                if self.search.is_some() {
                    self.search = None;
                } else if self.zoom != 0 {
                    self.zoom = t.nodes[self.zoom].parent.unwrap_or(0);
                    self.selected = self.zoom;
                } else {
                    return false;
                }
            }
            KeyCode::Char('/') => {
                self.typing = true;
                self.search = Some(String::new());
            }
            KeyCode::Char('t') => {
                self.per_thread = !self.per_thread;
                self.tree = FlameTree::build(&self.profile, self.per_thread);
                self.selected = 0;
                self.zoom = 0;
            }
            KeyCode::Char('w') => self.message = Some(self.write()),
            _ => return false,
        }
        true
    }

    /// Writes folded stacks and an SVG next to each other; says where.
    fn write(&self) -> String {
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let dir = std::env::current_dir()
            .ok()
            .filter(|d| std::fs::metadata(d).is_ok_and(|m| !m.permissions().readonly()))
            .unwrap_or_else(std::env::temp_dir);
        let base = dir.join(format!("kitty-profile-{}-{stamp}", self.profile.pid));
        let folded = base.with_extension("folded");
        let svg = base.with_extension("svg");
        let r = std::fs::write(&folded, self.profile.folded(self.per_thread))
            .map_err(|e| e.to_string())
            .and_then(|_| self.profile.svg(self.per_thread))
            .and_then(|bytes| std::fs::write(&svg, bytes).map_err(|e| e.to_string()));
        match r {
            Ok(()) => format!("wrote {} and {}", folded.display(), svg.display()),
            Err(e) => format!("could not write the profile: {e}"),
        }
    }
}

/// A warm color per frame name, stable across redraws (flame graph habit).
fn color_of(name: &str) -> Color {
    let h = name
        .bytes()
        .fold(2166136261u32, |h, b| (h ^ b as u32).wrapping_mul(16777619));
    let (r, g, b) = if name.ends_with("_[k]") {
        (200 + (h % 55) as u8, 120 + (h >> 8) as u8 % 60, 60)
    } else {
        (
            205 + (h % 50) as u8,
            90 + (h >> 8) as u8 % 130,
            (h >> 16) as u8 % 55,
        )
    };
    Color::Rgb(r, g, b)
}

pub fn draw_running(f: &mut Frame, r: &Running, area: Rect) {
    let x = *r.fraction.lock().unwrap();
    let label = format!(
        "profiling {} (pid {}) at {FREQUENCY_HZ} Hz: {:.1} / {:.0} s — Esc cancels",
        r.name,
        r.pid,
        x * DURATION.as_secs_f64(),
        DURATION.as_secs_f64()
    );
    let [_, g, _] = Layout::vertical([
        Constraint::Percentage(40),
        Constraint::Length(3),
        Constraint::Min(0),
    ])
    .areas(area);
    f.render_widget(
        Gauge::default()
            .block(Block::bordered().title(" on-CPU profile "))
            .ratio(x.clamp(0.0, 1.0))
            .label(label),
        g,
    );
}

pub fn draw(f: &mut Frame, fl: &Flame, area: Rect, th: &Theme) {
    let p = &fl.profile;
    let title = format!(
        " on-CPU profile · pid {} ({}) · {} samples · {} Hz · {:.1} s · {} ",
        p.pid,
        p.comm,
        fl.tree.total(),
        p.frequency_hz,
        p.duration_s,
        if fl.per_thread {
            "per thread"
        } else {
            "merged"
        }
    );
    let block = Block::bordered().title(title);
    let inner = block.inner(area);
    f.render_widget(block, area);
    let [graph, status] =
        Layout::vertical([Constraint::Min(1), Constraint::Length(4)]).areas(inner);
    let (hits, share) = match &fl.search {
        Some(q) if !q.is_empty() => {
            let (h, s) = fl.tree.search(q);
            (h, Some(s))
        }
        _ => (vec![false; fl.tree.nodes.len()], None),
    };
    if fl.tree.total() == 0 {
        f.render_widget(
            Paragraph::new("  no samples: the process did not run on a CPU while it was sampled"),
            graph,
        );
    } else {
        let base = fl.tree.nodes[fl.zoom].depth;
        paint(
            f.buffer_mut(),
            fl,
            &hits,
            th,
            fl.zoom,
            graph.x,
            graph.width,
            graph,
            base,
        );
    }
    let sel = &fl.tree.nodes[fl.selected];
    let zoom_total = fl.tree.nodes[fl.zoom].total.max(1);
    let mut lines = vec![Line::from(vec![
        Span::styled(format!(" {} ", sel.name), th.title()),
        Span::raw(format!(
            " total {:.1} % ({} samples, {:.1} % of the zoom) · self {:.1} %",
            fl.tree.pct(sel.total),
            sel.total,
            sel.total as f64 * 100.0 / zoom_total as f64,
            fl.tree.pct(sel.self_count)
        )),
    ])];
    let mut second = format!(
        " lost stacks: {} user, {} kernel · {} collisions · {} dropped",
        p.lost_user_stacks, p.lost_kernel_stacks, p.collisions, p.dropped
    );
    if let (Some(q), Some(s)) = (&fl.search, share) {
        second.push_str(&format!(" · /{q}: {s:.1} % of samples"));
    } else if fl.typing {
        second.push_str(" · /");
    }
    lines.push(Line::raw(second));
    let third = fl
        .message
        .clone()
        .or_else(|| p.notes.first().cloned())
        .unwrap_or_default();
    lines.push(Line::styled(format!(" {third}"), th.dim()));
    lines.push(Line::styled(
        " ←→/hl frame · ↑↓/kj caller/callee · enter zoom · esc out · / search · t threads · w write",
        th.dim(),
    ));
    f.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), status);
}

/// Paints `node` and its callees into [x, x+width) from its row down.
#[allow(clippy::too_many_arguments)]
fn paint(
    buf: &mut Buffer,
    fl: &Flame,
    hits: &[bool],
    th: &Theme,
    node: usize,
    x: u16,
    width: u16,
    area: Rect,
    base: usize,
) {
    let n = &fl.tree.nodes[node];
    let row = (n.depth - base) as u16;
    if width == 0 || row >= area.height {
        return;
    }
    let y = area.y + row;
    let style = if node == fl.selected {
        Style::new().add_modifier(Modifier::REVERSED | Modifier::BOLD)
    } else if hits[node] {
        if th.color {
            Style::new().bg(Color::Magenta).fg(Color::White)
        } else {
            Style::new().add_modifier(Modifier::UNDERLINED | Modifier::BOLD)
        }
    } else if th.color {
        Style::new().bg(color_of(&n.name)).fg(Color::Black)
    } else {
        Style::new()
    };
    let label: String = format!("{:<w$}", n.name, w = width as usize)
        .chars()
        .take(width as usize)
        .collect();
    // A frame's edge: the last cell is a separator when there is room.
    let label = if width > 2 && !th.color {
        let mut l: String = label.chars().take(width as usize - 1).collect();
        l.push('|');
        l
    } else {
        label
    };
    buf.set_string(x, y, label, style);
    let mut seen = 0u64;
    for &c in &n.children {
        let ct = fl.tree.nodes[c].total;
        let x0 = x + (seen * width as u64 / n.total.max(1)) as u16;
        seen += ct;
        let x1 = x + (seen * width as u64 / n.total.max(1)) as u16;
        paint(buf, fl, hits, th, c, x0, x1 - x0, area, base);
    }
}
