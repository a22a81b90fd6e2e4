//! Draw time of the main view for 64 ranks x 8 GPUs at 160x45 (target: under 2 ms).

use criterion::{criterion_group, criterion_main, Criterion};
use kitty_core::frame::*;
use kitty_tui::tui::{app::App, draw::draw, keymap::KeyMap};
use ratatui::{backend::TestBackend, Terminal};
use std::time::Duration;

fn frame(t: u64) -> Frame {
    let mut f = Frame {
        mono_ns: t * 500_000_000,
        wall_ns: t * 500_000_000,
        interval_ms: 500,
        node: "n".into(),
        ..Default::default()
    };
    for i in 0..64u32 {
        let mut s = Signals::new();
        for (k, v) in [
            ("cpu_pct", 50.0 + i as f64),
            (
                "run_delay_ms_per_s",
                if i == 7 { 300.0 } else { 1.0 + (t % 5) as f64 },
            ),
            ("migrations_per_s", 3.0),
            ("affinity_cpus", 8.0),
            ("retrans_per_s", 0.0),
            ("out_segs_per_s", 4000.0),
            ("tx_queue_bytes", 1000.0),
            ("bytes_sent_per_s", 1e9),
            ("srtt_max_us", 50.0),
        ] {
            s.insert(k.into(), v);
        }
        f.ranks.push(RankFrame {
            key: ProcKey {
                pid: 1000 + i,
                start_time: 1,
            },
            comm: "python".into(),
            labels: Labels {
                rank: Some(i),
                job: Some("j".into()),
                ..Default::default()
            },
            state: "R".into(),
            netns: None,
            gpu: Some(i / 8),
            counters: Default::default(),
            signals: s,
            sockets: vec![],
            threads: vec![],
            histograms: Default::default(),
        });
    }
    for g in 0..8 {
        f.gpus.push(GpuFrame {
            index: g,
            name: "H200".into(),
            signals: [
                ("util_pct".to_string(), 97.0),
                ("sm_clock_mhz".to_string(), 1980.0),
            ]
            .into(),
            status: "ok".into(),
            throttle: if g == 3 {
                vec!["hw_slowdown".into()]
            } else {
                vec![]
            },
            ..Default::default()
        });
    }
    f
}

fn bench(c: &mut Criterion) {
    let mut app = App::new(KeyMap::default(), Duration::from_millis(500));
    let mut analysis = kitty_core::analysis::Analysis::default();
    for t in 0..60 {
        let mut f = frame(t);
        analysis.apply(&mut f);
        app.on_frame(f);
    }
    let mut term = Terminal::new(TestBackend::new(160, 45)).unwrap();
    c.bench_function("draw main view 64 ranks x 8 gpus 160x45", |b| {
        b.iter(|| {
            term.draw(|f| draw(f, &app)).unwrap();
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
