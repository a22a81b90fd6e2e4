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
    Open,
    Back,
    Filter,
    Command,
    Sort,
    Pause,
    StepBack,
    StepForward,
    Faster,
    Slower,
    Profile,
}

/// Every action with its config name, default keys and help text, in help order.
pub const ACTIONS: &[(Action, &str, &[&str], &str)] = &[
    (Action::Up, "up", &["k", "up"], "move up"),
    (Action::Down, "down", &["j", "down"], "move down"),
    (Action::Top, "top", &["g", "home"], "first row"),
    (Action::Bottom, "bottom", &["G", "end"], "last row"),
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
        "filter rows (rank, pid, job, command, verdict)",
    ),
    (
        Action::Command,
        "command",
        &[":"],
        "command: ranks, events, gpus, help, sort COL, seek TIME, q",
    ),
    (Action::Sort, "sort", &["s"], "cycle the sort column"),
    (
        Action::Pause,
        "pause",
        &["space"],
        "pause the view (sampling and recording go on) / play replay",
    ),
    (
        Action::StepBack,
        "step_back",
        &["t"],
        "one frame back (paused or replay)",
    ),
    (
        Action::StepForward,
        "step_forward",
        &["T"],
        "one frame forward (paused or replay)",
    ),
    (
        Action::Profile,
        "profile",
        &["p"],
        "on-CPU profile of the selected rank (5 s), then its flame graph",
    ),
    (Action::Faster, "faster", &[">", "+"], "replay faster"),
    (Action::Slower, "slower", &["<", "-"], "replay slower"),
    (Action::Help, "help", &["?"], "this help"),
    (Action::Quit, "quit", &["q", "ctrl-c"], "quit"),
];

#[derive(Debug, Clone)]
pub struct KeyMap {
    map: HashMap<(KeyCode, bool), Action>,
    pub source: Option<String>,
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
        KeyMap { map, source: None }
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
    pub fn load() -> Result<Self, String> {
        let mut km = KeyMap::default();
        if let Some(p) = Self::config_path().filter(|p| p.exists()) {
            let text = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
            km.apply(&text)
                .map_err(|e| format!("{}: {e}", p.display()))?;
            km.source = Some(p.display().to_string());
        }
        Ok(km)
    }

    /// Applies `action = key, key` lines: the action's default keys are replaced.
    pub fn apply(&mut self, text: &str) -> Result<(), String> {
        for (n, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let (name, keys) = line
                .split_once('=')
                .ok_or(format!("line {}: expected `action = key`", n + 1))?;
            let action = ACTIONS
                .iter()
                .find(|(_, nm, _, _)| *nm == name.trim())
                .map(|(a, ..)| *a)
                .ok_or(format!("line {}: unknown action {:?}", n + 1, name.trim()))?;
            self.map.retain(|_, a| *a != action);
            for k in keys.split(',') {
                let key =
                    parse_key(k).ok_or(format!("line {}: unknown key {:?}", n + 1, k.trim()))?;
                self.map.insert(key, action);
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
            .map(|((code, ctrl), _)| {
                let k = match code {
                    KeyCode::Char(' ') => "space".to_string(),
                    KeyCode::Char(c) => c.to_string(),
                    KeyCode::F(n) => format!("f{n}"),
                    other => format!("{other:?}").to_lowercase(),
                };
                if *ctrl {
                    format!("ctrl-{k}")
                } else {
                    k
                }
            })
            .collect();
        keys.sort();
        keys
    }
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
        assert!(km.apply("nope = q").unwrap_err().contains("unknown action"));
        assert!(km
            .apply("quit = banana")
            .unwrap_err()
            .contains("unknown key"));
    }
}
