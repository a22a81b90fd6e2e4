//! Drawing: turns the app's frames into screens. Pure functions of `App`;
//! nothing here samples or reads files.

use super::app::{App, Input, View, SORTS};
use super::keymap::ACTIONS;
use kitty_core::frame::{RankFrame, Severity};
use kitty_core::signals::{bytes, format_value};
use ratatui::prelude::*;
use ratatui::widgets::{
    Axis, Block, Borders, Cell, Chart, Clear, Dataset, GraphType, Paragraph, Row, Table, Wrap,
};

const SPARK: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// A numeric column of the rank table: signal, header, drop priority (0 = keep longest).
struct Col {
    header: &'static str,
    signal: &'static str,
    /// A second signal shown as `a/b` (RTT p50/p99).
    alt: Option<&'static str>,
    width: u16,
    priority: u8,
}

const COLS: &[Col] = &[
    Col {
        header: "CPU%",
        signal: "cpu_pct",
        alt: None,
        width: 11,
        priority: 0,
    },
    Col {
        header: "RUNQ ms/s",
        signal: "run_delay_ms_per_s",
        alt: None,
        width: 12,
        priority: 0,
    },
    Col {
        header: "MIGR/s",
        signal: "migrations_per_s",
        alt: None,
        width: 11,
        priority: 3,
    },
    Col {
        header: "AFF",
        signal: "affinity_cpus",
        alt: None,
        width: 4,
        priority: 4,
    },
    Col {
        header: "THROT ms/s",
        signal: "cfs_throttled_ms_per_s",
        alt: None,
        width: 11,
        priority: 2,
    },
    Col {
        header: "RTT",
        signal: "rtt_p50_us",
        alt: Some("rtt_p99_us"),
        width: 13,
        priority: 1,
    },
    Col {
        header: "RETX/s",
        signal: "retrans_per_s",
        alt: None,
        width: 11,
        priority: 1,
    },
    Col {
        header: "OUTSEG/s",
        signal: "out_segs_per_s",
        alt: None,
        width: 12,
        priority: 3,
    },
    Col {
        header: "TXQ",
        signal: "tx_queue_bytes",
        alt: None,
        width: 11,
        priority: 2,
    },
    Col {
        header: "TX/s",
        signal: "bytes_sent_per_s",
        alt: None,
        width: 11,
        priority: 4,
    },
];

/// A sparkline scaled between the series' min and max; a flat series is a
/// flat low line, so steady values never look like alarms.
pub fn spark(values: &[f64]) -> String {
    let max = values.iter().cloned().fold(f64::MIN, f64::max);
    let min = values.iter().cloned().fold(f64::MAX, f64::min);
    let range = max - min;
    let flat = range <= 0.0 || range <= max.abs() * 0.01;
    values
        .iter()
        .map(|v| {
            if flat {
                SPARK[0]
            } else {
                SPARK[(((v - min) / range) * 7.0).round().clamp(0.0, 7.0) as usize]
            }
        })
        .collect()
}

fn compact(signal: &str, v: f64) -> String {
    let unit = kitty_core::signals::info(signal)
        .map(|i| i.unit)
        .unwrap_or("");
    match unit {
        "B" | "B/s" => bytes(v).replace(' ', ""),
        "us" if v >= 1000.0 => format!("{:.1}ms", v / 1000.0),
        "us" => format!("{v:.0}us"),
        _ if v >= 100.0 || v.fract() == 0.0 => format!("{v:.0}"),
        _ if v >= 10.0 => format!("{v:.1}"),
        _ => format!("{v:.2}"),
    }
}

pub(super) struct Theme {
    pub(super) color: bool,
}

impl Theme {
    pub(super) fn sev(&self, s: Severity) -> Style {
        match (self.color, s) {
            (true, Severity::Critical) => Style::new()
                .fg(Color::White)
                .bg(Color::Red)
                .add_modifier(Modifier::BOLD),
            (true, Severity::Warning) => Style::new().fg(Color::Black).bg(Color::Yellow),
            (false, Severity::Critical) => {
                Style::new().add_modifier(Modifier::REVERSED | Modifier::BOLD)
            }
            (false, Severity::Warning) => {
                Style::new().add_modifier(Modifier::UNDERLINED | Modifier::BOLD)
            }
        }
    }
    pub(super) fn ok(&self) -> Style {
        if self.color {
            Style::new().fg(Color::Green)
        } else {
            Style::new()
        }
    }
    pub(super) fn dim(&self) -> Style {
        Style::new().add_modifier(Modifier::DIM)
    }
    pub(super) fn title(&self) -> Style {
        Style::new().add_modifier(Modifier::BOLD)
    }
    fn selected(&self) -> Style {
        if self.color {
            Style::new().bg(Color::Blue).fg(Color::White)
        } else {
            Style::new().add_modifier(Modifier::REVERSED)
        }
    }
}

