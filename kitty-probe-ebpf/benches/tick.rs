//! One sampler tick for 8 watched processes with 64 TCP sockets and 16
//! threads each, per-thread counters from the BPF task iterator against
//! the same from procfs (task/*/schedstat every tick, task/*/sched every
//! 2 s). Needs root (loading BPF).

use criterion::{criterion_group, criterion_main, Criterion};
use kitty_core::model::{Source, Status};
use kitty_core::sampler::{Sampler, SamplerConfig};
use kitty_core::sources::tasks::TaskSource;

#[path = "../../kitty-core/benches/support/children.rs"]
mod children;

fn bench(c: &mut Criterion) {
    let (children, _keep) = children::spawn(8, 64, 16);
    let cfg = children::watching(&children);
    let mut via_iter = Sampler::new(SamplerConfig {
        tasks: TaskSource::Iterator(kitty_probe_ebpf::tasks::TaskIter::open),
        ..cfg.clone()
    });
    let mut via_procfs = Sampler::new(SamplerConfig {
        tasks: TaskSource::Procfs(Some("bench".into())),
        ..cfg
    });
    for s in [&mut via_iter, &mut via_procfs] {
        s.tick();
        let f = s.tick();
        assert_eq!(f.ranks.len(), 8);
        assert!(f
            .ranks
            .iter()
            .all(|r| r.signal(kitty_core::model::Sig::Threads) == Some(16.0)));
    }
    let st = via_iter.tick().sources.get(Source::EbpfTasks).cloned();
    assert_eq!(
        st.as_ref().map(|s| s.status),
        Some(Status::Ok),
        "the iterator loads (root?): {st:?}"
    );
    c.bench_function("tick 8 x 64 sockets x 16 threads, iter/task", |b| {
        b.iter(|| via_iter.tick())
    });
    c.bench_function("tick 8 x 64 sockets x 16 threads, procfs", |b| {
        b.iter(|| via_procfs.tick())
    });
    children::kill(&children);
}

criterion_group!(benches, bench);
criterion_main!(benches);
