//! The flame view's state: the finished profiles (on-CPU and off-CPU, one
//! tab each), the shown one's tree, and where the user is in it (selected
//! frame, zoom, search, merged or per-thread).

use crossterm::event::{KeyCode, KeyEvent};
use kitty_core::profile::flame::FlameTree;
use kitty_core::profile::Profile;

pub struct FlameState {
    profiles: Vec<Profile>,
    /// The shown profile.
    tab: usize,
    pub tree: FlameTree,
    pub per_thread: bool,
    pub selected: usize,
    pub zoom: usize,
    pub search: Option<String>,
    /// Typing a search (after `/`).
    pub typing: bool,
    /// What the last write said.
    pub message: Option<String>,
}

/// What a key did in the flame view.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    Consumed,
    /// `w`: the profile should be written to files.
    Write,
    /// Not a flame key (Esc at the top leaves the view).
    NotMine,
}

impl FlameState {
    /// The flame view of profiles taken together (at least one).
    pub fn new(profiles: Vec<Profile>) -> FlameState {
        let profiles = if profiles.is_empty() {
            vec![Profile::default()]
        } else {
            profiles
        };
        let tree = FlameTree::build(&profiles[0], false);
        FlameState {
            profiles,
            tab: 0,
            tree,
            per_thread: false,
            selected: 0,
            zoom: 0,
            search: None,
            typing: false,
            message: None,
        }
    }

    /// The profile shown.
    pub fn profile(&self) -> &Profile {
        &self.profiles[self.tab]
    }

    /// Every profile with whether it is shown (the tabs).
    pub fn tabs(&self) -> impl Iterator<Item = (&Profile, bool)> {
        self.profiles
            .iter()
            .enumerate()
            .map(move |(i, p)| (p, i == self.tab))
    }

    fn rebuild(&mut self) {
        self.tree = FlameTree::build(&self.profiles[self.tab], self.per_thread);
        self.selected = 0;
        self.zoom = 0;
    }

    pub fn on_key(&mut self, ev: KeyEvent) -> Outcome {
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
            return Outcome::Consumed;
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
                    return Outcome::NotMine;
                }
            }
            KeyCode::Char('/') => {
                self.typing = true;
                self.search = Some(String::new());
            }
            KeyCode::Char('t') => {
                self.per_thread = !self.per_thread;
                self.rebuild();
            }
            KeyCode::Tab | KeyCode::BackTab => {
                let n = self.profiles.len();
                self.tab = if ev.code == KeyCode::Tab {
                    (self.tab + 1) % n
                } else {
                    (self.tab + n - 1) % n
                };
                self.rebuild();
            }
            KeyCode::Char('w') => return Outcome::Write,
            _ => return Outcome::NotMine,
        }
        Outcome::Consumed
    }
}
