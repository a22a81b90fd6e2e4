//! The network views: top talkers from the flow probe (`:flows`) and the
//! latency histogram bars of the rank detail view.

use super::app::App;
use super::draw::Theme;
use kitty_core::signals::{bytes, format_value};
use kitty_core::talkers::top_talkers;
use ratatui::prelude::*;
use ratatui::widgets::{Block, Paragraph, Row, Table};

pub fn draw_flows(f: &mut Frame, app: &App, area: Rect, th: &Theme) {
    let Some(fr) = &app.frame else { return };
    let rows_fit = area.height.saturating_sub(4) as usize;
    let talkers = top_talkers(fr, rows_fit.max(1));
    let coverage = fr
        .host
        .signals
        .get("flow_coverage_pct")
        .map_or("-".to_string(), |v| format!("{v:.0} %"));
    let title = match fr.sources.get("ebpf.flow") {
        Some(s) if s.is_ok() => format!(
            " top talkers · {} flows · coverage of interface bytes {coverage} ",
            fr.flows.len()
        ),
        Some(s) => format!(
            " top talkers · flow probe {}: {} ",
            s.status,
            s.reason.clone().unwrap_or_default()
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

/// Buckets (upper bound in us, count) folded into powers of two and drawn
/// as bars: "  128 us ████████ 41".
pub fn histogram_lines(buckets: &[(f64, u64)], width: usize) -> Vec<Line<'static>> {
    let mut octaves: Vec<(f64, u64)> = Vec::new();
    for &(upper, n) in buckets {
        let top = upper.max(1.0).log2().ceil().exp2();
        match octaves.last_mut() {
            Some((t, c)) if *t == top => *c += n,
            _ => octaves.push((top, n)),
        }
    }
    let max = octaves.iter().map(|o| o.1).max().unwrap_or(1).max(1);
    let bar_w = width.saturating_sub(20).max(4);
    octaves
        .iter()
        .map(|&(top, n)| {
            let len = ((n as f64 / max as f64) * bar_w as f64).ceil() as usize;
            Line::from(format!(
                "{:>9} {:<bar_w$} {n}",
                format!("≤{}", format_value("runq_p99_us", top)),
                "█".repeat(len.min(bar_w)),
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_fold_into_octaves_with_the_largest_bar_full() {
        let lines = histogram_lines(&[(9.0, 1), (10.0, 1), (100.0, 4), (128.0, 4)], 40);
        let text: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
        assert_eq!(text.len(), 2, "{text:?}");
        assert!(
            text[0].contains("16") && text[0].ends_with(" 2"),
            "{text:?}"
        );
        assert!(
            text[1].contains("128") && text[1].ends_with(" 8"),
            "{text:?}"
        );
        assert!(text[1].matches('█').count() > text[0].matches('█').count());
    }
}