pub fn draw(f: &mut Frame, app: &App) {
    let area = f.area();
    let th = Theme { color: app.color };
    if area.width < 30 || area.height < 8 {
        let p = Paragraph::new(format!(
            "kitty: terminal too small ({}x{}); need 30x8",
            area.width, area.height
        ))
        .wrap(Wrap { trim: true });
        f.render_widget(p, area);
        return;
    }
    let [header, body, footer] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Min(3),
        Constraint::Length(1),
    ])
    .areas(area);
    draw_header(f, app, header, &th);
    match app.view {
        View::Main => draw_main(f, app, body, &th),
        View::Detail => draw_detail(f, app, body, &th),
        View::Help => draw_help(f, app, body, &th),
        View::Events => draw_events(f, app, body, &th, true),
        View::Gpus => draw_gpus(f, app, body, &th),
        View::Flows => super::netview::draw_flows(f, app, body, &th),
        View::Flame => draw_flame(f, app, body, &th),
    }
    draw_footer(f, app, footer, &th);
}

fn draw_header(f: &mut Frame, app: &App, area: Rect, th: &Theme) {
    let mut l1: Vec<Span> = vec![Span::styled(" kitty ", th.title())];
    let Some(fr) = &app.frame else {
        l1.push(Span::raw("waiting for the first sample..."));
        f.render_widget(Paragraph::new(Line::from(l1)), area);
        return;
    };
    l1.push(Span::raw(format!(
        "│ {} │ kernel {} │ ",
        fr.node, app.kernel
    )));
    let mut jobs: Vec<(String, usize)> = Vec::new();
    for r in &fr.ranks {
        let j = r.labels.job.clone().unwrap_or_else(|| "(no job)".into());
        match jobs.iter_mut().find(|(n, _)| *n == j) {
            Some(e) => e.1 += 1,
            None => jobs.push((j, 1)),
        }
    }
    let jobs_s: Vec<String> = jobs
        .iter()
        .map(|(j, n)| match fr.job_step_ms.get(j) {
            Some(ms) => format!("{j} ({n} ranks, step {ms:.1} ms)"),
            None => format!("{j} ({n} ranks)"),
        })
        .collect();
    if !jobs_s.is_empty() {
        l1.push(Span::raw(format!("job {} │ ", jobs_s.join(", "))));
    }
    l1.push(Span::raw(format!("every {} ms │ ", fr.interval_ms)));
    let clock = kitty_core::timefmt::clock(fr.wall_ns);
    match &app.replay {
        Some(r) => l1.push(Span::styled(
            format!(
                "REPLAY {clock} ({}/{}) {}{}x",
                r.pos + 1,
                r.reader.len(),
                if r.playing { "▶ " } else { "⏸ " },
                r.speed
            ),
            th.title(),
        )),
        None if app.paused => l1.push(Span::styled(
            format!(
                "PAUSED {clock} ({}/{})",
                app.cursor.map_or(0, |c| c + 1),
                app.buffer.len()
            ),
            th.title(),
        )),
        None => l1.push(Span::styled(
            format!("LIVE {clock}"),
            th.ok().add_modifier(Modifier::BOLD),
        )),
    }
    if let Some(rec) = &app.recording {
        l1.push(Span::styled(
            format!(" │ ● REC {rec}"),
            if th.color {
                Style::new().fg(Color::Red)
            } else {
                th.title()
            },
        ));
    }
    let mut l2: Vec<Span> = vec![Span::raw(" sources: ")];
    for (name, st) in &fr.sources {
        if st.is_ok() {
            l2.push(Span::styled(format!("{name} ✓"), th.ok()));
            // The RTT probe's strategy says how raw its numbers are.
            if let (Some(s), "ebpf.rtt") = (&st.strategy, name.as_str()) {
                let short = s.split(" + ").next().unwrap_or(s);
                l2.push(Span::styled(format!(" ({short})"), th.dim()));
            }
        } else {
            let mut why = st.reason.clone().unwrap_or_default();
            if why.chars().count() > 60 {
                why = why.chars().take(59).collect::<String>() + "…";
            }
            l2.push(Span::styled(
                format!("{name}: {} ({why})", st.status),
                th.dim(),
            ));
        }
        l2.push(Span::raw("  "));
    }
    f.render_widget(Paragraph::new(vec![Line::from(l1), Line::from(l2)]), area);
}

