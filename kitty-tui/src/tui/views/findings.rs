//! The findings pane: the slow-window placement findings (pinning,
//! co-location) with the remedy each points at. Shown under the rank table
//! only while there are some; never mixed with the verdicts.

use super::Ctx;
use kitty_core::model::Finding;
use ratatui::prelude::*;
use ratatui::widgets::{Block, Paragraph, Wrap};

/// The most findings the pane shows before it says how many more.
const MAX_LINES: usize = 4;

/// The pane's height for these findings (0: no pane).
pub fn height(findings: &[Finding]) -> u16 {
    match findings.len() {
        0 => 0,
        n => n.min(MAX_LINES) as u16 + 2,
    }
}

pub fn draw(f: &mut Frame, area: Rect, cx: &Ctx, findings: &[Finding]) {
    let th = &cx.th;
    let rows = area.height.saturating_sub(2) as usize;
    let mut lines: Vec<Line> = findings
        .iter()
        .take(rows)
        .map(|x| {
            Line::from(vec![
                Span::styled(
                    x.message.to_string(),
                    th.sev(kitty_core::model::Severity::Warning),
                ),
                Span::styled(format!(" → {}", x.remedy), th.dim()),
            ])
        })
        .collect();
    if findings.len() > rows && rows > 0 {
        lines.truncate(rows - 1);
        lines.push(Line::styled(
            format!(
                "… {} more (snapshot --json lists them all)",
                findings.len() - rows + 1
            ),
            th.dim(),
        ));
    }
    f.render_widget(
        Paragraph::new(lines).wrap(Wrap { trim: true }).block(
            Block::bordered().title(" findings (steady window: placement, not stragglers) "),
        ),
        area,
    );
}
