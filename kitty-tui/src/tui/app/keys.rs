//! What each key does: the keymap's actions, the filter and command prompts,
//! and the flame view's own keys.

use super::{App, Input, Request, View, SORTS};
use crate::tui::keymap::Action;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// Rows a page key moves.
const PAGE: usize = 10;

impl App {
    pub fn on_key(&mut self, ev: KeyEvent) {
        if let Some(input) = self.nav.input.take() {
            self.on_input_key(input, ev);
            return;
        }
        self.message = None;
        // Ctrl-C quits whatever keys.conf says (a terminal habit).
        if ev.code == KeyCode::Char('c') && ev.modifiers.contains(KeyModifiers::CONTROL) {
            self.quit = true;
            return;
        }
        if self.nav.view == View::Flame && self.flame_key(ev) {
            return;
        }
        let Some(action) = self.keymap.action(&ev) else {
            return;
        };
        let n = self.rows().len();
        match action {
            Action::Quit => self.quit = true,
            Action::Help => {
                self.nav.view = if self.nav.view == View::Help {
                    View::Main
                } else {
                    View::Help
                }
            }
            Action::Up => self.nav.selected = self.selected_index().saturating_sub(1),
            Action::Down => {
                self.nav.selected = (self.selected_index() + 1).min(n.saturating_sub(1))
            }
            Action::Top => self.nav.selected = 0,
            Action::Bottom => self.nav.selected = n.saturating_sub(1),
            Action::PageUp => self.nav.selected = self.selected_index().saturating_sub(PAGE),
            Action::PageDown => {
                self.nav.selected = (self.selected_index() + PAGE).min(n.saturating_sub(1))
            }
            Action::Redraw => self.requests.push(Request::Redraw),
            Action::Open => {
                if self.nav.view == View::Main && n > 0 {
                    self.nav.view = View::Detail;
                    self.ask_drill();
                }
            }
            Action::Back => {
                if self.nav.view != View::Main {
                    self.nav.view = View::Main;
                } else {
                    self.nav.filter.clear();
                }
            }
            Action::Filter => self.nav.input = Some(Input::Filter(self.nav.filter.clone())),
            Action::Command => self.nav.input = Some(Input::Command(String::new())),
            Action::Sort => self.nav.sort = (self.nav.sort + 1) % SORTS.len(),
            Action::SortReverse => self.nav.reversed = !self.nav.reversed,
            Action::Pause => self.toggle_pause(),
            Action::StepBack => self.step(-1),
            Action::StepForward => self.step(1),
            Action::Faster => self.speed(2.0),
            Action::Slower => self.speed(0.5),
            Action::Profile => self.ask_profile(),
            Action::FlightRecorder => self.ask_dumps(),
        }
    }

    /// A click on a rank row selects it (a second click opens it), the
    /// wheel moves the selection. True when the screen changed.
    pub fn on_mouse(&mut self, m: crossterm::event::MouseEvent) -> bool {
        use crossterm::event::{MouseButton, MouseEventKind};
        let n = self.rows().len();
        match m.kind {
            MouseEventKind::ScrollUp => {
                self.nav.selected = self.selected_index().saturating_sub(1);
                true
            }
            MouseEventKind::ScrollDown => {
                self.nav.selected = (self.selected_index() + 1).min(n.saturating_sub(1));
                true
            }
            MouseEventKind::Down(MouseButton::Left) if self.nav.view == View::Main => {
                let Some((top, height)) = self.layout.rank_rows.get() else {
                    return false;
                };
                // A click on a sortable header sorts by it; again: reversed.
                let hit = {
                    let h = self.layout.sort_headers.borrow();
                    (m.row == h.0)
                        .then(|| h.1.iter().find(|(a, b, _)| (*a..=*b).contains(&m.column)))
                        .flatten()
                        .map(|x| x.2)
                };
                if let Some(i) = hit {
                    if self.nav.sort == i {
                        self.nav.reversed = !self.nav.reversed;
                    } else {
                        self.nav.sort = i;
                        self.nav.reversed = false;
                    }
                    return true;
                }
                if m.row < top || m.row >= top + height {
                    return false;
                }
                let i = (m.row - top) as usize;
                if i >= n {
                    return false;
                }
                if i == self.selected_index() {
                    self.nav.view = View::Detail;
                    self.ask_drill();
                } else {
                    self.nav.selected = i;
                }
                true
            }
            _ => false,
        }
    }

