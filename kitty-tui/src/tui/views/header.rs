//! The header: node, kernel, jobs with their step times, the interval, the
//! mode (LIVE, PAUSED, REPLAY) with the time, recording; then the sources.

use super::Ctx;
use kitty_core::model::time::clock;
use kitty_core::model::JobKey;
use ratatui::prelude::*;
use ratatui::widgets::Paragraph;

pub fn draw(f: &mut Frame, area: Rect, cx: &Ctx) {
    let (app, th) = (cx.app, &cx.th);
    let mut l1: Vec<Span> = vec![Span::styled(" kitty ", th.title())];
    let Some(fr) = app.frame() else {
        l1.push(Span::raw("waiting for the first sample..."));
        f.render_widget(Paragraph::new(Line::from(l1)), area);
        return;
    };
    l1.push(Span::raw(format!(
        "│ {} │ kernel {} │ ",
        fr.node,
        app.kernel()
    )));
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
    l1.push(Span::raw(format!("every {} ms │ ", fr.interval_ms)));
    let now = clock(fr.wall_ns);
    match app.replay() {
        Some(r) => l1.push(Span::styled(
            format!(
                "REPLAY {now} ({}/{}) {}{}x",
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
        l1.push(Span::styled(format!(" │ ● REC {rec}"), th.rec()));
    }
    let mut l2: Vec<Span> = vec![Span::raw(" sources: ")];
    for (name, st) in fr.sources.iter() {
        if st.is_ok() {
            l2.push(Span::styled(format!("{name} ✓"), th.ok()));
            // The RTT probe's strategy says how raw its numbers are.
            if let (Some(s), kitty_core::model::Source::EbpfRtt) = (&st.strategy, name) {
                let short = s.split(" + ").next().unwrap_or(s);
                l2.push(Span::styled(format!(" ({short})"), th.dim()));
            }
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
    f.render_widget(Paragraph::new(vec![Line::from(l1), Line::from(l2)]), area);
}
