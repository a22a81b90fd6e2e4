//! Key bindings: actions, their default keys (k9s / below habits), and the
//! optional config file that rebinds them.
//!
//! File: `$XDG_CONFIG_HOME/kitty-tui/keys.conf` (else `~/.config/kitty-tui/keys.conf`),
//! one `action = key[, key...]` per line, `#` comments. Keys: a character
//! (`q`, `J`, `?`), or `enter`, `esc`, `space`, `tab`, `up`, `down`, `left`,
//! `right`, `pgup`, `pgdown`, `home`, `end`, `f1`..`f12`, `ctrl-x`.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use std::collections::HashMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    Quit,
    Help,
    Up,
    Down,
    Top,
    Bottom,
    PageUp,
    PageDown,
    Open,
    Back,
    Filter,
    Command,
    Sort,
    SortReverse,
    Pause,
    StepBack,
    StepForward,
    Faster,
    Slower,
    Profile,
    FlightRecorder,
    Redraw,
}

/// Every action with its config name, default keys and help text, in help order.
pub const ACTIONS: &[(Action, &str, &[&str], &str)] = &[
    (Action::Up, "up", &["k", "up"], "move up"),
    (Action::Down, "down", &["j", "down"], "move down"),
    (Action::Top, "top", &["g", "home"], "first row"),
    (Action::Bottom, "bottom", &["G", "end"], "last row"),
    (
        Action::PageUp,
        "page_up",
        &["pgup", "ctrl-b"],
        "a page of rows up",
    ),
    (
        Action::PageDown,
        "page_down",
        &["pgdown", "ctrl-f"],
        "a page of rows down",
    ),
    (
        Action::Open,
        "open",
        &["enter"],
        "open the rank's detail view",
    ),
    (Action::Back, "back", &["esc"], "back / clear filter"),
    (
        Action::Filter,
        "filter",
        &["/"],
        "filter rows (rank, pid, node, job, command, verdict)",
    ),
    (
        Action::Command,
        "command",
        &[":"],
        "command: ranks, events, gpus, help, sort COL, seek TIME, q",
    ),
    (Action::Sort, "sort", &["s"], "cycle the sort column"),
    (
        Action::SortReverse,
        "sort_reverse",
        &["S"],
        "reverse the sort order",
    ),
    (
        Action::Pause,
        "pause",
        &["space"],
        "pause the view (sampling and recording go on) / play replay",
    ),
    // below and atop: `t` is the next sample, `T` the previous one.
    (
        Action::StepForward,
        "step_forward",
        &["t"],
        "one frame forward (paused or replay)",
    ),
    (
        Action::StepBack,
        "step_back",
        &["T"],
        "one frame back (paused or replay)",
    ),
    (
        Action::Profile,
        "profile",
        &["p"],
        "on- and off-CPU profile of the selected rank (5 s), then its flame graphs",
    ),
    (
        Action::FlightRecorder,
        "flight_recorder",
        &["F"],
        "Flight Recorder dumps of the selected rank's job (PyTorch), and who is behind",
    ),
    (Action::Faster, "faster", &[">", "+"], "replay faster"),
    (Action::Slower, "slower", &["<", "-"], "replay slower"),
    (Action::Redraw, "redraw", &["ctrl-l"], "redraw the screen"),
    (Action::Help, "help", &["?"], "this help"),
    // Ctrl-C quits whatever the bindings say (see `App::on_key`).
    (
        Action::Quit,
        "quit",
        &["q", "ctrl-c"],
        "quit (ctrl-c always)",
    ),
];

#[derive(Debug, Clone)]
pub struct KeyMap {
    map: HashMap<(KeyCode, bool), Action>,
    /// The file the bindings came from, when one was read.
    source: Option<String>,
    /// Where a file would be read from.
    looked_at: Option<std::path::PathBuf>,
    /// What the file did that is allowed but likely a mistake (a key taken
    /// from another action, one key twice).
    warnings: Vec<String>,
}

/// A key configuration that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum KeyMapError {
    #[error("{path}: {err}")]
    Read { path: String, err: std::io::Error },
    #[error("line {line}: expected `action = key`")]
    Syntax { line: usize },
    #[error("line {line}: unknown action {name:?}")]
    Action { line: usize, name: String },
    #[error("line {line}: unknown key {key:?}")]
    Key { line: usize, key: String },
    #[error("{path}: {err}")]
    In { path: String, err: Box<KeyMapError> },
}

pub fn parse_key(s: &str) -> Option<(KeyCode, bool)> {
    let s = s.trim();
    if let Some(rest) = s.strip_prefix("ctrl-") {
        let c = rest.chars().next()?;
        return (rest.chars().count() == 1)
            .then_some((KeyCode::Char(c.to_ascii_lowercase()), true));
    }
    let code = match s {
        "enter" => KeyCode::Enter,
        "esc" => KeyCode::Esc,
        "space" => KeyCode::Char(' '),
        "tab" => KeyCode::Tab,
        "up" => KeyCode::Up,
        "down" => KeyCode::Down,
        "left" => KeyCode::Left,
        "right" => KeyCode::Right,
        "pgup" => KeyCode::PageUp,
        "pgdown" => KeyCode::PageDown,
        "home" => KeyCode::Home,
        "end" => KeyCode::End,
        f if f.starts_with('f') && f.len() > 1 => KeyCode::F(f[1..].parse().ok()?),
        c if c.chars().count() == 1 => KeyCode::Char(c.chars().next()?),
        _ => return None,
    };
    Some((code, false))
}

impl Default for KeyMap {
    fn default() -> Self {
        let mut map = HashMap::new();
        for (a, _, keys, _) in ACTIONS {
            for k in *keys {
                map.insert(parse_key(k).expect("default keys parse"), *a);
            }
        }
        KeyMap {
            map,
            source: None,
            looked_at: None,
            warnings: Vec::new(),
        }
    }
}

