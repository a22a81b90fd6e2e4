//! Help: every key with what it does (the bindings in force), the `:`
//! commands, and where the bindings come from.

use super::Ctx;
use crate::tui::app::SORTS;
use crate::tui::keymap::ACTIONS;
use ratatui::prelude::*;
use ratatui::widgets::{Block, Clear, Paragraph, Wrap};

pub fn draw(f: &mut Frame, area: Rect, cx: &Ctx) {
    let th = &cx.th;
    let km = cx.app.keymap();
    let mut lines = vec![Line::styled("Keys", th.title())];
    for (action, _, _, text) in ACTIONS {
        lines.push(Line::raw(format!(
            "  {:<16} {text}",
            km.keys_for(*action).join(", ")
        )));
    }
    let sorts: Vec<&str> = SORTS.iter().map(|s| s.0).collect();
    lines.push(Line::raw(""));
    lines.push(Line::styled("Commands (:)", th.title()));
    lines.push(Line::raw(format!(
        "  :ranks  :events  :gpus  :nics  :fr  :flows  :flame  :help  :q   :sort {}",
        sorts.join("|")
    )));
    lines.push(Line::raw(
        "  :seek +30s | -2m | 5m ago | 12:03:04 | 2026-12-01T12:03:04Z | start | end      (replay)",
    ));
    lines.push(Line::raw(""));
    lines.push(Line::styled("Flame view (after p)", th.title()));
    lines.push(Line::raw(
        "  ←→ hl frame  ↑↓ kj caller/callee  Enter zoom  / search  t per thread  Tab on-CPU | off-CPU  w write",
    ));
    lines.push(Line::raw(""));
    lines.push(Line::raw(format!("Key bindings: {}", km.source_text())));
    lines.push(Line::raw(
        "Mouse: click selects a rank (again: opens it), a header sorts (again: reversed), the wheel moves; Ctrl-C always quits.",
    ));
    lines.push(Line::raw("Cells are highlighted when a rank is an outlier against its peers: yellow warning, red critical."));
    lines.push(Line::raw("A ↳ verdict is a consequence of another rank's (its cause is named); findings are steady-window placement issues with their remedy, never stragglers."));
    f.render_widget(Clear, area);
    f.render_widget(
        Paragraph::new(lines)
            .block(Block::bordered().title(" help "))
            .wrap(Wrap { trim: false }),
        area,
    );
}
