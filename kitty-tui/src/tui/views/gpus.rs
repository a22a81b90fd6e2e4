//! GPUs: the pane of the main view (one line per GPU: util sparkline, SM
//! clock, its ranks, badges) and the `:gpus` detail view (sparklines of
//! util, memory, power, temperature and clocks; PCIe, ECC, GPM, NVLink,
//! clock events).

use super::Ctx;
use crate::tui::widgets::spark;
use kitty_core::model::format::bytes;
use kitty_core::model::{Frame as KFrame, GpuFrame, GpuStatus, Severity, Sig, Source};
use kitty_core::sources::nvml::is_slowing;
use ratatui::prelude::*;
use ratatui::widgets::{Block, Paragraph};

/// Why the GPU area is empty, in words.
fn no_gpu_lines<'a>(fr: &KFrame, cx: &Ctx) -> Vec<Line<'a>> {
    let why = match fr.sources.get(Source::Nvml) {
        Some(st) if st.is_ok() => "NVML reports no GPU on this node.".to_string(),
        Some(st) => format!(
            "nvml: {}",
            st.reason
                .as_deref()
                .map(str::to_string)
                .unwrap_or_else(|| st.status.to_string())
        ),
        None => "GPU telemetry is off (--no-gpu).".into(),
    };
    vec![
        Line::styled("No GPU telemetry.", cx.th.title()),
        Line::raw(why),
    ]
}

/// Badges for a GPU: status, slowing throttle reasons, XIDs, ECC.
fn badges<'a>(g: &GpuFrame, cx: &Ctx) -> Vec<Span<'a>> {
    let th = &cx.th;
    let mut out = Vec::new();
    if g.status != GpuStatus::Ok {
        out.push(Span::styled(
            format!(" {} ", g.status.name().to_uppercase()),
            th.sev(Severity::Critical),
        ));
    }
    for t in g.throttle.iter().filter(|t| is_slowing(t)) {
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
    if g.signals.get(Sig::EccDbeVolatile).is_some_and(|v| v > 0.0) {
        out.push(Span::raw(" "));
        out.push(Span::styled(" ECC DBE ", th.sev(Severity::Critical)));
    }
    out
}

/// Ranks whose process runs on GPU `index`.
fn ranks_on(fr: &KFrame, index: u32) -> String {
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

pub fn draw_pane(f: &mut Frame, area: Rect, cx: &Ctx) {
    let Some(fr) = cx.app.frame() else { return };
    let lines: Vec<Line> = if fr.gpus.is_empty() {
        no_gpu_lines(fr, cx)
    } else {
        fr.gpus
            .iter()
            .map(|g| {
                let hist: Vec<f64> = cx
                    .app
                    .history()
                    .gpu(g.index, Sig::UtilPct)
                    .map(|r| r.tail(6).collect())
                    .unwrap_or_default();
                let v = |s| g.signals.get(s);
                let util = v(Sig::UtilPct).map_or("-".into(), |v| format!("{v:>3.0}%"));
                let clock = v(Sig::SmClockMhz).map_or("-".into(), |v| format!("{v:.0}MHz"));
                let mut spans = vec![Span::raw(format!(
                    "GPU{} {util} {} {clock} r{}",
                    g.index,
                    spark(&hist),
                    ranks_on(fr, g.index)
                ))];
                spans.extend(badges(g, cx));
                Line::from(spans)
            })
            .collect()
    };
    f.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(" gpus (:gpus for detail) ")),
        area,
    );
}

