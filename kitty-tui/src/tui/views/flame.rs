//! The profile drill-down: while `p` profiles a rank, a gauge (Esc
//! cancels); then an icicle graph of its stacks, one tab where it ran
//! (on-CPU, widths by samples) and one where it waited (off-CPU, widths by
//! time, runnable and blocked at the root): the selected frame, zoom and
//! search hits; and what failed, if it did.

use super::Ctx;
use crate::tui::app::flame::FlameState;
use crate::tui::profiler::{Progress, DURATION, FREQUENCY_HZ};
use crate::tui::theme::Theme;
use kitty_core::profile::ProfileKind;
use ratatui::prelude::*;
use ratatui::widgets::{Block, Gauge, Paragraph, Wrap};

pub fn draw(f: &mut Frame, area: Rect, cx: &Ctx) {
    let app = cx.app;
    if let Some(p) = app.profile_progress() {
        draw_running(f, p, area);
    } else if let (Some(e), true) = (app.profile_error(), app.flame().is_none()) {
        f.render_widget(
            Paragraph::new(format!("  the profile failed: {e}"))
                .wrap(Wrap { trim: false })
                .block(Block::bordered().title(" profile ")),
            area,
        );
    } else if let Some(fl) = app.flame() {
        draw_graph(f, fl, area, &cx.th);
    } else {
        f.render_widget(
            Paragraph::new("  press p on a rank to profile it").block(Block::bordered()),
            area,
        );
    }
}

/// A warm color per frame name, stable across redraws (flame graph habit).
fn color_of(name: &str) -> Color {
    let h = name
        .bytes()
        .fold(2166136261u32, |h, b| (h ^ b as u32).wrapping_mul(16777619));
    let (r, g, b) = if name.ends_with("_[k]") {
        (200 + (h % 55) as u8, 120 + (h >> 8) as u8 % 60, 60)
    } else {
        (
            205 + (h % 50) as u8,
            90 + (h >> 8) as u8 % 130,
            (h >> 16) as u8 % 55,
        )
    };
    Color::Rgb(r, g, b)
}

fn draw_running(f: &mut Frame, r: &Progress, area: Rect) {
    let x = r.fraction();
    let label = format!(
        "profiling {} (pid {}) at {FREQUENCY_HZ} Hz: {:.1} / {:.0} s — Esc cancels",
        r.name,
        r.pid,
        x * DURATION.as_secs_f64(),
        DURATION.as_secs_f64()
    );
    let [_, g, _] = Layout::vertical([
        Constraint::Percentage(40),
        Constraint::Length(3),
        Constraint::Min(0),
    ])
    .areas(area);
    f.render_widget(
        Gauge::default()
            .block(Block::bordered().title(" profile: on-CPU and off-CPU "))
            .ratio(x.clamp(0.0, 1.0))
            .label(label),
        g,
    );
}

