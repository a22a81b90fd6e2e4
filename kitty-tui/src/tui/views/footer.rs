//! The footer: the prompt while typing, a message, or the main keys as
//! they are bound.

use super::Ctx;
use crate::tui::app::{Input, View};
use crate::tui::keymap::Action;
use ratatui::prelude::*;
use ratatui::widgets::Paragraph;

pub fn draw(f: &mut Frame, area: Rect, cx: &Ctx) {
    let (app, th) = (cx.app, &cx.th);
    let line = match (app.input(), app.message()) {
        (Some(Input::Filter(t)), _) => Line::raw(format!("/{t}▏")),
        (Some(Input::Command(t)), _) => Line::raw(format!(":{t}▏")),
        (None, Some(m)) => Line::styled(m.to_string(), th.title()),
        (None, None) => {
            // The bindings in force (keys.conf may have changed them).
            let k = |a| app.keymap().key_for(a);
            let text = match app.view() {
                // Quit and help first: they must fit at any width.
                View::Main => format!(
                    " {} quit  {} help  {}/{} move  {} detail  {} filter  {} sort  {} pause  {}/{} step  {} command",
                    k(Action::Quit),
                    k(Action::Help),
                    k(Action::Up),
                    k(Action::Down),
                    k(Action::Open),
                    k(Action::Filter),
                    k(Action::Sort),
                    k(Action::Pause),
                    k(Action::StepForward),
                    k(Action::StepBack),
                    k(Action::Command),
                ),
                _ => format!(
                    " {} quit  {} help  {} back",
                    k(Action::Quit),
                    k(Action::Help),
                    k(Action::Back)
                ),
            };
            Line::styled(text, th.dim())
        }
    };
    f.render_widget(Paragraph::new(line), area);
}
