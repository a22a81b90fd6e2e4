//! `:` commands: views by name (k9s habit), sort, seek, quit.

use super::{App, View, SORTS};

impl App {
    pub fn run_command(&mut self, cmd: &str) {
        let mut parts = cmd.split_whitespace();
        match (parts.next(), parts.next()) {
            (Some("q" | "quit" | "q!"), _) => self.quit = true,
            (Some("ranks" | "rank" | "main"), _) => self.nav.view = View::Main,
            (Some("events" | "ev"), _) => self.nav.view = View::Events,
            (Some("gpus" | "gpu"), _) => self.nav.view = View::Gpus,
            (Some("nics" | "nic" | "rdma"), _) => self.nav.view = View::Nics,
            (Some("fr" | "flight"), _) => self.nav.view = View::FlightRecorder,
            (Some("flows" | "talkers" | "net"), _) => self.nav.view = View::Flows,
            (Some("flame" | "profile"), _) => self.nav.view = View::Flame,
            (Some("help" | "h"), _) => self.nav.view = View::Help,
            (Some("sort"), Some(col)) => match SORTS.iter().position(|(n, _)| *n == col) {
                Some(i) => self.nav.sort = i,
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

    /// Selects a row (tests and the mouse).
    pub fn select(&mut self, row: usize) {
        self.nav.selected = row;
    }

    /// Switches to a view (tests; users switch with keys and commands).
    pub fn show(&mut self, view: View) {
        self.nav.view = view;
    }
}

/// `HH:MM:SS` or `HH:MM` as seconds of the day.
pub(super) fn parse_clock(s: &str) -> Option<u64> {
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
