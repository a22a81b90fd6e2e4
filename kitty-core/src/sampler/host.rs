//! The host phase: node-wide CPU, run queue, memory, /dev/shm, PSI and
//! interface counters, with utilizations from two samples.

use crate::model::rates::rate;
use crate::model::{HostCounters, HostFrame, InterfaceFrame, Sig, Signals, Text};
use crate::sources::host::HostSample;

pub(super) fn build_host(h: &HostSample, prev: Option<&HostFrame>, dt_s: Option<f64>) -> HostFrame {
    let mut sig = Signals::new();
    let util = |p: (u64, u64), c: (u64, u64)| -> Option<f64> {
        let dt = c.1.checked_sub(p.1)?;
        let db = c.0.checked_sub(p.0)?;
        (dt > 0).then(|| db as f64 * 100.0 / dt as f64)
    };
    let mut cpu_pct = Vec::new();
    if let Some(p) = prev {
        sig.set_opt(Sig::CpuUtilPct, util(p.counters.cpu_total, h.cpu_total));
        for (i, c) in h.cpu_each.iter().enumerate() {
            cpu_pct.push(
                p.counters
                    .cpu_each
                    .get(i)
                    .and_then(|pc| util(*pc, *c))
                    .unwrap_or(0.0),
            );
        }
    }
    sig.set_opt(Sig::ProcsRunning, h.procs_running.map(|v| v as f64));
    sig.set_opt(Sig::ProcsBlocked, h.procs_blocked.map(|v| v as f64));
    let g = &h.gauges;
    sig.set_opt(Sig::Load1, g.loadavg.map(|l| l[0]));
    sig.set_opt(Sig::MemAvailableBytes, g.mem_available.map(|v| v as f64));
    if let (Some(t), Some(a)) = (g.mem_total, g.mem_available) {
        sig.set_opt(
            Sig::MemUsedPct,
            (t > 0).then(|| (t.saturating_sub(a)) as f64 * 100.0 / t as f64),
        );
    }
    sig.set_opt(Sig::ShmUsedBytes, g.shm_used.map(|v| v as f64));
    sig.set_opt(Sig::ShmTotalBytes, g.shm_total.map(|v| v as f64));
    for (i, s) in [Sig::PsiCpuSomePct, Sig::PsiMemorySomePct, Sig::PsiIoSomePct]
        .into_iter()
        .enumerate()
    {
        sig.set_opt(s, g.psi[i].map(|(avg, _)| avg));
    }
    let interfaces = h
        .interfaces
        .iter()
        .map(|(name, (rx, tx))| {
            let p = prev.and_then(|p| p.interfaces.iter().find(|i| i.name == name.as_str()));
            InterfaceFrame {
                name: Text::new(name),
                rx_bytes: *rx,
                tx_bytes: *tx,
                rx_bytes_per_s: p.zip(dt_s).and_then(|(p, dt)| rate(p.rx_bytes, *rx, dt)),
                tx_bytes_per_s: p.zip(dt_s).and_then(|(p, dt)| rate(p.tx_bytes, *tx, dt)),
            }
        })
        .collect();
    HostFrame {
        numa: Vec::new(),
        signals: sig,
        cpu_pct,
        interfaces,
        counters: HostCounters {
            cpu_total: h.cpu_total,
            cpu_each: h.cpu_each.clone(),
            psi_some_us: [
                g.psi[0].map(|p| p.1),
                g.psi[1].map(|p| p.1),
                g.psi[2].map(|p| p.1),
            ],
        },
        busy: Vec::new(),
    }
}
