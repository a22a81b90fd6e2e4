//! The rank detail view: charts of the rank's signals against its peers'
//! median band, its sockets, its busiest threads and the run-queue latency
//! of the tick (its percentiles, and its histogram when there is one). A
//! cluster rank shows what its node's `serve` answered for it (the
//! drill-down), or its series alone.

use super::Ctx;
use crate::tui::app::{Drill, DETAIL_SIGNALS};
use crate::tui::widgets::histogram_lines;
use kitty_core::model::format::{bytes, value};
use kitty_core::model::{HistKind, RankFrame, Sig};
use ratatui::prelude::*;
use ratatui::widgets::{
    Axis, Block, Borders, Chart, Dataset, GraphType, Paragraph, Row, Table, Wrap,
};

/// (seconds, value) points of a ring.
fn points(ring: Option<&kitty_core::model::history::Ring>) -> Vec<(f64, f64)> {
    ring.map(|h| h.points().map(|(t, v)| (*t as f64 / 1e9, *v)).collect())
        .unwrap_or_default()
}

fn chart(f: &mut Frame, area: Rect, cx: &Ctx, r: &RankFrame, sig: Sig) {
    let th = &cx.th;
    let mine = points(cx.app.history().rank(r.key, sig));
    let band = points(cx.app.bands().band(r.key, sig));
    let (x0, x1) = (
        mine.first().map_or(0.0, |p| p.0),
        mine.last().map_or(1.0, |p| p.0),
    );
    let ymax = mine
        .iter()
        .chain(&band)
        .map(|p| p.1)
        .fold(0.0f64, f64::max)
        .max(1e-9)
        * 1.1;
    let rank_style = match cx.app.severity(r.key.pid, sig) {
        Some(s) => th.sev(s),
        None => th.series(),
    };
    let datasets = vec![
        Dataset::default()
            .name("peers")
            .marker(symbols::Marker::Braille)
            .graph_type(GraphType::Line)
            .style(th.dim())
            .data(&band),
        Dataset::default()
            .name("rank")
            .marker(symbols::Marker::Braille)
            .graph_type(GraphType::Line)
            .style(rank_style)
            .data(&mine),
    ];
    let peer_now = band.last().map_or("-".into(), |p| value(sig, p.1));
    let chart = Chart::new(datasets)
        .block(
            Block::new()
                .borders(Borders::TOP | Borders::RIGHT)
                .title(format!(
                    "{}: {} (peers {peer_now})",
                    sig.label(),
                    value(sig, r.signal(sig).unwrap_or(0.0))
                )),
        )
        .x_axis(Axis::default().bounds([x0, x1.max(x0 + 1.0)]))
        .y_axis(Axis::default().bounds([0.0, ymax]));
    f.render_widget(chart, area);
}

fn sockets(f: &mut Frame, area: Rect, cx: &Ctx, r: &RankFrame) {
    let rows: Vec<Row> = r
        .sockets
        .iter()
        .map(|s| {
            let i = s.info.as_ref();
            Row::new(vec![
                s.local.to_string(),
                s.remote.to_string(),
                s.state.to_string(),
                bytes(s.tx_queue as f64),
                match s.signals.get(Sig::RttP50Us) {
                    Some(v) => value(Sig::RttP50Us, v),
                    None => i.map_or("-".into(), |i| {
                        format!("~{}", value(Sig::SrttMaxUs, i.rtt_us as f64))
                    }),
                },
                i.map_or("-".into(), |i| i.total_retrans.to_string()),
                s.signals
                    .get(Sig::BytesSentPerS)
                    .map_or("-".into(), |v| format!("{}/s", bytes(v))),
            ])
        })
        .collect();
    let t = Table::new(
        rows,
        [
            Constraint::Length(22),
            Constraint::Length(22),
            Constraint::Length(11),
            Constraint::Length(9),
            Constraint::Length(9),
            Constraint::Length(6),
            Constraint::Min(9),
        ],
    )
    .header(
        Row::new(vec![
            "LOCAL", "REMOTE", "STATE", "TXQ", "RTT", "RETX", "SENT",
        ])
        .style(cx.th.title()),
    )
    .block(
        Block::new()
            .borders(Borders::TOP)
            .title(format!("sockets ({})", r.sockets.len())),
    );
    f.render_widget(t, area);
}

/// The tick's run-queue percentiles as the probe gave them, atop the
/// panel (the same in live and in a replay, with or without the histogram).
fn runq_percentiles(r: &RankFrame) -> Option<Line<'static>> {
    let at = |s: Sig| r.signal(s).map(|v| value(s, v));
    let (p50, p99, max) = (
        at(Sig::RunqP50Us)?,
        at(Sig::RunqP99Us)?,
        at(Sig::RunqMaxUs)?,
    );
    Some(Line::from(format!("p50 {p50}  p99 {p99}  max {max}")))
}

