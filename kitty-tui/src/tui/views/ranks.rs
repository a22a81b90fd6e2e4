//! The main view: the rank table (one row per watched process, a cell per
//! signal with its sparkline, the cell highlighted when the rank is an
//! outlier for that signal), the slow-window findings when there are any,
//! the selected rank's verdicts in full, and the GPU, host and events panes
//! below.

use super::Ctx;
use crate::tui::app::SortBy;
use crate::tui::widgets::spark;
use kitty_core::model::format::compact;
use kitty_core::model::signal::GPU_RANK_SIGNALS;
use kitty_core::model::{RankFrame, Severity, Sig};
use ratatui::prelude::*;
use ratatui::widgets::{Block, Cell, Paragraph, Row, Table, Wrap};

/// A numeric column of the rank table: signal, header, drop priority (0 = keep longest).
struct Col {
    header: &'static str,
    signal: Sig,
    /// A second signal shown as `a/b` (RTT p50/p99).
    alt: Option<Sig>,
    /// Shown as `~v` when the signal itself is absent (smoothed RTT).
    fallback: Option<Sig>,
    width: u16,
    priority: u8,
    /// Shown only when some rank has the signal (NCCL, RDMA).
    optional: bool,
}

const fn col(header: &'static str, signal: Sig, width: u16, priority: u8) -> Col {
    Col {
        header,
        signal,
        alt: None,
        fallback: None,
        width,
        priority,
        optional: false,
    }
}

const fn optional(header: &'static str, signal: Sig, width: u16, priority: u8) -> Col {
    Col {
        optional: true,
        ..col(header, signal, width, priority)
    }
}

/// Width of the NIC column, when a rank uses RDMA ports.
const NIC_WIDTH: u16 = 10;

const COLS: &[Col] = &[
    col("CPU%", Sig::CpuPct, 11, 0),
    col("RUNQ ms/s", Sig::RunDelayMsPerS, 12, 0),
    col("MIGR/s", Sig::MigrationsPerS, 11, 3),
    col("AFF", Sig::AffinityCpus, 4, 4),
    col("THROT ms/s", Sig::CfsThrottledMsPerS, 11, 2),
    Col {
        header: "RTT",
        signal: Sig::RttP50Us,
        alt: Some(Sig::RttP99Us),
        fallback: Some(Sig::SrttMaxUs),
        width: 13,
        priority: 1,
        optional: false,
    },
    col("RETX/s", Sig::RetransPerS, 11, 1),
    col("OUTSEG/s", Sig::OutSegsPerS, 12, 3),
    col("TXQ", Sig::TxQueueBytes, 11, 2),
    col("TX/s", Sig::BytesSentPerS, 11, 4),
    optional("LATE ms", Sig::NcclLateMs, 10, 0),
    optional("IB WAIT/s", Sig::RdmaXmitWaitPerS, 12, 2),
];

/// Sparkline points per cell.
const SPARK_N: usize = 5;

/// Width of the JOB column, when more than one job is on screen.
const JOB_WIDTH: u16 = 12;

fn visible_cols(
    width: u16,
    extra: u16,
    present: &dyn Fn(Sig) -> bool,
) -> (Vec<&'static Col>, usize) {
    // Fixed: RANK 7, PID 8 (NODE 14), VERDICT at least 18, and `extra`.
    let budget = width.saturating_sub(7 + 8 + 5 + 18 + 2 + extra);
    let mut cols: Vec<&Col> = COLS
        .iter()
        .filter(|c| !c.optional || present(c.signal))
        .collect();
    let mut dropped = 0;
    while cols.iter().map(|c| c.width + 1).sum::<u16>() > budget && !cols.is_empty() {
        let worst = cols
            .iter()
            .enumerate()
            .max_by_key(|(i, c)| (c.priority, *i))
            .map(|(i, _)| i)
            .unwrap_or(0);
        cols.remove(worst);
        dropped += 1;
    }
    (cols, dropped)
}

/// A cell in the style of the worst verdict the rank has on `signals`.
fn flagged<'a>(
    cx: &Ctx,
    r: &RankFrame,
    text: String,
    signals: impl Iterator<Item = Sig>,
) -> Cell<'a> {
    match signals.filter_map(|s| cx.app.severity(r.key.pid, s)).max() {
        Some(s) => Cell::from(text).style(cx.th.sev(s)),
        None => Cell::from(text),
    }
}

