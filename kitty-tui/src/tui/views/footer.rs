//! The footer: the prompt while typing, a message, or the main keys.

use super::Ctx;
use crate::tui::app::{Input, View};
use ratatui::prelude::*;
use ratatui::widgets::Paragraph;

pub fn draw(f: &mut Frame, area: Rect, cx: &Ctx) {
    let (app, th) = (cx.app, &cx.th);
    let line = match (app.input(), app.message()) {
        (Some(Input::Filter(t)), _) => Line::raw(format!("/{t}▏")),
        (Some(Input::Command(t)), _) => Line::raw(format!(":{t}▏")),
        (None, Some(m)) => Line::styled(m.to_string(), th.title()),
        (None, None) => Line::styled(
            match app.view() {
                View::Main => " ↑↓/jk move  ⏎ detail  / filter  s sort  space pause  t/T step  : command  ? help  q quit",
                _ => " esc back  ? help  q quit",
            },
            th.dim(),
        ),
    };
    f.render_widget(Paragraph::new(line), area);
}
