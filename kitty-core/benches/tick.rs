//! One sampler tick for 8 watched processes with 64 TCP sockets and 16
//! threads each (procfs + sock_diag + cgroup + host), against the real
//! kernel, per-thread counters from procfs (the task iterator's variant is
//! `cargo bench -p kitty-probe-ebpf --bench tick`).

use criterion::{criterion_group, criterion_main, Criterion};
use kitty_core::sampler::{Sampler, SamplerConfig};

#[path = "support/children.rs"]
mod children;

/// Threads per watched process (a training rank has dozens).
pub const THREADS: usize = 16;

fn bench(c: &mut Criterion) {
    let (children, _keep) = children::spawn(8, 64, THREADS);
    let cfg = children::watching(&children);
    let mut s = Sampler::new(cfg);
    let f = s.tick();
    assert_eq!(f.ranks.len(), 8);
    assert!(
        f.ranks
            .iter()
            .all(|r| r.signal(kitty_core::model::Sig::TcpSockets) == Some(64.0)),
        "each child holds 64 sockets"
    );
    c.bench_function("tick 8 processes x 64 sockets, threads from procfs", |b| {
        b.iter(|| s.tick())
    });
    let mut no_diag = Sampler::new(SamplerConfig {
        sock_diag: false,
        ..s.config().clone()
    });
    no_diag.tick();
    c.bench_function("tick 8 processes x 64 sockets, /proc/net/tcp only", |b| {
        b.iter(|| no_diag.tick())
    });
    children::kill(&children);
}

criterion_group!(benches, bench);
criterion_main!(benches);
