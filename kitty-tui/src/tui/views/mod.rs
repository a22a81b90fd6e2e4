//! The views: each file draws one part of the screen from the app's state,
//! with the same signature, `draw(frame, area, &Ctx)`. Nothing here samples,
//! reads files or changes state; formatting goes through
//! `kitty_core::model::format` and colours through the theme.

mod detail;
mod dumps;
mod events;
mod findings;
mod flame;
mod flows;
mod footer;
mod gpus;
mod header;
mod help;
mod host;
mod nics;
mod nodes;
mod ranks;

use super::app::{App, View};
use super::theme::Theme;
use ratatui::layout::{Constraint, Layout};
use ratatui::widgets::{Paragraph, Wrap};
use ratatui::Frame;

/// What every view draws from.
pub struct Ctx<'a> {
    pub app: &'a App,
    pub th: Theme,
}

/// The smallest terminal kitty draws in.
pub const MIN_SIZE: (u16, u16) = (30, 8);

pub fn draw(f: &mut Frame, app: &App) {
    let area = f.area();
    // Only what this draw puts on screen can be clicked.
    app.layout.rank_rows.set(None);
    let cx = Ctx {
        app,
        th: Theme { color: app.color() },
    };
    if area.width < MIN_SIZE.0 || area.height < MIN_SIZE.1 {
        let p = Paragraph::new(format!(
            "kitty: terminal too small ({}x{}); need {}x{}",
            area.width, area.height, MIN_SIZE.0, MIN_SIZE.1
        ))
        .wrap(Wrap { trim: true });
        f.render_widget(p, area);
        return;
    }
    let [head, body, foot] = Layout::vertical([
        Constraint::Length(header::height(app)),
        Constraint::Min(3),
        Constraint::Length(1),
    ])
    .areas(area);
    header::draw(f, head, &cx);
    match app.view() {
        View::Main => ranks::draw(f, body, &cx),
        View::Detail => detail::draw(f, body, &cx),
        View::Help => help::draw(f, body, &cx),
        View::Events => events::draw(f, body, &cx, true),
        View::Gpus => gpus::draw_detail(f, body, &cx),
        View::Nics => nics::draw_detail(f, body, &cx),
        View::FlightRecorder => dumps::draw(f, body, &cx),
        View::Flows => flows::draw(f, body, &cx),
        View::Flame => flame::draw(f, body, &cx),
    }
    footer::draw(f, foot, &cx);
}