fn visible_cols(width: u16) -> (Vec<&'static Col>, usize) {
    // Fixed: RANK 7, PID 8, VERDICT at least 18.
    let budget = width.saturating_sub(7 + 8 + 5 + 18 + 2);
    let mut cols: Vec<&Col> = COLS.iter().collect();
    let mut dropped = 0;
    while cols.iter().map(|c| c.width + 1).sum::<u16>() > budget && !cols.is_empty() {
        let worst = cols
            .iter()
            .enumerate()
            .max_by_key(|(i, c)| (c.priority, *i))
            .map(|(i, _)| i)
            .unwrap();
        cols.remove(worst);
        dropped += 1;
    }
    (cols, dropped)
}

/// The rank's GPU index, highlighted when a GPU signal flags the rank.
fn gpu_cell<'a>(app: &App, r: &RankFrame, th: &Theme) -> Cell<'a> {
    let text = r.gpu.map_or("-".to_string(), |g| g.to_string());
    let sev = [
        "gpu_lost",
        "gpu_throttle_slowing",
        "gpu_xid_recent",
        "gpu_sm_clock_mhz",
        "gpu_sm_active_pct",
    ]
    .iter()
    .filter_map(|s| app.severity(r.key.pid, s))
    .max();
    match sev {
        Some(s) => Cell::from(text).style(th.sev(s)),
        None => Cell::from(text),
    }
}

fn draw_main(f: &mut Frame, app: &App, area: Rect, th: &Theme) {
    let Some(fr) = &app.frame else { return };
    let lower = if area.height >= 24 { 9 } else { 0 };
    let [table_area, status_area, lower_area] = Layout::vertical([
        Constraint::Min(3),
        Constraint::Length(1),
        Constraint::Length(lower),
    ])
    .areas(area);

    let rows = app.rows();
    if fr.ranks.is_empty() {
        let text = vec![
            Line::styled("No watched process on this node.", th.title()),
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
            table_area,
        );
    } else {
        let (cols, dropped) = visible_cols(table_area.width);
        let mut header = vec![Cell::from("RANK"), Cell::from("PID"), Cell::from("GPU")];
        header.extend(cols.iter().map(|c| {
            let mark = if SORTS[app.sort].1 == c.signal {
                "▼"
            } else {
                ""
            };
            Cell::from(format!("{}{mark}", c.header))
        }));
        header.push(Cell::from(if SORTS[app.sort].0 == "verdict" {
            "VERDICT▼"
        } else {
            "VERDICT"
        }));
        let spark_n = 5;
        let body: Vec<Row> = rows
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let mut cells = vec![
                    Cell::from(r.labels.rank.map_or("-".to_string(), |x| x.to_string())),
                    Cell::from(r.key.pid.to_string()),
                    gpu_cell(app, r, th),
                ];
                for c in &cols {
                    let text = match (r.signal(c.signal), c.alt.and_then(|a| r.signal(a))) {
                        (Some(a), Some(b)) => {
                            format!("{}/{}", compact(c.signal, a), compact(c.signal, b))
                        }
                        (Some(v), None) => {
                            let hist: Vec<f64> = app
                                .history
                                .rank(r.key, c.signal)
                                .map(|h| h.tail(spark_n).collect())
                                .unwrap_or_default();
                            if c.width < 8 {
                                // Too narrow for a sparkline (AFF): the value alone.
                                format!("{:>3}", compact(c.signal, v))
                            } else {
                                format!("{:>6} {}", compact(c.signal, v), spark(&hist))
                            }
                        }
                        (None, _) if c.signal == "rtt_p50_us" => match r.signal("srtt_max_us") {
                            Some(v) => format!("~{}", compact("srtt_max_us", v)),
                            None => "-".into(),
                        },
                        (None, _) => "-".into(),
                    };
                    let mut cell = Cell::from(text);
                    let sev = app.severity(r.key.pid, c.signal).or_else(|| {
                        c.alt.and_then(|a| app.severity(r.key.pid, a)).or_else(|| {
                            (c.signal == "rtt_p50_us")
                                .then(|| app.severity(r.key.pid, "srtt_max_us"))
                                .flatten()
                        })
                    });
                    if let Some(s) = sev {
                        cell = cell.style(th.sev(s));
                    }
                    cells.push(cell);
                }
                let vs: Vec<_> = fr.verdicts.iter().filter(|v| v.pid == r.key.pid).collect();
                let verdict = match vs.first() {
                    Some(v) => Cell::from(format!(
                        "{} {:.0}x{}",
                        kitty_core::signals::info(&v.signal).map_or(v.signal.as_str(), |i| i.label),
                        v.ratio,
                        if vs.len() > 1 {
                            format!(" +{}", vs.len() - 1)
                        } else {
                            String::new()
                        }
                    ))
                    .style(th.sev(v.severity)),
                    None => Cell::from("ok").style(th.dim()),
                };
                cells.push(verdict);
                let row = Row::new(cells);
                if i == app.selected.min(rows.len().saturating_sub(1)) {
                    row.style(th.selected())
                } else {
                    row
                }
            })
            .collect();
        let mut widths = vec![
            Constraint::Length(6),
            Constraint::Length(8),
            Constraint::Length(4),
        ];
        widths.extend(cols.iter().map(|c| Constraint::Length(c.width)));
        widths.push(Constraint::Min(14));
        let mut title = format!(" ranks ({}) ", rows.len());
        if !app.filter.is_empty() {
            title.push_str(&format!("filter /{} ", app.filter));
        }
        if dropped > 0 {
            title.push_str(&format!("· {dropped} columns hidden, widen the terminal "));
        }
        let table = Table::new(body, widths)
            .header(Row::new(header).style(th.title()))
            .block(Block::bordered().title(title));
        f.render_widget(table, table_area);
    }

    // Status line: the selected rank's verdicts in full.
    let status = match app.selected_rank() {
        Some(r) => {
            let vs: Vec<String> = fr
                .verdicts
                .iter()
                .filter(|v| v.pid == r.key.pid)
                .map(|v| v.message.clone())
                .collect();
            if vs.is_empty() {
                Line::styled(
                    format!(
                        " {} (pid {}, {}): in line with its peers",
                        r.display_name(),
                        r.key.pid,
                        r.comm
                    ),
                    th.dim(),
                )
            } else {
                Line::styled(format!(" {}", vs.join("; ")), th.sev(Severity::Critical))
            }
        }
        None => Line::raw(""),
    };
    f.render_widget(Paragraph::new(status), status_area);

    if lower > 0 {
        let [gpu, host, events] = Layout::horizontal([
            Constraint::Percentage(30),
            Constraint::Percentage(35),
            Constraint::Percentage(35),
        ])
        .areas(lower_area);
        draw_gpu_summary(f, app, gpu, th);
        draw_host(f, app, host);
        draw_events(f, app, events, th, false);
    }
}