/// The run-queue panel: the percentiles, then `rest` (the histogram, or
/// why there is none).
fn runq_panel(r: &RankFrame, rest: Vec<Line<'static>>) -> Paragraph<'static> {
    let lines = runq_percentiles(r)
        .into_iter()
        .chain(rest)
        .collect::<Vec<_>>();
    Paragraph::new(lines).block(
        Block::new()
            .borders(Borders::TOP)
            .title("run-queue latency, this tick"),
    )
}

fn threads(f: &mut Frame, area: Rect, cx: &Ctx, r: &RankFrame) {
    // The run-queue latency histogram of this tick, when the probe has one
    // (or its percentiles, when a recording left the histogram out).
    let area = match r.histograms.get(HistKind::RunqUs) {
        Some(h) if !h.is_empty() => {
            let [t, hist] =
                Layout::vertical([Constraint::Percentage(50), Constraint::Percentage(50)])
                    .areas(area);
            let lines = histogram_lines(
                h,
                hist.width.saturating_sub(1) as usize,
                hist.height.saturating_sub(2) as usize,
            );
            f.render_widget(runq_panel(r, lines), hist);
            t
        }
        _ if cx.app.histograms_not_recorded() && r.signal(Sig::RunqP99Us).is_some() => {
            // The percentiles were recorded; the histogram behind them not.
            let [t, note] =
                Layout::vertical([Constraint::Min(3), Constraint::Length(4)]).areas(area);
            let why = "histogram not recorded (record --histograms keeps it)";
            let p = runq_panel(r, vec![Line::from(why)]).wrap(Wrap { trim: true });
            f.render_widget(p, note);
            t
        }
        _ => area,
    };
    let rows: Vec<Row> = r
        .threads
        .iter()
        .map(|t| {
            Row::new(vec![
                t.tid.to_string(),
                t.comm.to_string(),
                format!("{:.1}", t.run_delay_ms_per_s),
                format!("{:.0}", t.cpu_pct),
            ])
        })
        .collect();
    let t = Table::new(
        rows,
        [
            Constraint::Length(8),
            Constraint::Min(8),
            Constraint::Length(9),
            Constraint::Length(5),
        ],
    )
    .header(Row::new(vec!["TID", "THREAD", "RUNQ ms/s", "CPU%"]).style(cx.th.title()))
    .block(
        Block::new()
            .borders(Borders::TOP)
            .title("threads by run-queue delay"),
    );
    f.render_widget(t, area);
}

pub fn draw(f: &mut Frame, area: Rect, cx: &Ctx) {
    let Some(r) = cx.app.selected_rank() else {
        return;
    };
    // A cluster rank: what its node said (the drill-down), else its series.
    let drilled;
    let (title, tables_of) = match (r.node.as_deref(), cx.app.drill_of(r.key)) {
        (Some(node), Some(Drill::Got(d))) => {
            let mut x = r.clone();
            x.sockets = d.sockets.clone();
            x.threads = d.threads.clone();
            drilled = x;
            (
                format!(
                    " {} · {node} · pid {} · {} · job {} · state {} · from {} ",
                    r.display_name(),
                    d.pid,
                    d.comm,
                    r.labels.job.as_deref().unwrap_or("-"),
                    d.state,
                    d.endpoint
                ),
                &drilled,
            )
        }
        (Some(node), drill) => (
            format!(
                " {} · {node} · job {} · {} ",
                r.display_name(),
                r.labels.job.as_deref().unwrap_or("-"),
                match drill {
                    Some(Drill::Pending) => "asking its node…".to_string(),
                    Some(Drill::Failed(e)) =>
                        format!("its node did not answer ({e}): the series alone"),
                    _ if r.stale => "stale: its node stopped reporting".to_string(),
                    _ => "the series alone".to_string(),
                }
            ),
            r,
        ),
        (None, _) => (
            format!(
                " {} · pid {} · {} · job {} · {} threads · state {} ",
                r.display_name(),
                r.key.pid,
                r.comm,
                r.labels.job.as_deref().unwrap_or("-"),
                r.signal(Sig::Threads).unwrap_or(0.0),
                r.state
            ),
            r,
        ),
    };
    let block = Block::bordered().title(title);
    let inner = block.inner(area);
    f.render_widget(block, area);
    // The verdicts on top: the answer before the evidence.
    let verdicts: Vec<String> = cx
        .app
        .verdicts_of(r.key.pid)
        .iter()
        .map(|v| v.message.to_string())
        .collect();
    let [top, inner] = Layout::vertical([
        Constraint::Length(if verdicts.is_empty() { 1 } else { 2 }),
        Constraint::Min(3),
    ])
    .areas(inner);
    let top_line = if verdicts.is_empty() {
        Line::styled("in line with its peers", cx.th.dim())
    } else {
        Line::styled(
            verdicts.join("; "),
            cx.th.sev(kitty_core::model::Severity::Critical),
        )
    };
    f.render_widget(
        Paragraph::new(top_line).wrap(ratatui::widgets::Wrap { trim: true }),
        top,
    );
    let [charts, tables] =
        Layout::vertical([Constraint::Percentage(60), Constraint::Percentage(40)]).areas(inner);
    let ncols = if charts.width >= 140 {
        4
    } else if charts.width >= 60 {
        2
    } else {
        1
    };
    let sigs: Vec<Sig> = DETAIL_SIGNALS
        .iter()
        .copied()
        .filter(|s| r.signal(*s).is_some())
        .collect();
    let nrows = sigs.len().div_ceil(ncols).max(1);
    let row_areas = Layout::vertical(vec![Constraint::Ratio(1, nrows as u32); nrows]).split(charts);
    for (i, sig) in sigs.iter().enumerate() {
        let cell = Layout::horizontal(vec![Constraint::Ratio(1, ncols as u32); ncols])
            .split(row_areas[i / ncols])[i % ncols];
        chart(f, cell, cx, r, *sig);
    }
    if r.nics.is_empty() && r.collectives.is_empty() {
        let [socks, thr] =
            Layout::horizontal([Constraint::Percentage(65), Constraint::Percentage(35)])
                .areas(tables);
        sockets(f, socks, cx, tables_of);
        threads(f, thr, cx, tables_of);
    } else {
        let [socks, nccl, thr] = Layout::horizontal([
            Constraint::Percentage(40),
            Constraint::Percentage(35),
            Constraint::Percentage(25),
        ])
        .areas(tables);
        sockets(f, socks, cx, tables_of);
        rdma(f, nccl, cx, r);
        threads(f, thr, cx, tables_of);
    }
}

/// The rank's RDMA ports (their counter rates) and its latest collectives.
fn rdma(f: &mut Frame, area: Rect, cx: &Ctx, r: &RankFrame) {
    let Some(fr) = cx.app.frame() else { return };
    let v = |n: &kitty_core::model::NicFrame, s: Sig| {
        n.signals.get(s).map_or("-".into(), |x| value(s, x))
    };
    let mut lines = Vec::new();
    for id in &r.nics {
        let Some(n) = fr.nics.iter().find(|n| n.id() == id.as_str()) else {
            continue;
        };
        let style = if n.problem.is_some() {
            cx.th.sev(kitty_core::model::Severity::Critical)
        } else {
            cx.th.title()
        };
        lines.push(Line::styled(
            format!(
                "{id} {} {}",
                n.state.as_deref().unwrap_or("?"),
                v(n, Sig::RdmaRateGbps)
            ),
            style,
        ));
        if let Some(p) = &n.problem {
            lines.push(Line::styled(format!(" {p}"), style));
        }
        lines.push(Line::raw(format!(
            " wait {}  cnp {}  ecn {}  pfc {}",
            v(n, Sig::RdmaXmitWaitPerS),
            v(n, Sig::RdmaCnpPerS),
            v(n, Sig::RdmaEcnMarkedPerS),
            v(n, Sig::RdmaPausePerS)
        )));
        lines.push(Line::raw(format!(
            " retx {}  err {}  tx {}  rx {}",
            v(n, Sig::RdmaRetransPerS),
            v(n, Sig::RdmaErrorsPerS),
            v(n, Sig::RdmaTxBytesPerS),
            v(n, Sig::RdmaRxBytesPerS)
        )));
    }
    if !r.collectives.is_empty() {
        lines.push(Line::styled(
            "COLL         SEQ    EXEC  BUSBW   LATE",
            cx.th.title(),
        ));
        for c in &r.collectives {
            lines.push(Line::raw(format!(
                "{:<10} {:>6} {:>7} {:>5.0}G {:>6}",
                c.coll.as_str(),
                c.seq,
                value(Sig::NcclExecMs, c.exec_us as f64 / 1000.0),
                c.busbw_gbs,
                c.late_us
                    .map_or("-".into(), |l| value(Sig::NcclLateMs, l / 1000.0))
            )));
        }
    }
    f.render_widget(
        Paragraph::new(lines).block(
            Block::new()
                .borders(Borders::TOP)
                .title("rdma ports · NCCL collectives"),
        ),
        area,
    );
}
