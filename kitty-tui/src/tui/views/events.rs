//! Events, newest first: as a pane of the main view, or the `:events` view.

use super::Ctx;
use kitty_core::model::time::civil;
use kitty_core::model::{EventKind, Severity};
use ratatui::prelude::*;
use ratatui::widgets::{Block, Paragraph, Wrap};

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
                Span::styled(
                    format!("{} ", civil(e.wall_ns, cx.app.utc()).time),
                    th.dim(),
                ),
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
        // Wrapped, so that each line keeps its numbers at any width.
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .block(Block::bordered().title(title)),
        area,
    );
}
