//! The node-verdicts pane (cluster view): whole nodes whose every rank of
//! a job is slow on the same signal, above the rank table while there are
//! some. A slow node points at the node (its CPUs, NIC or switch port),
//! not at a rank.

use super::Ctx;
use kitty_core::model::{NodeVerdict, Severity};
use ratatui::prelude::*;
use ratatui::widgets::{Block, Paragraph};

/// The most node verdicts listed before the pane says how many more.
const MAX_LINES: usize = 3;

/// The pane's height for these verdicts (0: no pane).
pub fn height(v: &[NodeVerdict]) -> u16 {
    match v.len() {
        0 => 0,
        n => n.min(MAX_LINES) as u16 + 2,
    }
}

pub fn draw(f: &mut Frame, area: Rect, cx: &Ctx, v: &[NodeVerdict]) {
    let mut lines: Vec<Line> = v
        .iter()
        .take(MAX_LINES)
        .map(|n| Line::styled(n.message.to_string(), cx.th.sev(Severity::Critical)))
        .collect();
    if v.len() > MAX_LINES {
        lines.pop();
        lines.push(Line::styled(
            format!(
                "… {} more (cluster --json lists them all)",
                v.len() - MAX_LINES + 1
            ),
            cx.th.dim(),
        ));
    }
    f.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(" slow nodes ")),
        area,
    );
}
