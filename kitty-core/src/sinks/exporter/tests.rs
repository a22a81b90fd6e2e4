use super::*;
use crate::model::*;

fn frame(t: u64, with_rank: bool) -> Frame {
    let mut f = Frame {
        mono_ns: t * 1_000_000_000,
        wall_ns: 1_700_000_000_000_000_000 + t * 1_000_000_000,
        node: "n1".into(),
        ..Default::default()
    };
    if with_rank {
        let mut signals = Signals::new();
        signals.set(Sig::RunDelayMsPerS, 250.0);
        signals.set(Sig::RetransPerS, 4.0);
        signals.set(Sig::TxQueueBytes, 1000.0);
        signals.set(Sig::SrttMaxUs, 2000.0);
        signals.set(Sig::GpuUtilPct, 50.0);
        let mut histograms = Histograms::default();
        histograms.insert(HistKind::RttUs, vec![(30.0, 3), (3000.0, 1)]);
        f.ranks.push(RankFrame {
            key: ProcKey {
                pid: 7,
                start_time: 1,
            },
            comm: "x".into(),
            labels: Labels {
                rank: Some(3),
                job: Some("j".into()),
                job_id: Some("master:10.0.0.1:29500".into()),
                slurm_job_id: Some("4242".into()),
                ..Default::default()
            },
            gpu: Some(0),
            signals,
            histograms,
            sockets: vec![SocketFrame {
                state: "ESTABLISHED".into(),
                info: Some(TcpInfo {
                    rtt_us: 2000,
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        });
        f.gpus.push(GpuFrame {
            index: 0,
            name: "H200".into(),
            uuid: Some("GPU-1234".into()),
            ..Default::default()
        });
    }
    f.sources.insert(Source::Procfs, SourceStatus::ok());
    f
}

#[test]
fn counters_accumulate_rates_in_base_units_and_labels_join() {
    let mut e = Exporter::new(ExporterConfig::default());
    e.update(&frame(0, true));
    let om = e.update(&frame(2, true));
    let rank = r#"node="n1",training_job="j",training_job_id="master:10.0.0.1:29500",slurm_job_id="4242",hpc_job="4242",rank="3",gpu="0",UUID="GPU-1234""#;
    // 250 ms/s over 2 s: 0.5 s of run delay.
    assert!(
        om.contains(&format!("kitty_rank_run_delay_seconds_total{{{rank}}} 0.5")),
        "{om}"
    );
    assert!(
        om.contains(&format!("kitty_rank_tcp_retransmits_total{{{rank}}} 8.0")),
        "{om}"
    );
    assert!(
        om.contains("# TYPE kitty_rank_tcp_retransmits counter"),
        "{om}"
    );
    assert!(
        om.contains(&format!("kitty_rank_tcp_tx_queue_bytes{{{rank}}} 1000.0")),
        "{om}"
    );
    assert!(
        om.contains(&format!("kitty_rank_tcp_srtt_max_seconds{{{rank}}} 0.002")),
        "{om}"
    );
    // No pid by default, no `job` label, no per-tick percentile gauges.
    assert!(!om.contains("pid=\""), "{om}");
    assert!(!om.contains(" job=\"") && !om.contains("{job=\""), "{om}");
    assert!(!om.contains("rtt_p50"), "{om}");
    // The GPU copy on the rank is on the GPU's series instead.
    assert!(!om.contains("kitty_rank_gpu_util"), "{om}");
    // The probes' buckets: two ticks of 3 samples <= 50 us and 1 <= 5 ms.
    assert!(
        om.contains(&format!(
            "kitty_rank_tcp_rtt_seconds_bucket{{le=\"0.00005\",{rank}}} 6"
        )),
        "{om}"
    );
    assert!(
        om.contains(&format!("kitty_rank_tcp_rtt_seconds_count{{{rank}}} 8")),
        "{om}"
    );
    assert!(
        om.contains(r#"kitty_gpu_up{node="n1",gpu="0",UUID="GPU-1234",model="H200"} 1.0"#),
        "{om}"
    );
    assert!(
        om.contains("kitty_last_frame_timestamp_seconds{node=\"n1\"} 1700000002"),
        "{om}"
    );
    assert!(om.trim_end().ends_with("# EOF"));
    let text = to_prometheus_text(&om);
    assert!(text.contains("# TYPE kitty_rank_run_delay_seconds_total counter"));
    assert!(!text.contains("# EOF"));
}

#[test]
fn exited_ranks_stay_for_the_grace_period() {
    let mut e = Exporter::new(ExporterConfig::default());
    e.update(&frame(0, true));
    assert!(e.update(&frame(30, false)).contains("rank=\"3\""));
    let later = e.update(&frame(120, false));
    assert!(!later.contains("rank=\"3\""), "{later}");
}

#[test]
fn pids_are_labels_only_when_asked() {
    let mut e = Exporter::new(ExporterConfig {
        pid_label: true,
        ..Default::default()
    });
    let om = e.update(&frame(0, true));
    assert!(om.contains(r#"rank="3",pid="7""#), "{om}");
}

#[test]
fn rdma_ports_are_exported_with_device_and_port_labels() {
    let mut e = Exporter::new(ExporterConfig::default());
    let nic = |t: u64| {
        let mut f = frame(t, true);
        let mut s = Signals::new();
        s.set(Sig::RdmaXmitWaitPerS, 1000.0);
        s.set(Sig::RdmaRateGbps, 400.0);
        s.set(Sig::RdmaPortDegraded, 0.0);
        f.nics.push(NicFrame {
            device: "mlx5_0".into(),
            port: 1,
            counters: [("port_xmit_wait".into(), 5000 + t)].into_iter().collect(),
            signals: s,
            ..Default::default()
        });
        f.ranks[0].signals.set(Sig::RdmaXmitWaitPerS, 1000.0);
        f
    };
    e.update(&nic(0));
    let text = e.update(&nic(2));
    let has = |l: &str| text.lines().any(|x| x.starts_with(l));
    assert!(
        has(r#"kitty_rdma_port_xmit_wait_total{node="n1",device="mlx5_0",port="1"} 2000"#),
        "{text}"
    );
    assert!(
        has(
            r#"kitty_rdma_port_rate_bits_per_second{node="n1",device="mlx5_0",port="1"} 400000000000"#
        ),
        "{text}"
    );
    assert!(
        has(
            r#"kitty_rdma_port_hw_counter_total{node="n1",device="mlx5_0",port="1",counter="port_xmit_wait"} 5002"#
        ),
        "{text}"
    );
    assert!(text.contains("kitty_rank_rdma_xmit_wait_total{"), "{text}");
}

/// Frames no scrape asked for still count: rendering only the last of
/// them gives what rendering every one would have.
#[test]
fn frames_observed_without_a_render_lose_nothing() {
    let frames: Vec<Frame> = (0..4).map(|t| frame(t * 2, true)).collect();
    let mut every = Exporter::new(ExporterConfig::default());
    let mut last = String::new();
    for f in &frames {
        last = every.update(f);
    }
    let mut lazy = Exporter::new(ExporterConfig::default());
    for f in &frames {
        lazy.observe(f);
    }
    let rendered = lazy.render(frames.last().unwrap());
    // The same lines (a family's series come in no set order).
    let sorted = |t: &str| {
        let mut l: Vec<&str> = t.lines().collect();
        l.sort_unstable();
        l.join("\n")
    };
    assert_eq!(sorted(&rendered), sorted(&last));
    // Each frame brings four RTT samples, and none is lost.
    let count = rendered
        .lines()
        .find(|l| l.starts_with("kitty_rank_tcp_rtt_seconds_count{"))
        .and_then(|l| l.rsplit(' ').next())
        .unwrap();
    assert_eq!(count, "16", "4 frames x 4 samples");
}

/// Per-socket series only when asked, at most N a rank, from the rank's
/// last frame.
#[test]
fn socket_series_are_opt_in_and_capped_per_rank() {
    let with_sockets = |t| {
        let mut f = frame(t, true);
        let r = &mut f.ranks[0];
        r.sockets = (0..3)
            .map(|i| SocketFrame {
                state: "ESTABLISHED".into(),
                local: "10.0.0.1:5000".into(),
                remote: format!("10.0.0.{}:6000", i + 2).into(),
                info: Some(TcpInfo {
                    rtt_us: 1000 * (t as u32 + 1),
                    ..Default::default()
                }),
                ..Default::default()
            })
            .collect();
        f
    };
    let series = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| l.starts_with("kitty_socket_srtt_seconds{"))
            .map(str::to_owned)
            .collect()
    };
    let mut none = Exporter::new(ExporterConfig::default());
    assert!(series(&none.update(&with_sockets(0))).is_empty());
    let mut two = Exporter::new(ExporterConfig {
        socket_series: 2,
        ..Default::default()
    });
    two.observe(&with_sockets(0));
    let text = two.update(&with_sockets(4));
    // A family's series come in no set order.
    let mut got = series(&text);
    got.sort();
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(got[0].contains("remote=\"10.0.0.2:6000\"") && got[0].ends_with(" 0.005"));
    assert!(got[1].contains("remote=\"10.0.0.3:6000\""), "{got:?}");
}