impl KeyMap {
    pub fn config_path() -> Option<std::path::PathBuf> {
        let base = std::env::var_os("XDG_CONFIG_HOME")
            .map(std::path::PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".config"))
            })?;
        Some(base.join("kitty-tui/keys.conf"))
    }

    /// Defaults, overridden by the config file when it exists.
    pub fn load() -> Result<Self, KeyMapError> {
        let mut km = KeyMap {
            looked_at: Self::config_path(),
            ..KeyMap::default()
        };
        if let Some(p) = km.looked_at.clone().filter(|p| p.exists()) {
            let path = p.display().to_string();
            let text = std::fs::read_to_string(&p).map_err(|err| KeyMapError::Read {
                path: path.clone(),
                err,
            })?;
            km.apply(&text).map_err(|err| KeyMapError::In {
                path: path.clone(),
                err: Box::new(err),
            })?;
            km.source = Some(path);
        }
        Ok(km)
    }

    /// Where the bindings come from, for the help view.
    pub fn source_text(&self) -> String {
        match &self.source {
            Some(s) => s.clone(),
            None => format!(
                "defaults (rebind in {})",
                self.looked_at
                    .as_ref()
                    .map_or("~/.config/kitty-tui/keys.conf".into(), |p| p
                        .display()
                        .to_string())
            ),
        }
    }

    /// Bindings that were accepted but look like a mistake.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Applies `action = key, key` lines: the action's default keys are
    /// replaced. A key taken from another action moves to the new one, with
    /// a warning.
    pub fn apply(&mut self, text: &str) -> Result<(), KeyMapError> {
        for (n, line) in text.lines().enumerate() {
            let line_no = n + 1;
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let (name, keys) = line
                .split_once('=')
                .ok_or(KeyMapError::Syntax { line: line_no })?;
            let action = ACTIONS
                .iter()
                .find(|(_, nm, _, _)| *nm == name.trim())
                .map(|(a, ..)| *a)
                .ok_or_else(|| KeyMapError::Action {
                    line: line_no,
                    name: name.trim().to_string(),
                })?;
            self.map.retain(|_, a| *a != action);
            for k in keys.split(',') {
                let key = parse_key(k).ok_or_else(|| KeyMapError::Key {
                    line: line_no,
                    key: k.trim().to_string(),
                })?;
                if let Some(before) = self.map.insert(key, action) {
                    if before != action {
                        self.warnings.push(format!(
                            "keys.conf line {line_no}: {} was bound to {}; now {}",
                            key_name(key),
                            action_name(before),
                            action_name(action)
                        ));
                    } else {
                        self.warnings.push(format!(
                            "keys.conf line {line_no}: {} is listed twice",
                            key_name(key)
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    pub fn action(&self, ev: &KeyEvent) -> Option<Action> {
        let ctrl = ev.modifiers.contains(KeyModifiers::CONTROL);
        let code = match ev.code {
            KeyCode::Char(c) if ctrl => KeyCode::Char(c.to_ascii_lowercase()),
            c => c,
        };
        self.map.get(&(code, ctrl)).copied()
    }

    /// The keys bound to an action, for the help view.
    pub fn keys_for(&self, action: Action) -> Vec<String> {
        let mut keys: Vec<String> = self
            .map
            .iter()
            .filter(|(_, a)| **a == action)
            .map(|(k, _)| key_name(*k))
            .collect();
        // Single characters first (what the footer shows), then names.
        keys.sort_by_key(|k| (k.chars().count() > 1, k.clone()));
        keys
    }

    /// The first key of an action, for the footer ("-" when unbound).
    pub fn key_for(&self, action: Action) -> String {
        self.keys_for(action)
            .into_iter()
            .next()
            .unwrap_or_else(|| "-".into())
    }
}

/// A key as the config file writes it.
fn key_name((code, ctrl): (KeyCode, bool)) -> String {
    let k = match code {
        KeyCode::Char(' ') => "space".to_string(),
        KeyCode::Char(c) => c.to_string(),
        KeyCode::F(n) => format!("f{n}"),
        KeyCode::PageUp => "pgup".into(),
        KeyCode::PageDown => "pgdown".into(),
        other => format!("{other:?}").to_lowercase(),
    };
    if ctrl {
        format!("ctrl-{k}")
    } else {
        k
    }
}

fn action_name(a: Action) -> &'static str {
    ACTIONS.iter().find(|x| x.0 == a).map_or("?", |x| x.1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_rebinding() {
        let mut km = KeyMap::default();
        let ev = |c| KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE);
        assert_eq!(km.action(&ev('j')), Some(Action::Down));
        assert_eq!(
            km.action(&KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)),
            Some(Action::Quit)
        );
        km.apply("# mine\nquit = x, f10\n").unwrap();
        assert_eq!(km.action(&ev('x')), Some(Action::Quit));
        assert_eq!(km.action(&ev('q')), None);
        assert_eq!(
            km.action(&KeyEvent::new(KeyCode::F(10), KeyModifiers::NONE)),
            Some(Action::Quit)
        );
        assert!(km.warnings().is_empty());
        km.apply("help = j\nhelp = j, j").unwrap();
        assert!(
            km.warnings()[0].contains("j was bound to down; now help"),
            "{:?}",
            km.warnings()
        );
        assert!(km.warnings().iter().any(|w| w.contains("listed twice")));
        assert_eq!(km.key_for(Action::Quit), "x");
        assert!(km
            .apply("nope = q")
            .unwrap_err()
            .to_string()
            .contains("unknown action"));
        assert!(km
            .apply("quit = banana")
            .unwrap_err()
            .to_string()
            .contains("unknown key"));
    }
}
