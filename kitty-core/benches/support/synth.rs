//! Synthetic frames shaped like a real node's (ranks with their signals,
//! sockets and threads; host; events now and then), shared by the
//! `synth_recording` example and the benchmarks that need a long recording.
#![allow(dead_code)]

use kitty_core::model::*;

/// A deterministic wobble so that values change like real ones.
fn wobble(i: u64, k: u64) -> f64 {
    (((i * 2654435761 + k * 40503) % 1000) as f64) / 1000.0
}

/// Frame `i` of a recording that started at `t0` (wall ns), with `ranks` ranks.
pub fn frame(i: u64, t0: u64, ranks: u32) -> Frame {
    let mut f = Frame {
        version: FRAME_VERSION,
        seq: i,
        wall_ns: t0 + i * 500_000_000,
        mono_ns: 1_000_000_000 + i * 500_000_000,
        node: Text::new("gpu-node-7"),
        interval_ms: 500,
        ..Default::default()
    };
    for (k, s) in [
        (Sig::CpuUtilPct, 40.0),
        (Sig::ProcsRunning, 9.0),
        (Sig::Load1, 8.2),
        (Sig::MemAvailableBytes, 9.1e11),
        (Sig::MemUsedPct, 31.0),
        (Sig::PsiCpuSomePct, 1.5),
    ]
    .into_iter()
    .enumerate()
    {
        f.host
            .signals
            .set(s.0, s.1 * (1.0 + wobble(i, k as u64) / 10.0));
    }
    f.host.cpu_pct = (0..16).map(|c| 30.0 + wobble(i, c) * 40.0).collect();
    f.sources.insert(Source::Procfs, SourceStatus::ok());
    f.sources.insert(Source::SockDiag, SourceStatus::ok());
    for r in 0..ranks {
        let mut rf = RankFrame {
            key: ProcKey {
                pid: 10_000 + r,
                start_time: 4242,
            },
            comm: Text::new("python3"),
            labels: Labels {
                rank: Some(r),
                local_rank: Some(r),
                world_size: Some(ranks),
                job: Some(Text::new("llama-70b-pretrain")),
                ..Default::default()
            },
            state: Text::new("S"),
            netns: Some(4026531840),
            ..Default::default()
        };
        let x = |k: u64| wobble(i, r as u64 * 100 + k);
        for (k, (s, v)) in [
            (Sig::CpuPct, 95.0),
            (Sig::RunDelayMsPerS, 0.4),
            (Sig::MigrationsPerS, 0.5),
            (Sig::AffinityCpus, 16.0),
            (Sig::CtxVoluntaryPerS, 900.0),
            (Sig::CtxInvoluntaryPerS, 40.0),
            (Sig::Threads, 64.0),
            (Sig::RssBytes, 2.1e10),
            (Sig::Fds, 212.0),
            (Sig::Sockets, 18.0),
            (Sig::TcpSockets, 4.0),
            (Sig::TxQueueBytes, 0.0),
            (Sig::RetransPerS, 0.0),
            (Sig::OutSegsPerS, 8_000.0),
            (Sig::InSegsPerS, 8_000.0),
            (Sig::BytesSentPerS, 1.1e8),
            (Sig::BytesRecvPerS, 1.1e8),
            (Sig::SrttMaxUs, 60.0),
        ]
        .into_iter()
        .enumerate()
        {
            let steady = matches!(
                s,
                Sig::AffinityCpus | Sig::Threads | Sig::TcpSockets | Sig::Sockets
            );
            rf.signals.set(
                s,
                if steady {
                    v
                } else {
                    v * (0.9 + x(k as u64) / 5.0)
                },
            );
        }
        rf.counters.exec_ns = i * 475_000_000;
        rf.counters.run_delay_ns = i * 200_000;
        for s in 0..4u64 {
            let mut sock = SocketFrame {
                inode: 900_000 + r as u64 * 10 + s,
                local: Text::new(&format!("10.0.0.{}:{}", r + 1, 40_000 + s)),
                remote: Text::new(&format!("10.0.0.{}:29500", (r + 1) % ranks + 1)),
                state: Text::new("ESTABLISHED"),
                info: Some(TcpInfo {
                    rtt_us: 60,
                    bytes_acked: Some(i * 55_000_000),
                    segs_out: Some((i * 4_000) as u32),
                    ..Default::default()
                }),
                ..Default::default()
            };
            sock.signals
                .set(Sig::BytesSentPerS, 2.7e7 * (0.9 + x(10 + s) / 5.0));
            rf.sockets.push(sock);
        }
        rf.threads = (0..4)
            .map(|t| ThreadFrame {
                tid: 10_000 + r * 100 + t,
                comm: Text::new(if t == 0 { "python3" } else { "pt_autograd_0" }),
                run_delay_ms_per_s: 0.1 * x(20 + t as u64),
                cpu_pct: 20.0 + x(30 + t as u64) * 10.0,
            })
            .collect();
        f.ranks.push(rf);
    }
    if i.is_multiple_of(600) {
        f.events.push(Event::new(
            f.wall_ns,
            EventKind::RankAppeared,
            "rank 0 appeared (pid 10000, python3)",
        ));
    }
    f
}