fn draw_graph(f: &mut Frame, fl: &FlameState, area: Rect, th: &Theme) {
    let p = fl.profile();
    let how = match p.kind {
        ProfileKind::OnCpu => format!("{} samples · {} Hz", fl.tree.total(), p.frequency_hz),
        ProfileKind::OffCpu => format!(
            "{:.2} s runnable (waiting for a CPU) · {:.2} s blocked",
            p.runnable_us as f64 / 1e6,
            p.blocked_us as f64 / 1e6
        ),
    };
    let title = format!(
        " pid {} ({}) · {how} · {:.1} s · {} ",
        p.pid,
        p.comm,
        p.duration_s,
        if fl.per_thread {
            "per thread"
        } else {
            "merged"
        }
    );
    // The tabs: on-CPU where it runs, off-CPU where it waits.
    let mut tabs: Vec<Span> = vec![Span::raw(" ")];
    for (q, shown) in fl.tabs() {
        let name = format!(" {} ", q.kind.title());
        tabs.push(if shown {
            Span::styled(name, th.title())
        } else {
            Span::styled(name, th.dim())
        });
    }
    let block = Block::bordered().title(Line::from(tabs)).title(title);
    let inner = block.inner(area);
    f.render_widget(block, area);
    let [graph, status] =
        Layout::vertical([Constraint::Min(1), Constraint::Length(4)]).areas(inner);
    let (hits, share) = match &fl.search {
        Some(q) if !q.is_empty() => {
            let (h, s) = fl.tree.search(q);
            (h, Some(s))
        }
        _ => (vec![false; fl.tree.nodes.len()], None),
    };
    if fl.tree.total() == 0 {
        let why = match p.kind {
            ProfileKind::OnCpu => {
                "  no samples: the process did not run on a CPU while it was sampled (Tab: where it waited)"
            }
            ProfileKind::OffCpu => "  no waits: the process never left a CPU while it was watched",
        };
        f.render_widget(Paragraph::new(why), graph);
    } else {
        let base = fl.tree.nodes[fl.zoom].depth;
        paint(
            f.buffer_mut(),
            fl,
            &hits,
            th,
            fl.zoom,
            graph.x,
            graph.width,
            graph,
            base,
        );
    }
    let sel = &fl.tree.nodes[fl.selected];
    let zoom_total = fl.tree.nodes[fl.zoom].total.max(1);
    let mut lines = vec![Line::from(vec![
        Span::styled(format!(" {} ", sel.name), th.title()),
        Span::raw(format!(
            " total {:.1} % ({} {}, {:.1} % of the zoom) · self {:.1} %",
            fl.tree.pct(sel.total),
            sel.total,
            p.kind.unit(),
            sel.total as f64 * 100.0 / zoom_total as f64,
            fl.tree.pct(sel.self_count)
        )),
    ])];
    let mut second = format!(
        " lost stacks: {} user, {} kernel · {} collisions · {} dropped",
        p.lost_user_stacks, p.lost_kernel_stacks, p.collisions, p.dropped
    );
    if let (Some(q), Some(s)) = (&fl.search, share) {
        second.push_str(&format!(" · /{q}: {s:.1} % of the total"));
    } else if fl.typing {
        second.push_str(" · /");
    }
    lines.push(Line::raw(second));
    let third = fl
        .message
        .clone()
        .or_else(|| p.notes.first().map(|n| n.to_string()))
        .unwrap_or_default();
    lines.push(Line::styled(format!(" {third}"), th.dim()));
    lines.push(Line::styled(
        " ←→/hl frame · ↑↓/kj caller/callee · enter zoom · esc out · / search · t threads · Tab on/off-CPU · w write",
        th.dim(),
    ));
    f.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), status);
}

/// Paints `node` and its callees into [x, x+width) from its row down.
#[allow(clippy::too_many_arguments)]
fn paint(
    buf: &mut Buffer,
    fl: &FlameState,
    hits: &[bool],
    th: &Theme,
    node: usize,
    x: u16,
    width: u16,
    area: Rect,
    base: usize,
) {
    let n = &fl.tree.nodes[node];
    let row = (n.depth - base) as u16;
    if width == 0 || row >= area.height {
        return;
    }
    let y = area.y + row;
    let style = if node == fl.selected {
        Style::new().add_modifier(Modifier::REVERSED | Modifier::BOLD)
    } else if hits[node] {
        th.hit()
    } else if th.color {
        Style::new().bg(color_of(&n.name)).fg(Color::Black)
    } else {
        Style::new()
    };
    let label: String = format!("{:<w$}", n.name, w = width as usize)
        .chars()
        .take(width as usize)
        .collect();
    // A frame's edge: the last cell is a separator when there is room.
    let label = if width > 2 && !th.color {
        let mut l: String = label.chars().take(width as usize - 1).collect();
        l.push('|');
        l
    } else {
        label
    };
    buf.set_string(x, y, label, style);
    let mut seen = 0u64;
    for &c in &n.children {
        let ct = fl.tree.nodes[c].total;
        let x0 = x + (seen * width as u64 / n.total.max(1)) as u16;
        seen += ct;
        let x1 = x + (seen * width as u64 / n.total.max(1)) as u16;
        paint(buf, fl, hits, th, c, x0, x1 - x0, area, base);
    }
}