/// Why the GPU area is empty, in words.
fn no_gpu_lines<'a>(fr: &kitty_core::frame::Frame, th: &Theme) -> Vec<Line<'a>> {
    let why = match fr.sources.get("nvml") {
        Some(st) if st.is_ok() => "NVML reports no GPU on this node.".to_string(),
        Some(st) => format!(
            "nvml: {}",
            st.reason.clone().unwrap_or_else(|| st.status.clone())
        ),
        None => "GPU telemetry is off (--no-gpu).".into(),
    };
    vec![
        Line::styled("No GPU telemetry.", th.title()),
        Line::raw(why),
    ]
}

/// Badges for a GPU: status, throttle reasons, XIDs, ECC.
fn gpu_badges<'a>(g: &kitty_core::frame::GpuFrame, th: &Theme) -> Vec<Span<'a>> {
    let mut out = Vec::new();
    if g.status != "ok" && !g.status.is_empty() {
        out.push(Span::styled(
            format!(" {} ", g.status.to_uppercase()),
            th.sev(Severity::Critical),
        ));
    }
    let slowing = [
        "sw_power_cap",
        "hw_slowdown",
        "sw_thermal",
        "hw_thermal",
        "hw_power_brake",
    ];
    for t in g.throttle.iter().filter(|t| slowing.contains(&t.as_str())) {
        out.push(Span::raw(" "));
        out.push(Span::styled(
            format!(" {} ", t.to_uppercase()),
            th.sev(Severity::Warning),
        ));
    }
    if g.xid_recent > 0 {
        let codes: Vec<String> = g.xid_last.iter().map(|c| c.to_string()).collect();
        out.push(Span::raw(" "));
        out.push(Span::styled(
            format!(" XID {} x{} ", codes.join(","), g.xid_recent),
            th.sev(Severity::Critical),
        ));
    }
    if g.signals.get("ecc_dbe_volatile").is_some_and(|v| *v > 0.0) {
        out.push(Span::raw(" "));
        out.push(Span::styled(" ECC DBE ", th.sev(Severity::Critical)));
    }
    out
}

