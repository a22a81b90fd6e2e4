//! RDMA ports: the pane of the main view (one line per port: state, rate,
//! its ranks, xmit-wait and CNP rates, the problem when it has one) and the
//! `:nics` view (a table of every port's counter rates).

use super::Ctx;
use kitty_core::model::format::compact;
use kitty_core::model::{Frame as KFrame, NicFrame, Severity, Sig, Source};
use ratatui::prelude::*;
use ratatui::widgets::{Block, Cell, Paragraph, Row, Table, Wrap};

/// The rank labels of a port's processes (`r2,r5`).
fn ranks_of(fr: &KFrame, n: &NicFrame) -> String {
    let names: Vec<String> = n
        .pids
        .iter()
        .map(|p| match fr.rank_by_pid(*p).and_then(|r| r.labels.rank) {
            Some(r) => r.to_string(),
            None => format!("pid {p}"),
        })
        .collect();
    if names.is_empty() {
        "-".into()
    } else {
        names.join(",")
    }
}

/// Why there is no port to show, in words.
fn no_nic_lines<'a>(fr: &KFrame, cx: &Ctx) -> Vec<Line<'a>> {
    let why = match fr.sources.get(Source::Rdma) {
        Some(st) => st
            .reason
            .as_deref()
            .map(str::to_string)
            .unwrap_or_else(|| st.status.to_string()),
        None => "this frame has no RDMA data".into(),
    };
    vec![
        Line::styled("No RDMA ports.", cx.th.title()),
        Line::raw(format!("rdma: {why}")),
    ]
}

fn v(n: &NicFrame, s: Sig) -> String {
    n.signals.get(s).map_or("-".into(), |x| compact(s, x))
}

/// The style of a port: critical when degraded.
fn style(n: &NicFrame, cx: &Ctx) -> Style {
    if n.problem.is_some() {
        cx.th.sev(Severity::Critical)
    } else {
        Style::default()
    }
}

pub fn draw_pane(f: &mut Frame, area: Rect, cx: &Ctx) {
    let Some(fr) = cx.app.frame() else { return };
    let lines: Vec<Line> = if fr.nics.is_empty() {
        no_nic_lines(fr, cx)
    } else {
        fr.nics
            .iter()
            .map(|n| {
                let state = n.state.as_deref().unwrap_or("?");
                let mut text = format!(
                    "{} {state} {}Gb r{} wait {} cnp {}",
                    n.id(),
                    v(n, Sig::RdmaRateGbps),
                    ranks_of(fr, n),
                    v(n, Sig::RdmaXmitWaitPerS),
                    v(n, Sig::RdmaCnpPerS),
                );
                if let Some(p) = &n.problem {
                    text.push_str(&format!(" · {p}"));
                }
                Line::styled(text, style(n, cx))
            })
            .collect()
    };
    f.render_widget(
        Paragraph::new(lines)
            .block(Block::bordered().title(" rdma (:nics for detail) "))
            .wrap(Wrap { trim: true }),
        area,
    );
}

/// The `:nics` view's columns: header and signal.
const COLS: &[(&str, Sig)] = &[
    ("RATE", Sig::RdmaRateGbps),
    ("WAIT/s", Sig::RdmaXmitWaitPerS),
    ("CNP/s", Sig::RdmaCnpPerS),
    ("ECN/s", Sig::RdmaEcnMarkedPerS),
    ("PFC/s", Sig::RdmaPausePerS),
    ("RETX/s", Sig::RdmaRetransPerS),
    ("ERR/s", Sig::RdmaErrorsPerS),
    ("DROP/s", Sig::RdmaDiscardsPerS),
    ("TX/s", Sig::RdmaTxBytesPerS),
    ("RX/s", Sig::RdmaRxBytesPerS),
];

pub fn draw_detail(f: &mut Frame, area: Rect, cx: &Ctx) {
    let Some(fr) = cx.app.frame() else { return };
    if fr.nics.is_empty() {
        f.render_widget(
            Paragraph::new(no_nic_lines(fr, cx)).block(Block::bordered().title(" rdma ports ")),
            area,
        );
        return;
    }
    let mut header = vec![Cell::from("PORT"), Cell::from("STATE"), Cell::from("RANKS")];
    header.extend(COLS.iter().map(|(h, _)| Cell::from(*h)));
    header.push(Cell::from("PROBLEM"));
    let rows: Vec<Row> = fr
        .nics
        .iter()
        .map(|n| {
            let mut cells = vec![
                Cell::from(n.id()),
                Cell::from(format!(
                    "{}{}",
                    n.state.as_deref().unwrap_or("?"),
                    n.link_layer
                        .as_deref()
                        .map_or(String::new(), |l| format!(" {}", short_layer(l)))
                )),
                Cell::from(ranks_of(fr, n)),
            ];
            cells.extend(COLS.iter().map(|(_, s)| Cell::from(v(n, *s))));
            cells.push(Cell::from(n.problem.as_deref().unwrap_or("").to_string()));
            Row::new(cells).style(style(n, cx))
        })
        .collect();
    let mut widths = vec![
        Constraint::Length(10),
        Constraint::Length(10),
        Constraint::Length(8),
    ];
    widths.extend(COLS.iter().map(|_| Constraint::Length(8)));
    widths.push(Constraint::Min(10));
    f.render_widget(
        Table::new(rows, widths)
            .header(Row::new(header).style(cx.th.title()))
            .block(Block::bordered().title(format!(" rdma ports ({}) ", fr.nics.len()))),
        area,
    );
}

/// `InfiniBand` -> `IB`, `Ethernet` -> `RoCE`.
fn short_layer(l: &str) -> &str {
    match l {
        "InfiniBand" => "IB",
        "Ethernet" => "RoCE",
        "Unspecified" => "",
        o => o,
    }
}
