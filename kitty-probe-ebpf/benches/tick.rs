//! One sampler tick for 8 watched processes with 64 TCP sockets and 16
//! threads each, per-thread counters from the BPF task iterator against
//! the same from procfs (task/*/schedstat every tick, task/*/sched every
//! 2 s); one for 8 processes of 150 threads each (a GPU node's ranks), from
//! the iterator (warm here: a tick every 500 ms finds each thread cold);
//! and what the eBPF probes add to a tick of 8 processes whose 64
//! sockets each send a byte every 100 ms (each ACK an RTT sample): their
//! maps read and the frame enriched. Needs root (loading BPF).

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use kitty_core::model::{Sig, Source, Status};
use kitty_core::sampler::{Sampler, SamplerConfig, WatchHints};
use kitty_core::sources::tasks::TaskSource;
use kitty_core::sources::Enricher;
use std::time::Duration;

#[path = "../../kitty-core/benches/support/children.rs"]
mod children;

fn bench(c: &mut Criterion) {
    // First: forked while this process has one thread (as the children
    // need) and no sockets for them to inherit.
    let (threaded, _none) = children::spawn(8, 0, 150);
    let (children, _keep) = children::spawn(8, 64, 16);
    let (talkers, _keep_talking) =
        children::spawn_talking(8, 64, 1, Some(Duration::from_millis(100)));
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

    let mut many = Sampler::new(SamplerConfig {
        tasks: TaskSource::Iterator(kitty_probe_ebpf::tasks::TaskIter::open),
        ..children::watching(&threaded)
    });
    many.tick();
    let f = many.tick();
    assert!(f
        .ranks
        .iter()
        .all(|r| r.signal(Sig::Threads) == Some(150.0)));
    c.bench_function("tick 8 x 150 threads, iter/task", |b| {
        b.iter(|| many.tick())
    });
    children::kill(&threaded);

    let mut sampler = Sampler::new(children::watching(&talkers));
    let mut probes = kitty_probe_ebpf::Probes::start(WatchHints::default());
    for _ in 0..3 {
        let mut f = sampler.tick();
        probes.enrich(&mut f);
        std::thread::sleep(Duration::from_millis(300));
    }
    let mut frame = sampler.tick();
    probes.enrich(&mut frame);
    let with_rtt = frame
        .ranks
        .iter()
        .flat_map(|r| &r.sockets)
        .filter(|s| s.signals.get(Sig::RttP50Us).is_some())
        .count();
    assert!(with_rtt > 400, "{with_rtt} of 512 sockets have an RTT");
    c.bench_function("probes' enrich, 8 x 64 talking sockets", |b| {
        b.iter_batched_ref(
            || frame.clone(),
            |f| probes.enrich(f),
            BatchSize::SmallInput,
        )
    });
    children::kill(&talkers);
}

criterion_group!(benches, bench);
criterion_main!(benches);