/// Ranks whose process runs on GPU `index`.
fn ranks_on(fr: &kitty_core::frame::Frame, index: u32) -> String {
    let names: Vec<String> = fr
        .ranks
        .iter()
        .filter(|r| r.gpu == Some(index))
        .map(|r| {
            r.labels
                .rank
                .map_or(format!("pid {}", r.key.pid), |x| x.to_string())
        })
        .collect();
    if names.is_empty() {
        "-".into()
    } else {
        names.join(",")
    }
}

fn gpu_val(g: &kitty_core::frame::GpuFrame, k: &str) -> Option<f64> {
    g.signals.get(k).copied()
}

fn draw_gpu_summary(f: &mut Frame, app: &App, area: Rect, th: &Theme) {
    let Some(fr) = &app.frame else { return };
    let lines: Vec<Line> = if fr.gpus.is_empty() {
        no_gpu_lines(fr, th)
    } else {
        fr.gpus
            .iter()
            .map(|g| {
                let hist: Vec<f64> = app
                    .history
                    .gpu(g.index, "util_pct")
                    .map(|r| r.tail(6).collect())
                    .unwrap_or_default();
                let util = gpu_val(g, "util_pct").map_or("-".into(), |v| format!("{v:>3.0}%"));
                let clock = gpu_val(g, "sm_clock_mhz").map_or("-".into(), |v| format!("{v:.0}MHz"));
                let mut spans = vec![Span::raw(format!(
                    "GPU{} {util} {} {clock} r{}",
                    g.index,
                    spark(&hist),
                    ranks_on(fr, g.index)
                ))];
                spans.extend(gpu_badges(g, th));
                Line::from(spans)
            })
            .collect()
    };
    f.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(" gpus (:gpus for detail) ")),
        area,
    );
}

/// The GPU detail view: per GPU, sparklines of util, memory, power,
/// temperature and SM clock, the badges and the ranks on it.
fn draw_gpus(f: &mut Frame, app: &App, area: Rect, th: &Theme) {
    let Some(fr) = &app.frame else { return };
    if fr.gpus.is_empty() {
        f.render_widget(
            Paragraph::new(no_gpu_lines(fr, th)).block(Block::bordered().title(" gpus ")),
            area,
        );
        return;
    }
    let spark_w = (area.width as usize).saturating_sub(60).clamp(4, 40);
    let mut lines = Vec::new();
    for g in &fr.gpus {
        let mut head = vec![Span::styled(
            format!("GPU{} {}", g.index, g.name),
            th.title(),
        )];
        head.push(Span::raw(format!("  ranks {}", ranks_on(fr, g.index))));
        head.extend(gpu_badges(g, th));
        lines.push(Line::from(head));
        let row = |label: &str, key: &str, text: String| {
            let hist: Vec<f64> = app
                .history
                .gpu(g.index, key)
                .map(|r| r.tail(spark_w).collect())
                .unwrap_or_default();
            Line::raw(format!("  {label:<12} {text:<22} {}", spark(&hist)))
        };
        let v = |k: &str| gpu_val(g, k);
        lines.push(row(
            "util",
            "util_pct",
            v("util_pct").map_or("-".into(), |x| {
                format!("{x:.0}% (mem {:.0}%)", v("mem_util_pct").unwrap_or(0.0))
            }),
        ));
        lines.push(row(
            "memory",
            "mem_used_bytes",
            match (v("mem_used_bytes"), v("mem_total_bytes")) {
                (Some(u), Some(t)) => format!("{} / {}", bytes(u), bytes(t)),
                _ => "-".into(),
            },
        ));
        lines.push(row(
            "power",
            "power_w",
            v("power_w").map_or("-".into(), |x| format!("{x:.0} W")),
        ));
        lines.push(row(
            "temperature",
            "temp_c",
            v("temp_c").map_or("-".into(), |x| format!("{x:.0} C")),
        ));
        lines.push(row(
            "SM clock",
            "sm_clock_mhz",
            match (v("sm_clock_mhz"), v("sm_clock_max_mhz")) {
                (Some(c), Some(m)) => format!("{c:.0} / {m:.0} MHz"),
                (Some(c), None) => format!("{c:.0} MHz"),
                _ => "-".into(),
            },
        ));
        let mut extra = Vec::new();
        if let (Some(gen), Some(w)) = (v("pcie_gen"), v("pcie_width")) {
            extra.push(format!("PCIe gen{gen:.0} x{w:.0}"));
        }
        if let (Some(rx), Some(tx)) = (v("pcie_rx_bytes_per_s"), v("pcie_tx_bytes_per_s")) {
            extra.push(format!("rx {}/s tx {}/s", bytes(rx), bytes(tx)));
        }
        if let (Some(sbe), Some(dbe)) = (v("ecc_sbe_volatile"), v("ecc_dbe_volatile")) {
            extra.push(format!("ECC sbe {sbe:.0} dbe {dbe:.0}"));
        }
        for (k, n) in [
            ("sm_active_pct", "SM active"),
            ("tensor_active_pct", "tensor"),
            ("dram_bw_util_pct", "DRAM bw"),
        ] {
            if let Some(x) = v(k) {
                extra.push(format!("{n} {x:.0}%"));
            }
        }
        if let Some(n) = v("nvlink_active_links") {
            let mut t = format!(
                "NVLink x{n:.0} crc {:.0} replay {:.0}",
                v("nvlink_crc_errors").unwrap_or(0.0),
                v("nvlink_replay_errors").unwrap_or(0.0)
            );
            if let (Some(tx), Some(rx)) = (v("nvlink_tx_bytes_per_s"), v("nvlink_rx_bytes_per_s")) {
                t.push_str(&format!(" tx {}/s rx {}/s", bytes(tx), bytes(rx)));
            }
            extra.push(t);
        }
        if !g.throttle.is_empty() {
            extra.push(format!("clock events: {}", g.throttle.join(", ")));
        }
        lines.push(Line::raw(format!("  {}", extra.join("  "))));
        lines.push(Line::raw(""));
    }
    f.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(format!(" gpus ({}) ", fr.gpus.len()))),
        area,
    );
}