/// The rank's GPU index, highlighted when a GPU signal flags the rank.
fn gpu_cell<'a>(cx: &Ctx, r: &RankFrame) -> Cell<'a> {
    let text = r.gpu.map_or("-".to_string(), |g| g.to_string());
    flagged(cx, r, text, GPU_RANK_SIGNALS.iter().copied())
}

/// The rank's RDMA port (`mlx5_2/1`, `+n` more), highlighted when an RDMA
/// signal flags the rank.
fn nic_cell<'a>(cx: &Ctx, r: &RankFrame) -> Cell<'a> {
    let text = match r.nics.as_slice() {
        [] => "-".to_string(),
        [one] => one.to_string(),
        [first, rest @ ..] => format!("{first}+{}", rest.len()),
    };
    flagged(cx, r, text, Sig::from_rdma_ports())
}

fn value_cell<'a>(cx: &Ctx, r: &RankFrame, c: &Col) -> Cell<'a> {
    let text = match (r.signal(c.signal), c.alt.and_then(|a| r.signal(a))) {
        (Some(a), Some(b)) => format!("{}/{}", compact(c.signal, a), compact(c.signal, b)),
        (Some(v), None) if c.width < 8 => format!("{:>3}", compact(c.signal, v)),
        (Some(v), None) => {
            let hist: Vec<f64> = cx
                .app
                .history()
                .rank(r.key, c.signal)
                .map(|h| h.tail(SPARK_N).collect())
                .unwrap_or_default();
            format!("{:>6} {}", compact(c.signal, v), spark(&hist))
        }
        (None, _) => match c.fallback.and_then(|s| r.signal(s).map(|v| (s, v))) {
            Some((s, v)) => format!("~{}", compact(s, v)),
            None => "-".into(),
        },
    };
    flagged(
        cx,
        r,
        text,
        [Some(c.signal), c.alt, c.fallback].into_iter().flatten(),
    )
}

/// A signal's name in the verdict cell: short enough that the ratio and
/// the count of further verdicts fit at 80 columns (the status line and the
/// events pane have the sentence).
fn short(sig: Sig) -> &'static str {
    match sig {
        Sig::RunDelayMsPerS => "runq",
        Sig::RunqP99Us => "runq p99",
        Sig::CfsThrottledMsPerS => "throttled",
        Sig::MigrationsPerS => "migr",
        Sig::RetransPerS => "retx",
        Sig::RttP50Us => "rtt p50",
        Sig::RttP99Us => "rtt p99",
        Sig::SrttMaxUs => "srtt",
        Sig::TxQueueBytes => "txq",
        Sig::GpuLost => "gpu lost",
        Sig::GpuThrottleSlowing => "gpu thrtl",
        Sig::GpuXidRecent => "xid",
        Sig::GpuSmClockMhz => "sm clock",
        Sig::GpuSmActivePct => "sm active",
        Sig::RdmaXmitWaitPerS => "ib wait",
        Sig::RdmaCnpPerS => "cnp",
        Sig::RdmaEcnMarkedPerS => "ecn",
        Sig::RdmaPausePerS => "pfc",
        Sig::RdmaRetransPerS => "rdma retx",
        Sig::RdmaErrorsPerS => "ib err",
        Sig::RdmaOutOfBufferPerS => "no rx buf",
        Sig::RdmaPortDegraded => "port",
        Sig::NcclLateMs => "late",
        Sig::NcclRasMissing => "ras miss",
        Sig::NcclCollsBehind => "behind",
        s => s.label(),
    }
}

fn verdict_cell<'a>(cx: &Ctx, r: &RankFrame) -> Cell<'a> {
    let vs = cx.app.verdicts_of(r.key.pid);
    match vs.first() {
        // Only consequences: the neighbour's effect, shown under its cause.
        Some(v) if v.is_consequence() => {
            let c = v.consequence_of.as_ref().expect("a consequence");
            let who = c
                .rank
                .map_or(format!("pid {}", c.pid), |r| format!("rank {r}"));
            Cell::from(format!("↳ {} from {who}", short(v.signal))).style(cx.th.dim())
        }
        Some(v) => Cell::from(format!(
            "{} {:.0}x{}",
            short(v.signal),
            v.ratio,
            if vs.len() > 1 {
                format!(" +{}", vs.len() - 1)
            } else {
                String::new()
            }
        ))
        .style(cx.th.sev(v.severity)),
        None => Cell::from("ok").style(cx.th.dim()),
    }
}

