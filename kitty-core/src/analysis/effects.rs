//! Effects: NCCL's own account of who is late confirms the causes. A rank
//! whose late-arrival verdict (from NCCL Inspector's exec times) stands
//! beside a cause verdict of its own (CPU, throttling, GPU, its network)
//! is one straggler with one answer: the late verdict names the cause and
//! the cause names the effect. Runs after `causes`, on the sentences.

use crate::model::format::value;
use crate::model::{Frame, Sig, Text, Verdict};

/// Writes the late-arrival sentences and joins them to their causes.
pub fn apply(frame: &Frame, verdicts: &mut [Verdict]) {
    let lates: Vec<usize> = (0..verdicts.len())
        .filter(|i| verdicts[*i].signal == Sig::NcclLateMs)
        .collect();
    for i in lates {
        let pid = verdicts[i].pid;
        let cause = verdicts
            .iter()
            .enumerate()
            .filter(|(j, v)| *j != i && v.pid == pid && !v.is_consequence())
            .filter(|(_, v)| !matches!(v.signal, Sig::NcclCollsBehind | Sig::NcclRasMissing))
            .max_by(|a, b| a.1.score.total_cmp(&b.1.score))
            .map(|(j, v)| (j, v.signal));
        let late = &verdicts[i];
        let name = late
            .rank
            .map_or(format!("pid {pid}"), |r| format!("rank {r}"));
        // The collective it was latest to, among its recent ones.
        let worst = frame.rank_by_pid(pid).and_then(|r| {
            r.collectives
                .iter()
                .filter(|c| c.late_us.is_some())
                .max_by(|a, b| {
                    a.late_us
                        .unwrap_or(0.0)
                        .total_cmp(&b.late_us.unwrap_or(0.0))
                })
        });
        let at = worst.map_or("its collectives".to_string(), |c| {
            format!("{} (seq {})", c.coll, c.seq)
        });
        let mut s = format!(
            "{name} arrives {} late to {at} while its peers wait, for {:.0} s",
            value(Sig::NcclLateMs, late.value),
            late.for_s.max(0.0)
        );
        if let Some((j, sig)) = cause {
            s.push_str(&format!("; the effect of its {} verdict", sig.label()));
            verdicts[i].detail = Some(Text::message(format!("confirms {}", sig.name())));
            let c = &mut verdicts[j];
            let mut m = c.message.to_string();
            m.push_str(&format!(
                "; NCCL Inspector confirms: it arrives {} late to {at}",
                value(Sig::NcclLateMs, verdicts[i].value)
            ));
            verdicts[j].message = Text::message(m);
        }
        verdicts[i].message = Text::message(s);
    }
}

#[cfg(test)]
mod tests {
    use crate::analysis::Analysis;
    use crate::model::{CollectiveFrame, Frame, Labels, ProcKey, RankFrame, Sig, Signals};

    fn frame(t_s: f64, late_rank: u32, cpu_too: bool) -> Frame {
        let ranks = (0..4)
            .map(|i| {
                let mut s = Signals::new();
                let late = i == late_rank;
                s.set(Sig::NcclLateMs, if late { 38.0 } else { 0.0 });
                s.set(
                    Sig::RunDelayMsPerS,
                    if late && cpu_too { 400.0 } else { 2.0 },
                );
                RankFrame {
                    key: ProcKey {
                        pid: 100 + i,
                        start_time: 1,
                    },
                    labels: Labels {
                        rank: Some(i),
                        job: Some("j".into()),
                        ..Default::default()
                    },
                    signals: s,
                    collectives: vec![CollectiveFrame {
                        comm: "0xabc".into(),
                        coll: "AllReduce".into(),
                        seq: 1204,
                        late_us: Some(if late { 38_000.0 } else { 0.0 }),
                        ..Default::default()
                    }],
                    ..Default::default()
                }
            })
            .collect();
        Frame {
            mono_ns: (t_s * 1e9) as u64,
            interval_ms: 500,
            ranks,
            ..Default::default()
        }
    }

    fn run(cpu_too: bool) -> Vec<crate::model::Verdict> {
        let mut a = Analysis::default();
        let mut last = Vec::new();
        for step in 0..8 {
            let mut f = frame(step as f64 * 0.5, 2, cpu_too);
            a.apply(&mut f);
            last = f.verdicts;
        }
        last
    }

    #[test]
    fn the_late_rank_gets_the_effect_verdict() {
        let v = run(false);
        assert_eq!(v.len(), 1, "{v:#?}");
        assert_eq!((v[0].rank, v[0].signal), (Some(2), Sig::NcclLateMs));
        let m = v[0].message.as_str();
        assert!(
            m.starts_with("rank 2 arrives 38 ms late to AllReduce (seq 1204)"),
            "{m}"
        );
    }

    #[test]
    fn the_effect_and_the_cpu_cause_agree_on_the_rank() {
        let v = run(true);
        let sigs: Vec<(Option<u32>, Sig)> = v.iter().map(|v| (v.rank, v.signal)).collect();
        assert!(sigs.contains(&(Some(2), Sig::NcclLateMs)), "{sigs:?}");
        assert!(sigs.contains(&(Some(2), Sig::RunDelayMsPerS)), "{sigs:?}");
        assert!(
            v.iter().all(|v| v.rank == Some(2)),
            "no other rank is blamed: {sigs:?}"
        );
        let late = v.iter().find(|v| v.signal == Sig::NcclLateMs).unwrap();
        assert!(
            late.message
                .contains("the effect of its run-queue delay verdict"),
            "{}",
            late.message
        );
        assert_eq!(late.detail.as_deref(), Some("confirms run_delay_ms_per_s"));
        let cause = v.iter().find(|v| v.signal == Sig::RunDelayMsPerS).unwrap();
        assert!(
            cause
                .message
                .contains("NCCL Inspector confirms: it arrives 38 ms late"),
            "{}",
            cause.message
        );
    }
}