fn draw_host(f: &mut Frame, app: &App, area: Rect) {
    let Some(fr) = &app.frame else { return };
    let h = &fr.host.signals;
    let g = |k: &str| h.get(k).copied();
    let hist: Vec<f64> = app
        .history
        .host("cpu_util_pct")
        .map(|r| r.tail(12).collect())
        .unwrap_or_default();
    let per_cpu: String = fr
        .host
        .cpu_pct
        .iter()
        .map(|v| SPARK[((v / 100.0) * 7.0).round().clamp(0.0, 7.0) as usize])
        .collect();
    let opt = |v: Option<f64>, f: &dyn Fn(f64) -> String| v.map_or("-".to_string(), f);
    let lines = vec![
        Line::raw(format!(
            "cpu {:>5} {}  per-cpu {}",
            opt(g("cpu_util_pct"), &|v| format!("{v:.0}%")),
            spark(&hist),
            per_cpu
        )),
        Line::raw(format!(
            "run queue {}  blocked {}  load {}",
            opt(g("procs_running"), &|v| format!("{v:.0}")),
            opt(g("procs_blocked"), &|v| format!("{v:.0}")),
            opt(g("load1"), &|v| format!("{v:.2}"))
        )),
        Line::raw(format!(
            "memory {} used, {} available",
            opt(g("mem_used_pct"), &|v| format!("{v:.0}%")),
            opt(g("mem_available_bytes"), &bytes)
        )),
        Line::raw(format!(
            "/dev/shm {} of {}",
            opt(g("shm_used_bytes"), &bytes),
            opt(g("shm_total_bytes"), &bytes)
        )),
        Line::raw(format!(
            "PSI some cpu {} mem {} io {}",
            opt(g("psi_cpu_some_pct"), &|v| format!("{v:.1}%")),
            opt(g("psi_memory_some_pct"), &|v| format!("{v:.1}%")),
            opt(g("psi_io_some_pct"), &|v| format!("{v:.1}%"))
        )),
    ];
    f.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(" host ")),
        area,
    );
}