fn empty_state(f: &mut Frame, area: Rect, cx: &Ctx) {
    let text = vec![
        Line::styled("No watched process on this node.", cx.th.title()),
        Line::raw(""),
        Line::raw("kitty watches processes that have KITTY_WATCH=1 in their environment, for example:"),
        Line::raw("    env:  - name: KITTY_WATCH  value: \"1\"        (Kubernetes pod spec)"),
        Line::raw("    KITTY_WATCH=1 torchrun --nproc-per-node 8 train.py"),
        Line::raw("or pass --pid PID. Ranks are labelled from RANK / SLURM_PROCID / OMPI_COMM_WORLD_RANK."),
        Line::raw("Try `kitty-tui demo` for a local job with a straggler."),
    ];
    f.render_widget(
        Paragraph::new(text)
            .block(Block::bordered().title(" ranks "))
            .wrap(Wrap { trim: false }),
        area,
    );
}

fn table(f: &mut Frame, area: Rect, cx: &Ctx) {
    let app = cx.app;
    let rows = app.rows();
    // A JOB column only when ranks of several jobs share the screen.
    let jobs: std::collections::BTreeSet<_> = rows.iter().map(|r| r.labels.job_key()).collect();
    let multi_job = jobs.len() > 1;
    let spans_nodes = rows.iter().any(|r| r.node.is_some());
    let id_width: u16 = if spans_nodes { 14 } else { 8 };
    let has_nics = rows.iter().any(|r| !r.nics.is_empty());
    let present = |sig: Sig| rows.iter().any(|r| r.signals.contains(sig));
    let (cols, dropped) = visible_cols(
        area.width,
        (id_width - 8)
            + if multi_job { JOB_WIDTH + 1 } else { 0 }
            + if has_nics { NIC_WIDTH + 1 } else { 0 },
        &present,
    );
    let sort = app.sort().1;
    let mark = |on: bool| if on { "▼" } else { "" };
    // A frame that spans nodes (the cluster view) names each rank's node
    // where a node's own view gives the pid.
    let mut header = vec![Cell::from("RANK")];
    if multi_job {
        header.push(Cell::from("JOB"));
    }
    header.push(Cell::from(if spans_nodes { "NODE" } else { "PID" }));
    header.push(Cell::from("GPU"));
    if has_nics {
        header.push(Cell::from("NIC"));
    }
    header.extend(cols.iter().map(|c| {
        Cell::from(format!(
            "{}{}",
            c.header,
            mark(sort == SortBy::Signal(c.signal))
        ))
    }));
    header.push(Cell::from(format!(
        "VERDICT{}",
        mark(sort == SortBy::Verdict)
    )));
    let selected = app.selected_index();
    let body: Vec<Row> = rows
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let id = match r.node.as_deref() {
                Some(n) if spans_nodes => n.to_string(),
                _ => r.key.pid.to_string(),
            };
            let mut cells = vec![Cell::from(
                r.labels.rank.map_or("-".to_string(), |x| x.to_string()),
            )];
            if multi_job {
                cells.push(Cell::from(
                    r.labels.job.as_deref().unwrap_or("-").to_string(),
                ));
            }
            cells.push(Cell::from(id));
            cells.push(gpu_cell(cx, r));
            if has_nics {
                cells.push(nic_cell(cx, r));
            }
            cells.extend(cols.iter().map(|c| value_cell(cx, r, c)));
            cells.push(if r.stale {
                Cell::from("stale: node stopped reporting").style(cx.th.dim())
            } else {
                verdict_cell(cx, r)
            });
            let row = Row::new(cells);
            match (i == selected, r.stale) {
                (true, _) => row.style(cx.th.selected()),
                (false, true) => row.style(cx.th.dim()),
                (false, false) => row,
            }
        })
        .collect();
    // Every fixed-width column with what a click on its header sorts by;
    // VERDICT (sorted by verdict) takes the rest of the row.
    let mut fixed: Vec<(u16, Option<SortBy>)> = vec![(6, Some(SortBy::Rank))];
    if multi_job {
        fixed.push((JOB_WIDTH, None));
    }
    fixed.extend([(id_width, None), (4, None)]);
    if has_nics {
        fixed.push((NIC_WIDTH, None));
    }
    fixed.extend(
        cols.iter()
            .map(|c| (c.width, Some(SortBy::Signal(c.signal)))),
    );
    let mut widths: Vec<Constraint> = fixed.iter().map(|c| Constraint::Length(c.0)).collect();
    widths.push(Constraint::Min(14));
    let mut title = format!(" ranks ({}) ", rows.len());
    if !app.filter().is_empty() {
        title.push_str(&format!("filter /{} ", app.filter()));
    }
    if dropped > 0 {
        title.push_str(&format!("· {dropped} columns hidden, widen the terminal "));
    }
    // Border and header above the first row, border below the last.
    cx.app
        .layout
        .rank_rows
        .set(Some((area.y + 2, area.height.saturating_sub(3))));
    // Where each sortable header is, for a click (one column of spacing).
    let sort_of = |sb: SortBy| crate::tui::app::SORTS.iter().position(|s| s.1 == sb);
    let mut sortable = Vec::new();
    let mut x = area.x + 1;
    for (w, sort) in &fixed {
        if let Some(i) = sort.and_then(sort_of) {
            sortable.push((x, x + w - 1, i));
        }
        x += w + 1;
    }
    if let Some(i) = sort_of(SortBy::Verdict) {
        sortable.push((x, (area.x + area.width).saturating_sub(2), i));
    }
    *cx.app.layout.sort_headers.borrow_mut() = (area.y + 1, sortable);
    let table = Table::new(body, widths)
        .header(Row::new(header).style(cx.th.title()))
        .block(Block::bordered().title(title));
    f.render_widget(table, area);
}

