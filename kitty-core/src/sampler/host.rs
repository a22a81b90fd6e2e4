//! The host phase: node-wide CPU, run queue, memory, /dev/shm, PSI and
//! interface counters, with utilizations from two readings.

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
    let cpu = &h.cpu;
    let mut cpu_pct = Vec::new();
    match prev {
        // /proc/stat read again: utilizations since the reading before.
        Some(p) if h.cpu_fresh => {
            sig.set_opt(Sig::CpuUtilPct, util(p.counters.cpu_total, cpu.cpu_total));
            cpu_pct.extend(cpu.cpu_each.iter().enumerate().map(|(i, c)| {
                p.counters
                    .cpu_each
                    .get(i)
                    .and_then(|pc| util(*pc, *c))
                    .unwrap_or(0.0)
            }));
        }
        // Between readings: the last reading's.
        Some(p) => {
            sig.set_opt(Sig::CpuUtilPct, p.signals.get(Sig::CpuUtilPct));
            cpu_pct.clone_from(&p.cpu_pct);
        }
        None => {}
    }
    sig.set_opt(Sig::ProcsRunning, cpu.procs_running.map(|v| v as f64));
    sig.set_opt(Sig::ProcsBlocked, cpu.procs_blocked.map(|v| v as f64));
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
    let before = prev.map_or(&[][..], |p| &p.interfaces[..]);
    let interfaces = h
        .interfaces
        .iter()
        .enumerate()
        .map(|(at, (name, (rx, tx)))| {
            // The same interfaces come in the same order tick after tick:
            // the last frame's at this place is looked at first (a node's
            // pods bring dozens of veths, each looked for every tick).
            let p = before
                .get(at)
                .filter(|i| i.name == name.as_str())
                .or_else(|| before.iter().find(|i| i.name == name.as_str()));
            InterfaceFrame {
                name: p.map_or_else(|| Text::new(name), |p| p.name.clone()),
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
            cpu_total: cpu.cpu_total,
            cpu_each: cpu.cpu_each.clone(),
            psi_some_us: [
                g.psi[0].map(|p| p.1),
                g.psi[1].map(|p| p.1),
                g.psi[2].map(|p| p.1),
            ],
        },
        busy: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::host::HostCpu;

    fn sample(busy: u64, total: u64, fresh: bool) -> HostSample {
        HostSample {
            cpu: HostCpu {
                cpu_total: (busy, total),
                cpu_each: vec![(busy, total)],
                procs_running: Some(3),
                procs_blocked: Some(0),
            },
            cpu_fresh: fresh,
            ..Default::default()
        }
    }

    #[test]
    fn a_cpu_utilization_is_over_the_readings_and_carried_between_them() {
        let first = build_host(&sample(100, 1000, true), None, None);
        assert_eq!(first.signals.get(Sig::CpuUtilPct), None, "one reading");
        let second = build_host(&sample(150, 1100, true), Some(&first), Some(0.5));
        assert_eq!(second.signals.get(Sig::CpuUtilPct), Some(50.0));
        assert_eq!(second.cpu_pct, vec![50.0]);
        // Not read this tick: the last reading's, its counters kept for
        // the next one.
        let between = build_host(&sample(150, 1100, false), Some(&second), Some(0.5));
        assert_eq!(between.signals.get(Sig::CpuUtilPct), Some(50.0));
        assert_eq!(between.cpu_pct, vec![50.0]);
        assert_eq!(between.counters.cpu_total, (150, 1100));
        assert_eq!(between.signals.get(Sig::ProcsRunning), Some(3.0));
        // The next reading: over the whole span since the one before.
        let next = build_host(&sample(250, 1500, true), Some(&between), Some(0.5));
        assert_eq!(next.signals.get(Sig::CpuUtilPct), Some(25.0));
        assert_eq!(next.cpu_pct, vec![25.0]);
    }

    #[test]
    fn each_interface_is_rated_against_its_own_counters_when_one_comes_or_goes() {
        let with = |ifs: &[(&str, u64)]| HostSample {
            interfaces: ifs
                .iter()
                .map(|(n, b)| (n.to_string(), (*b, *b * 2)))
                .collect(),
            ..Default::default()
        };
        let rates = |f: &HostFrame| {
            f.interfaces
                .iter()
                .map(|i| (i.name.to_string(), i.rx_bytes_per_s, i.tx_bytes_per_s))
                .collect::<Vec<_>>()
        };
        let first = build_host(&with(&[("eth0", 1000), ("lo", 10)]), None, None);
        // A veth sorts between them: each other one is found where it is.
        let second = build_host(
            &with(&[("eth0", 1500), ("lo", 20), ("eth9", 7)]),
            Some(&first),
            Some(0.5),
        );
        assert_eq!(
            rates(&second),
            [
                ("eth0".into(), Some(1000.0), Some(2000.0)),
                ("eth9".into(), None, None),
                ("lo".into(), Some(20.0), Some(40.0)),
            ]
        );
        assert!(std::ptr::eq(
            second.interfaces[0].name.as_str(),
            first.interfaces[0].name.as_str()
        ));
        let third = build_host(&with(&[("eth9", 9), ("lo", 30)]), Some(&second), Some(0.5));
        assert_eq!(
            rates(&third),
            [
                ("eth9".into(), Some(4.0), Some(8.0)),
                ("lo".into(), Some(20.0), Some(40.0))
            ]
        );
    }
}
