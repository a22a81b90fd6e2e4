//! Events, newest first: as a pane of the main view, or the `:events` view.

use super::Ctx;
use kitty_core::model::time::clock;
use kitty_core::model::{EventKind, Severity};
use ratatui::prelude::*;
use ratatui::widgets::{Block, Paragraph};

pub fn draw(f: &mut Frame, area: Rect, cx: &Ctx, full: bool) {
    let th = &cx.th;
    let n = area.height.saturating_sub(2) as usize;
    let lines: Vec<Line> = cx
        .app
        .events()
        .rev()
        .take(n)
        .map(|e| {
            let style = match e.kind {
                EventKind::VerdictRaised | EventKind::SourceLost | EventKind::SamplingGap => {
                    th.sev(Severity::Warning)
                }
                _ => Style::new(),
            };
            Line::from(vec![
                Span::styled(format!("{} ", clock(e.wall_ns)), th.dim()),
                Span::styled(e.message.to_string(), style),
            ])
        })
        .collect();
    let title = if full {
        " events (newest first) "
    } else {
        " events "
    };
    f.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(title)),
        area,
    );
}