    /// Keys of the flame view; false lets the global bindings have the key.
    fn flame_key(&mut self, ev: KeyEvent) -> bool {
        if let Some(p) = &self.profiling.running {
            if ev.code == KeyCode::Esc {
                p.cancel();
                return true;
            }
            return false;
        }
        if let Some(f) = self.profiling.flame.as_mut() {
            match f.on_key(ev) {
                flame::Outcome::Consumed => return true,
                flame::Outcome::Write => {
                    self.requests.push(Request::WriteProfile);
                    return true;
                }
                flame::Outcome::NotMine => {}
            }
        }
        if ev.code == KeyCode::Esc {
            self.nav.view = View::Main;
            return true;
        }
        false
    }

    /// Opening a cluster rank (live): ask its node for its sockets,
    /// threads and flows; the detail shows the series alone until then, or
    /// if the node does not answer.
    fn ask_drill(&mut self) {
        if self.replay.is_some() {
            return;
        }
        let Some(r) = self.selected_rank() else {
            return;
        };
        let (Some(endpoint), false) = (r.endpoint.as_ref(), r.stale) else {
            return;
        };
        let req = Request::Drill {
            key: r.key,
            endpoint: endpoint.to_string(),
            job: r.labels.job.as_ref().map(|j| j.to_string()),
            rank: r.labels.rank,
        };
        self.drill = Some((r.key, super::Drill::Pending));
        self.requests.push(req);
    }

    /// `p`: ask for a profile of the selected rank.
    fn ask_profile(&mut self) {
        if self.replay.is_some() {
            self.message = Some("profiling needs a live process; this is a replay".into());
            return;
        }
        if self.profiling.running.is_some() {
            self.nav.view = View::Flame;
            return;
        }
        let Some(r) = self.selected_rank() else {
            self.message = Some("no rank selected to profile".into());
            return;
        };
        if let Some(node) = r.node.as_deref() {
            self.message = Some(format!(
                "{} runs on {node}: profile it there (sudo kitty-tui on {node}, then p)",
                r.display_name()
            ));
            return;
        }
        let (pid, name) = (r.key.pid, r.display_name());
        self.profiling.error = None;
        self.requests.push(Request::Profile { pid, name });
        self.nav.view = View::Flame;
    }

    /// The event loop started the profile asked for.
    pub fn profile_started(&mut self, p: crate::tui::profiler::Progress) {
        self.profiling.running = Some(p);
    }

    /// The profile ended (or could not start).
    pub fn profile_finished(&mut self, r: Result<Vec<kitty_core::profile::Profile>, String>) {
        self.profiling.running = None;
        match r {
            Ok(p) => self.profiling.flame = Some(flame::FlameState::new(p)),
            Err(e) => {
                self.message = Some(format!("profile: {e}"));
                self.profiling.error = Some(e);
            }
        }
    }

    /// The result of writing the profile, shown in the flame view.
    pub fn profile_written(&mut self, what: String) {
        if let Some(f) = self.profiling.flame.as_mut() {
            f.message = Some(what);
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
                    self.nav.filter.clear();
                }
                return;
            }
            KeyCode::Enter => {
                if is_filter {
                    self.nav.filter = text;
                    self.nav.selected = 0;
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
            self.nav.filter = text.clone();
            self.nav.selected = 0;
            self.nav.input = Some(Input::Filter(text));
        } else {
            self.nav.input = Some(Input::Command(text));
        }
    }
}

use super::flame;
