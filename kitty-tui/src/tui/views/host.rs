//! The host pane: CPU (all and per CPU), run queue, memory, /dev/shm, PSI.

use super::Ctx;
use crate::tui::widgets::{level, spark};
use kitty_core::model::format::bytes;
use kitty_core::model::Sig;
use ratatui::prelude::*;
use ratatui::widgets::{Block, Paragraph};

pub fn draw(f: &mut Frame, area: Rect, cx: &Ctx) {
    let Some(fr) = cx.app.frame() else { return };
    let g = |k: Sig| fr.host.signals.get(k);
    let hist: Vec<f64> = cx
        .app
        .history()
        .host(Sig::CpuUtilPct)
        .map(|r| r.tail(12).collect())
        .unwrap_or_default();
    let per_cpu: String = fr.host.cpu_pct.iter().map(|v| level(*v)).collect();
    let opt = |v: Option<f64>, f: &dyn Fn(f64) -> String| v.map_or("-".to_string(), f);
    let pct = |v: f64| format!("{v:.1}%");
    let lines = vec![
        Line::raw(format!(
            "cpu {:>5} {}  per-cpu {}",
            opt(g(Sig::CpuUtilPct), &|v| format!("{v:.0}%")),
            spark(&hist),
            per_cpu
        )),
        Line::raw(format!(
            "run queue {}  blocked {}  load {}",
            opt(g(Sig::ProcsRunning), &|v| format!("{v:.0}")),
            opt(g(Sig::ProcsBlocked), &|v| format!("{v:.0}")),
            opt(g(Sig::Load1), &|v| format!("{v:.2}"))
        )),
        Line::raw(format!(
            "memory {} used, {} available",
            opt(g(Sig::MemUsedPct), &|v| format!("{v:.0}%")),
            opt(g(Sig::MemAvailableBytes), &bytes)
        )),
        Line::raw(format!(
            "/dev/shm {} of {}",
            opt(g(Sig::ShmUsedBytes), &bytes),
            opt(g(Sig::ShmTotalBytes), &bytes)
        )),
        Line::raw(format!(
            "PSI some cpu {} mem {} io {}",
            opt(g(Sig::PsiCpuSomePct), &pct),
            opt(g(Sig::PsiMemorySomePct), &pct),
            opt(g(Sig::PsiIoSomePct), &pct)
        )),
    ];
    f.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(" host ")),
        area,
    );
}