fn draw_events(f: &mut Frame, app: &App, area: Rect, th: &Theme, full: bool) {
    let n = area.height.saturating_sub(2) as usize;
    let lines: Vec<Line> = app
        .events
        .iter()
        .rev()
        .take(n)
        .map(|e| {
            let style = match e.kind {
                kitty_core::frame::EventKind::VerdictRaised => th.sev(Severity::Warning),
                kitty_core::frame::EventKind::SourceLost => th.sev(Severity::Warning),
                _ => Style::new(),
            };
            Line::from(vec![
                Span::styled(
                    format!("{} ", kitty_core::timefmt::clock(e.wall_ns)),
                    th.dim(),
                ),
                Span::styled(e.message.clone(), style),
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

/// Signals charted in the detail view.
const DETAIL_SIGNALS: &[&str] = &[
    "cpu_pct",
    "run_delay_ms_per_s",
    "migrations_per_s",
    "cfs_throttled_ms_per_s",
    "retrans_per_s",
    "out_segs_per_s",
    "tx_queue_bytes",
    "srtt_max_us",
    "bytes_sent_per_s",
    "ctx_involuntary_per_s",
];

/// Peer median over time (joined on frame time) for a rank's signal.
fn peer_band(app: &App, me: &RankFrame, signal: &str) -> Vec<(f64, f64)> {
    let Some(fr) = &app.frame else {
        return Vec::new();
    };
    let peers: Vec<_> = fr
        .ranks
        .iter()
        .filter(|r| r.key != me.key && r.labels.job == me.labels.job)
        .filter_map(|r| app.history.rank(r.key, signal))
        .collect();
    let Some(mine) = app.history.rank(me.key, signal) else {
        return Vec::new();
    };
    // Peers' values by frame time, gathered once: a lookup per point in each
    // peer's ring would be quadratic in the history length on every draw.
    let mut by_time: std::collections::HashMap<u64, Vec<f64>> = std::collections::HashMap::new();
    for p in &peers {
        for (t, v) in p.points() {
            by_time.entry(*t).or_default().push(*v);
        }
    }
    mine.points()
        .filter_map(|(t, _)| {
            let vals = by_time.get_mut(t)?;
            kitty_core::analysis::median(vals).map(|m| (*t as f64 / 1e9, m))
        })
        .collect()
}

fn draw_detail(f: &mut Frame, app: &App, area: Rect, th: &Theme) {
    let Some(r) = app.selected_rank() else { return };
    let title = format!(
        " {} · pid {} · {} · job {} · {} threads · state {} ",
        r.display_name(),
        r.key.pid,
        r.comm,
        r.labels.job.as_deref().unwrap_or("-"),
        r.signal("threads").unwrap_or(0.0),
        r.state
    );
    let block = Block::bordered().title(title);
    let inner = block.inner(area);
    f.render_widget(block, area);
    let [charts, tables] =
        Layout::vertical([Constraint::Percentage(60), Constraint::Percentage(40)]).areas(inner);
    let ncols = if charts.width >= 140 {
        4
    } else if charts.width >= 60 {
        2
    } else {
        1
    };
    let sigs: Vec<&str> = DETAIL_SIGNALS
        .iter()
        .copied()
        .filter(|s| r.signal(s).is_some())
        .collect();
    let nrows = sigs.len().div_ceil(ncols).max(1);
    let row_areas = Layout::vertical(vec![Constraint::Ratio(1, nrows as u32); nrows]).split(charts);
    for (i, sig) in sigs.iter().enumerate() {
        let cell = Layout::horizontal(vec![Constraint::Ratio(1, ncols as u32); ncols])
            .split(row_areas[i / ncols])[i % ncols];
        let mine: Vec<(f64, f64)> = app
            .history
            .rank(r.key, sig)
            .map(|h| h.points().map(|(t, v)| (*t as f64 / 1e9, *v)).collect())
            .unwrap_or_default();
        let band = peer_band(app, r, sig);
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
        let sev = app.severity(r.key.pid, sig);
        let rank_style = match sev {
            Some(s) => th.sev(s),
            None if th.color => Style::new().fg(Color::Cyan),
            None => Style::new(),
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
        let label = kitty_core::signals::info(sig).map_or(*sig, |i| i.label);
        let peer_now = band
            .last()
            .map(|p| format_value(sig, p.1))
            .unwrap_or("-".into());
        let chart = Chart::new(datasets)
            .block(
                Block::new()
                    .borders(Borders::TOP | Borders::RIGHT)
                    .title(format!(
                        "{label}: {} (peers {peer_now})",
                        format_value(sig, r.signal(sig).unwrap_or(0.0))
                    )),
            )
            .x_axis(Axis::default().bounds([x0, x1.max(x0 + 1.0)]))
            .y_axis(Axis::default().bounds([0.0, ymax]));
        f.render_widget(chart, cell);
    }
    let [socks, threads] =
        Layout::horizontal([Constraint::Percentage(65), Constraint::Percentage(35)]).areas(tables);
    // The run-queue latency histogram of this tick, when the probe has one.
    let threads = match r.histograms.get("runq_us") {
        Some(h) if !h.is_empty() => {
            let [t, hist] =
                Layout::vertical([Constraint::Percentage(50), Constraint::Percentage(50)])
                    .areas(threads);
            let lines = super::netview::histogram_lines(h, hist.width.saturating_sub(1) as usize);
            f.render_widget(
                Paragraph::new(lines).block(
                    Block::new()
                        .borders(Borders::TOP)
                        .title("run-queue latency, this tick"),
                ),
                hist,
            );
            t
        }
        _ => threads,
    };
    let sock_rows: Vec<Row> = r
        .sockets
        .iter()
        .map(|s| {
            let i = s.info.as_ref();
            Row::new(vec![
                s.local.clone(),
                s.remote.clone(),
                s.state.clone(),
                bytes(s.tx_queue as f64),
                match s.signals.get("rtt_p50_us") {
                    Some(v) => format_value("rtt_p50_us", *v),
                    None => i.map_or("-".into(), |i| {
                        format!("~{}", format_value("srtt_max_us", i.rtt_us as f64))
                    }),
                },
                i.map_or("-".into(), |i| i.total_retrans.to_string()),
                s.signals
                    .get("bytes_sent_per_s")
                    .map_or("-".into(), |v| format!("{}/s", bytes(*v))),
            ])
        })
        .collect();
    let st = Table::new(
        sock_rows,
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
        .style(th.title()),
    )
    .block(
        Block::new()
            .borders(Borders::TOP)
            .title(format!("sockets ({})", r.sockets.len())),
    );
    f.render_widget(st, socks);
    let trows: Vec<Row> = r
        .threads
        .iter()
        .map(|t| {
            Row::new(vec![
                t.tid.to_string(),
                t.comm.clone(),
                format!("{:.1}", t.run_delay_ms_per_s),
                format!("{:.0}", t.cpu_pct),
            ])
        })
        .collect();
    let tt = Table::new(
        trows,
        [
            Constraint::Length(8),
            Constraint::Min(8),
            Constraint::Length(9),
            Constraint::Length(5),
        ],
    )
    .header(Row::new(vec!["TID", "THREAD", "RUNQ ms/s", "CPU%"]).style(th.title()))
    .block(
        Block::new()
            .borders(Borders::TOP)
            .title("threads by run-queue delay"),
    );
    f.render_widget(tt, threads);
}

fn draw_flame(f: &mut Frame, app: &App, area: Rect, th: &Theme) {
    if let Some(r) = &app.profiling {
        super::flame::draw_running(f, r, area);
    } else if let (Some(e), true) = (&app.profile_error, app.flame.is_none()) {
        f.render_widget(
            Paragraph::new(format!("  the profile failed: {e}"))
                .wrap(Wrap { trim: false })
                .block(Block::bordered().title(" on-CPU profile ")),
            area,
        );
    } else if let Some(fl) = &app.flame {
        super::flame::draw(f, fl, area, th);
    } else {
        f.render_widget(
            Paragraph::new("  press p on a rank to profile it").block(Block::bordered()),
            area,
        );
    }
}

fn draw_help(f: &mut Frame, app: &App, area: Rect, th: &Theme) {
    let mut lines = vec![Line::styled("Keys", th.title())];
    for (action, _, _, text) in ACTIONS {
        lines.push(Line::raw(format!(
            "  {:<16} {text}",
            app.keymap.keys_for(*action).join(", ")
        )));
    }
    lines.push(Line::raw(""));
    lines.push(Line::styled("Commands (:)", th.title()));
    lines.push(Line::raw(
        "  :ranks  :events  :gpus  :flows  :flame  :help  :q   :sort rank|cpu|runq|retx|txq|verdict",
    ));
    lines.push(Line::raw(
        "  :seek +30s | -2m | 12:03:04 | start | end      (replay)",
    ));
    lines.push(Line::raw(""));
    lines.push(Line::raw(format!(
        "Key bindings: {}",
        app.keymap.source.clone().unwrap_or_else(|| format!(
            "defaults (rebind in {})",
            super::keymap::KeyMap::config_path()
                .map_or("~/.config/kitty-tui/keys.conf".into(), |p| p
                    .display()
                    .to_string())
        ))
    )));
    lines.push(Line::raw("Cells are highlighted when a rank is an outlier against its peers: yellow warning, red critical."));
    f.render_widget(Clear, area);
    f.render_widget(
        Paragraph::new(lines)
            .block(Block::bordered().title(" help "))
            .wrap(Wrap { trim: false }),
        area,
    );
}

fn draw_footer(f: &mut Frame, app: &App, area: Rect, th: &Theme) {
    let line = match (&app.input, &app.message) {
        (Some(Input::Filter(t)), _) => Line::raw(format!("/{t}▏")),
        (Some(Input::Command(t)), _) => Line::raw(format!(":{t}▏")),
        (None, Some(m)) => Line::styled(m.clone(), th.title()),
        (None, None) => Line::styled(
            match app.view {
                View::Main => " ↑↓/jk move  ⏎ detail  / filter  s sort  space pause  t/T step  : command  ? help  q quit",
                _ => " esc back  ? help  q quit",
            },
            th.dim(),
        ),
    };
    f.render_widget(Paragraph::new(line), area);
}
