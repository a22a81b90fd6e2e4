//! The header: the mode (LIVE, PAUSED, REPLAY) with the time and zone and
//! the position, recording, node, jobs with their step times, the interval
//! and kernel; then the sources; in replay, the timeline.

use super::Ctx;
use kitty_core::model::time::civil;
use kitty_core::model::JobKey;
use ratatui::prelude::*;
use ratatui::widgets::Paragraph;

/// Header lines: two, and the timeline in replay.
pub fn height(app: &crate::tui::app::App) -> u16 {
    if app.replay().is_some() {
        3
    } else {
        2
    }
}

pub fn draw(f: &mut Frame, area: Rect, cx: &Ctx) {
    let (app, th) = (cx.app, &cx.th);
    let mut l1: Vec<Span> = vec![Span::styled(" kitty ", th.title())];
    let Some(fr) = app.frame() else {
        l1.push(Span::raw("waiting for the first sample..."));
        f.render_widget(Paragraph::new(Line::from(l1)), area);
        return;
    };
    // The mode and the position first: they must survive any width; the
    // least important parts (kernel, interval) come last and are cut first.
    let c = civil(fr.wall_ns, app.utc());
    let now = format!("{} {}", c.time, c.zone);
    match app.replay() {
        Some(r) => l1.push(Span::styled(
            format!(
                "REPLAY {} {now} ({}/{}) {}{}x",
                c.date,
                r.pos() + 1,
                r.len(),
                if r.playing() { "▶ " } else { "⏸ " },
                r.speed()
            ),
            th.title(),
        )),
        None if app.is_paused() => {
            let (at, of) = app.paused_at();
            l1.push(Span::styled(
                format!("PAUSED {now} ({at}/{of})"),
                th.title(),
            ))
        }
        None => l1.push(Span::styled(
            format!("LIVE {now}"),
            th.ok().add_modifier(Modifier::BOLD),
        )),
    }
    if let Some(rec) = app.recording() {
        l1.push(Span::styled(format!(" ● REC {rec}"), th.rec()));
    }
    l1.push(Span::raw(format!(" │ {} │ ", fr.node)));
    // Jobs by name and identity: two launches of one name are two jobs,
    // told apart by their id.
    let mut jobs: Vec<(JobKey, usize)> = Vec::new();
    for r in &fr.ranks {
        let key = r.labels.job_key();
        match jobs.iter_mut().find(|(k, _)| *k == key) {
            Some(e) => e.1 += 1,
            None => jobs.push((key, 1)),
        }
    }
    let shared = |name: Option<&str>| jobs.iter().filter(|((n, _), _)| *n == name).count() > 1;
    let jobs_s: Vec<String> = jobs
        .iter()
        .map(|((name, id), n)| {
            let j = name.unwrap_or("(no job)");
            let shown = match id {
                Some(id) if shared(*name) => format!("{j} [{id}]"),
                _ => j.to_string(),
            };
            match fr.job_step_ms.get(j) {
                Some(ms) => format!("{shown} ({n} ranks, step {ms:.1} ms)"),
                None => format!("{shown} ({n} ranks)"),
            }
        })
        .collect();
    if !jobs_s.is_empty() {
        l1.push(Span::raw(format!("job {} │ ", jobs_s.join(", "))));
    }
    l1.push(Span::raw(match app.kernel() {
        "" => format!("every {} ms", fr.interval_ms),
        k => format!("every {} ms │ kernel {k}", fr.interval_ms),
    }));
    let mut l2: Vec<Span> = vec![Span::raw(" sources: ")];
    for (name, st) in fr.sources.iter() {
        if st.is_ok() {
            l2.push(Span::styled(format!("{name} ✓"), th.ok()));
            // The RTT probe's strategy says how raw its numbers are.
            if let (Some(s), kitty_core::model::Source::EbpfRtt) = (&st.strategy, name) {
                let short = s.split(" + ").next().unwrap_or(s);
                l2.push(Span::styled(format!(" ({short})"), th.dim()));
            }
        } else if name.usually_absent() && st.status == kitty_core::model::Status::Unavailable {
            // Most nodes have none of these: a dash, the reason in doctor
            // and the views (:nics).
            l2.push(Span::styled(format!("{name} -"), th.dim()));
        } else {
            let mut why = st.reason.as_deref().unwrap_or_default().to_string();
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
    let mut lines = vec![Line::from(l1), Line::from(l2)];
    if let Some(r) = app.replay() {
        lines.push(timeline(r, area.width, app.utc(), th));
    }
    f.render_widget(Paragraph::new(lines), area);
}

/// `start ━━━━●───── end (date zone, length)`: where the replay is.
fn timeline<'a>(
    r: &crate::tui::app::ReplayState,
    width: u16,
    utc: bool,
    th: &crate::tui::theme::Theme,
) -> Line<'a> {
    let (Some(a), Some(b), Some(now)) = (r.wall_ns(0), r.wall_ns(r.len() - 1), r.wall_ns(r.pos()))
    else {
        return Line::raw("");
    };
    let (ca, cb) = (civil(a, utc), civil(b, utc));
    let span = std::time::Duration::from_secs(b.saturating_sub(a) / 1_000_000_000);
    let tail = format!(
        " {} ({} {}, {})",
        cb.time,
        ca.date,
        ca.zone,
        humantime::format_duration(span)
    );
    let head = format!(" {} ", ca.time);
    let bar = (width as usize)
        .saturating_sub(head.chars().count() + tail.chars().count() + 1)
        .max(4);
    let at = if b > a {
        ((now - a) as f64 / (b - a) as f64 * (bar - 1) as f64).round() as usize
    } else {
        0
    };
    Line::from(vec![
        Span::styled(head, th.dim()),
        Span::styled("━".repeat(at), th.title()),
        Span::styled("●", th.title()),
        Span::styled("─".repeat(bar - 1 - at.min(bar - 1)), th.dim()),
        Span::styled(tail, th.dim()),
    ])
}
