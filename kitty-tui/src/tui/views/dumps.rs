//! `:fr`: the last Flight Recorder dumps (`F`): who is behind, then per
//! rank its process groups' progress and its latest collectives.

use super::Ctx;
use kitty_core::model::time::civil;
use kitty_core::model::Severity;
use ratatui::prelude::*;
use ratatui::widgets::{Block, Paragraph, Wrap};

pub fn draw(f: &mut Frame, area: Rect, cx: &Ctx) {
    let d = cx.app.dumps();
    let th = &cx.th;
    let mut lines = Vec::new();
    if let Some(n) = d.pending {
        lines.push(Line::styled(
            format!("asking {n} ranks' Flight Recorders for a dump…"),
            th.title(),
        ));
    } else if d.answers.is_empty() {
        lines.push(Line::styled("No Flight Recorder dump yet.", th.title()));
        lines.push(Line::raw(
            "Select a rank and press F: kitty asks every rank of its job whose environment names TORCH_NCCL_DEBUG_INFO_PIPE_FILE (with TORCH_NCCL_TRACE_BUFFER_SIZE > 0) to dump, and shows who is behind.",
        ));
    } else {
        let c = civil(d.at_ns, cx.app.utc());
        lines.push(Line::styled(
            format!("dumps of {} {}", c.time, c.zone),
            th.title(),
        ));
        if d.behind.is_empty() {
            lines.push(Line::styled(
                "no rank is behind: every process group completed the same collectives",
                th.ok(),
            ));
        }
        for b in &d.behind {
            lines.push(Line::styled(b.clone(), th.sev(Severity::Critical)));
        }
        for (t, r) in &d.answers {
            lines.push(Line::raw(""));
            let who = t
                .rank
                .map_or(format!("pid {}", t.key.pid), |r| format!("rank {r}"));
            match r {
                Err(e) => lines.push(Line::styled(format!("{who}: {e}"), th.dim())),
                Ok(dump) => {
                    lines.push(Line::styled(
                        format!("{who} (pid {}, format {})", t.key.pid, dump.version),
                        th.title(),
                    ));
                    for s in &dump.pg_status {
                        lines.push(Line::raw(format!(
                            "  pg {}: enqueued {}  started {}  completed {}",
                            s.pg, s.last_enqueued, s.last_started, s.last_completed
                        )));
                    }
                    for e in dump.entries.iter().rev().take(5) {
                        lines.push(Line::raw(format!(
                            "  {:>8} {:<24} {:<10} {}",
                            e.seq,
                            e.op,
                            e.state,
                            e.duration_ms.map_or("-".into(), |d| format!("{d:.1} ms"))
                        )));
                    }
                }
            }
        }
    }
    f.render_widget(
        Paragraph::new(lines)
            .block(Block::bordered().title(" flight recorder (F asks again) "))
            .wrap(Wrap { trim: false }),
        area,
    );
}