/// The selected rank's verdicts in full.
fn status_line<'a>(cx: &Ctx) -> Line<'a> {
    let Some(r) = cx.app.selected_rank() else {
        return Line::raw("");
    };
    let vs: Vec<&str> = cx
        .app
        .verdicts_of(r.key.pid)
        .iter()
        .map(|v| v.message.as_str())
        .collect();
    if r.stale {
        Line::styled(
            format!(
                " {} on {}: its node stopped reporting; the values are its last",
                r.display_name(),
                r.node.as_deref().unwrap_or("?")
            ),
            cx.th.dim(),
        )
    } else if vs.is_empty() {
        let whose = match r.node.as_deref() {
            Some(n) => format!("on {n}"),
            None => format!("pid {}, {}", r.key.pid, r.comm),
        };
        Line::styled(
            format!(" {} ({whose}): in line with its peers", r.display_name()),
            cx.th.dim(),
        )
    } else {
        Line::styled(format!(" {}", vs.join("; ")), cx.th.sev(Severity::Critical))
    }
}

pub fn draw(f: &mut Frame, area: Rect, cx: &Ctx) {
    let Some(fr) = cx.app.frame() else { return };
    let lower = if area.height >= 24 { 9 } else { 0 };
    // Findings only when the table keeps room for a few ranks.
    let found = super::findings::height(&fr.findings);
    let found = if area.height >= lower + found + 8 {
        found
    } else {
        0
    };
    let nodes = super::nodes::height(&fr.node_verdicts);
    let [nodes_area, table_area, findings_area, status_area, lower_area] = Layout::vertical([
        Constraint::Length(nodes),
        Constraint::Min(3),
        Constraint::Length(found),
        Constraint::Length(1),
        Constraint::Length(lower),
    ])
    .areas(area);
    if nodes > 0 {
        super::nodes::draw(f, nodes_area, cx, &fr.node_verdicts);
    }
    if found > 0 {
        super::findings::draw(f, findings_area, cx, &fr.findings);
    }
    if fr.ranks.is_empty() {
        empty_state(f, table_area, cx);
    } else {
        table(f, table_area, cx);
    }
    f.render_widget(Paragraph::new(status_line(cx)), status_area);
    if lower > 0 {
        // The RDMA pane beside the GPU pane when the node has ports, in
        // its place when it has ports and no GPU.
        let (gpu, nic) = (
            !fr.gpus.is_empty() || fr.nics.is_empty(),
            !fr.nics.is_empty(),
        );
        let mut panes = Vec::new();
        if gpu {
            panes.push(if nic { 25 } else { 30 });
        }
        if nic {
            panes.push(if gpu { 25 } else { 30 });
        }
        let rest = (100 - panes.iter().sum::<u16>()) / 2;
        panes.extend([rest, rest]);
        let areas =
            Layout::horizontal(panes.iter().map(|p| Constraint::Percentage(*p))).split(lower_area);
        let mut at = areas.iter().copied();
        if gpu {
            super::gpus::draw_pane(f, at.next().unwrap_or_default(), cx);
        }
        if nic {
            super::nics::draw_pane(f, at.next().unwrap_or_default(), cx);
        }
        super::host::draw(f, at.next().unwrap_or_default(), cx);
        super::events::draw(f, at.next().unwrap_or_default(), cx, false);
    }
}
