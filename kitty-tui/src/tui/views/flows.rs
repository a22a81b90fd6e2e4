//! The `:flows` view: top talkers from the flow probe (who talks to whom,
//! busiest first) with the share of interface bytes the probe explains.

use super::Ctx;
use kitty_core::analysis::talkers::top_talkers;
use kitty_core::model::format::bytes;
use kitty_core::model::{Sig, Source};
use ratatui::prelude::*;
use ratatui::widgets::{Block, Paragraph, Row, Table};

pub fn draw(f: &mut Frame, area: Rect, cx: &Ctx) {
    let th = &cx.th;
    let Some(fr) = cx.app.frame() else { return };
    let rows_fit = area.height.saturating_sub(4) as usize;
    let talkers = top_talkers(fr, rows_fit.max(1));
    let coverage = fr
        .host
        .signals
        .get(Sig::FlowCoveragePct)
        .map_or("-".to_string(), |v| format!("{v:.0} %"));
    let title = match fr.sources.get(Source::EbpfFlow) {
        Some(s) if s.is_ok() => format!(
            " top talkers · {} flows · coverage of interface bytes {coverage} ",
            fr.flows.len()
        ),
        Some(s) => format!(
            " top talkers · flow probe {}: {} ",
            s.status,
            s.reason.as_deref().unwrap_or_default()
        ),
        None => " top talkers · flow probe not loaded (--no-ebpf?) ".to_string(),
    };
    let rows: Vec<Row> = talkers
        .iter()
        .map(|t| {
            Row::new(vec![
                t.who.clone(),
                t.peer.clone(),
                t.connections.to_string(),
                format!("{}/s", bytes(t.tx_bytes_per_s)),
                format!("{}/s", bytes(t.rx_bytes_per_s)),
                bytes(t.total_bytes as f64),
                format!("{:.0}", t.share_pct),
            ])
        })
        .collect();
    let table = Table::new(
        rows,
        [
            Constraint::Min(12),
            Constraint::Length(24),
            Constraint::Length(5),
            Constraint::Length(11),
            Constraint::Length(11),
            Constraint::Length(10),
            Constraint::Length(6),
        ],
    )
    .header(
        Row::new(vec![
            "PROCESS", "PEER", "CONN", "SENT", "RECV", "TOTAL", "SHARE%",
        ])
        .style(th.title()),
    )
    .block(Block::bordered().title(title.clone()));
    if talkers.is_empty() {
        f.render_widget(
            Paragraph::new("  no traffic in the last seconds")
                .block(Block::bordered().title(title)),
            area,
        );
    } else {
        f.render_widget(table, area);
    }
}
