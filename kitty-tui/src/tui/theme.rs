//! Colours and emphasis: one place that decides how severity, health, dim
//! and selected text look, with and without colour (NO_COLOR).

use kitty_core::model::Severity;
use ratatui::style::{Color, Modifier, Style};

#[derive(Debug, Clone, Copy)]
pub struct Theme {
    pub color: bool,
}

impl Theme {
    pub fn sev(&self, s: Severity) -> Style {
        match (self.color, s) {
            (true, Severity::Critical) => Style::new()
                .fg(Color::White)
                .bg(Color::Red)
                .add_modifier(Modifier::BOLD),
            (true, Severity::Warning) => Style::new().fg(Color::Black).bg(Color::Yellow),
            (false, Severity::Critical) => {
                Style::new().add_modifier(Modifier::REVERSED | Modifier::BOLD)
            }
            (false, Severity::Warning) => {
                Style::new().add_modifier(Modifier::UNDERLINED | Modifier::BOLD)
            }
        }
    }

    pub fn ok(&self) -> Style {
        if self.color {
            Style::new().fg(Color::Green)
        } else {
            Style::new()
        }
    }

    pub fn dim(&self) -> Style {
        Style::new().add_modifier(Modifier::DIM)
    }

    pub fn title(&self) -> Style {
        Style::new().add_modifier(Modifier::BOLD)
    }

    pub fn selected(&self) -> Style {
        if self.color {
            Style::new().bg(Color::Blue).fg(Color::White)
        } else {
            Style::new().add_modifier(Modifier::REVERSED)
        }
    }

    /// The line the rank's own series is drawn with in charts.
    pub fn series(&self) -> Style {
        if self.color {
            Style::new().fg(Color::Cyan)
        } else {
            Style::new()
        }
    }

    /// The recording indicator.
    pub fn rec(&self) -> Style {
        if self.color {
            Style::new().fg(Color::Red)
        } else {
            self.title()
        }
    }

    /// A search hit in the flame graph.
    pub fn hit(&self) -> Style {
        if self.color {
            Style::new().bg(Color::Magenta).fg(Color::White)
        } else {
            Style::new().add_modifier(Modifier::UNDERLINED | Modifier::BOLD)
        }
    }
}
