//! Draw time of the main view for 64 ranks x 8 GPUs at 160x45 (target: under 2 ms).

use criterion::{criterion_group, criterion_main, Criterion};
use kitty_core::model::*;
use kitty_tui::tui::{app::App, keymap::KeyMap, views::draw};
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
            (Sig::CpuPct, 50.0 + i as f64),
            (
                Sig::RunDelayMsPerS,
                if i == 7 { 300.0 } else { 1.0 + (t % 5) as f64 },
            ),
            (Sig::MigrationsPerS, 3.0),
            (Sig::AffinityCpus, 8.0),
            (Sig::RetransPerS, 0.0),
            (Sig::OutSegsPerS, 4000.0),
            (Sig::TxQueueBytes, 1000.0),
            (Sig::BytesSentPerS, 1e9),
            (Sig::SrttMaxUs, 50.0),
        ] {
            s.set(k, v);
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
            ..Default::default()
        });
    }
    for g in 0..8 {
        f.gpus.push(GpuFrame {
            index: g,
            name: "H200".into(),
            signals: [(Sig::UtilPct, 97.0), (Sig::SmClockMhz, 1980.0)]
                .into_iter()
                .collect(),
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
