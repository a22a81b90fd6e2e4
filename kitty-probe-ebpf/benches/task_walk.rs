//! One read of the task iterator for 8 watched processes (one thread
//! each), among 0 and 4,000 other idle threads: the walk of each watched
//! process (Linux 6.1+) against the walk of every task of the node (older
//! kernels). Needs root (loading BPF).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use kitty_core::sources::tasks::TaskCounters;
use kitty_probe_ebpf::tasks::TaskIter;
use std::collections::BTreeSet;
use std::time::Duration;

fn bench(c: &mut Criterion) {
    let mut kids: Vec<_> = (0..8)
        .map(|_| {
            std::process::Command::new("sleep")
                .arg("600")
                .spawn()
                .expect("sleep")
        })
        .collect();
    let watched: BTreeSet<u32> = kids.iter().map(|k| k.id()).collect();
    let mut per_process = TaskIter::start().expect("the task iterator loads (root?)");
    let mut node_wide = TaskIter::start_node_wide().expect("the task iterator loads (root?)");
    let (stop, parked) = std::sync::mpsc::channel::<()>();
    let parked = std::sync::Arc::new(std::sync::Mutex::new(parked));
    let mut others = Vec::new();
    let mut g = c.benchmark_group("task iterator, 8 watched processes");
    for extra in [0usize, 4000] {
        while others.len() < extra {
            let p = parked.clone();
            others.push(std::thread::spawn(move || {
                let _ = p.lock().map(|rx| rx.recv_timeout(Duration::from_secs(600)));
            }));
        }
        for (name, it) in [
            ("per process", &mut per_process),
            ("every task", &mut node_wide),
        ] {
            assert_eq!(it.read(&watched).expect("a walk").len(), 8);
            g.bench_with_input(BenchmarkId::new(name, extra), &extra, |b, _| {
                b.iter(|| it.read(&watched).expect("a walk"))
            });
        }
    }
    g.finish();
    drop(stop);
    for mut k in kids.drain(..) {
        let _ = k.kill();
        let _ = k.wait();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