/// One GPU's second line: PCIe, ECC, GPM, NVLink, clock events.
fn extras(g: &GpuFrame) -> String {
    let v = |s| g.signals.get(s);
    let mut extra = Vec::new();
    if let (Some(gen), Some(w)) = (v(Sig::PcieGen), v(Sig::PcieWidth)) {
        extra.push(format!("PCIe gen{gen:.0} x{w:.0}"));
    }
    if let (Some(rx), Some(tx)) = (v(Sig::PcieRxBytesPerS), v(Sig::PcieTxBytesPerS)) {
        extra.push(format!("rx {}/s tx {}/s", bytes(rx), bytes(tx)));
    }
    if let (Some(sbe), Some(dbe)) = (v(Sig::EccSbeVolatile), v(Sig::EccDbeVolatile)) {
        extra.push(format!("ECC sbe {sbe:.0} dbe {dbe:.0}"));
    }
    for (k, n) in [
        (Sig::SmActivePct, "SM active"),
        (Sig::TensorActivePct, "tensor"),
        (Sig::DramBwUtilPct, "DRAM bw"),
    ] {
        if let Some(x) = v(k) {
            extra.push(format!("{n} {x:.0}%"));
        }
    }
    if let Some(n) = v(Sig::NvlinkActiveLinks) {
        let mut t = format!(
            "NVLink x{n:.0} crc {:.0} replay {:.0}",
            v(Sig::NvlinkCrcErrors).unwrap_or(0.0),
            v(Sig::NvlinkReplayErrors).unwrap_or(0.0)
        );
        if let (Some(tx), Some(rx)) = (v(Sig::NvlinkTxBytesPerS), v(Sig::NvlinkRxBytesPerS)) {
            t.push_str(&format!(" tx {}/s rx {}/s", bytes(tx), bytes(rx)));
        }
        extra.push(t);
    }
    if !g.throttle.is_empty() {
        let names: Vec<&str> = g.throttle.iter().map(|t| t.as_str()).collect();
        extra.push(format!("clock events: {}", names.join(", ")));
    }
    extra.join("  ")
}

pub fn draw_detail(f: &mut Frame, area: Rect, cx: &Ctx) {
    let Some(fr) = cx.app.frame() else { return };
    if fr.gpus.is_empty() {
        f.render_widget(
            Paragraph::new(no_gpu_lines(fr, cx)).block(Block::bordered().title(" gpus ")),
            area,
        );
        return;
    }
    let spark_w = (area.width as usize).saturating_sub(60).clamp(4, 40);
    let mut lines = Vec::new();
    for g in &fr.gpus {
        let mut head = vec![Span::styled(
            format!("GPU{} {}", g.index, g.name),
            cx.th.title(),
        )];
        head.push(Span::raw(format!("  ranks {}", ranks_on(fr, g.index))));
        head.extend(badges(g, cx));
        lines.push(Line::from(head));
        let row = |label: &str, key: Sig, text: String| {
            let hist: Vec<f64> = cx
                .app
                .history()
                .gpu(g.index, key)
                .map(|r| r.tail(spark_w).collect())
                .unwrap_or_default();
            Line::raw(format!("  {label:<12} {text:<22} {}", spark(&hist)))
        };
        let v = |s| g.signals.get(s);
        lines.push(row(
            "util",
            Sig::UtilPct,
            v(Sig::UtilPct).map_or("-".into(), |x| {
                format!("{x:.0}% (mem {:.0}%)", v(Sig::MemUtilPct).unwrap_or(0.0))
            }),
        ));
        lines.push(row(
            "memory",
            Sig::MemUsedBytes,
            match (v(Sig::MemUsedBytes), v(Sig::MemTotalBytes)) {
                (Some(u), Some(t)) => format!("{} / {}", bytes(u), bytes(t)),
                _ => "-".into(),
            },
        ));
        lines.push(row(
            "power",
            Sig::PowerW,
            v(Sig::PowerW).map_or("-".into(), |x| format!("{x:.0} W")),
        ));
        lines.push(row(
            "temperature",
            Sig::TempC,
            v(Sig::TempC).map_or("-".into(), |x| format!("{x:.0} C")),
        ));
        lines.push(row(
            "SM clock",
            Sig::SmClockMhz,
            match (v(Sig::SmClockMhz), v(Sig::SmClockMaxMhz)) {
                (Some(c), Some(m)) => format!("{c:.0} / {m:.0} MHz"),
                (Some(c), None) => format!("{c:.0} MHz"),
                _ => "-".into(),
            },
        ));
        lines.push(Line::raw(format!("  {}", extras(g))));
        lines.push(Line::raw(""));
    }
    f.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(format!(" gpus ({}) ", fr.gpus.len()))),
        area,
    );
}
