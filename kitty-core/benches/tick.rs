//! One sampler tick for 8 watched processes with 64 TCP sockets each
//! (procfs + sock_diag + cgroup + host), against the real kernel.

use criterion::{criterion_group, criterion_main, Criterion};
use kitty_core::sampler::{Sampler, SamplerConfig};
use kitty_core::sources::discovery::WatchRule;
use std::net::{TcpListener, TcpStream};

fn bench(c: &mut Criterion) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let mut children = Vec::new();
    let mut keep = Vec::new();
    for _ in 0..8 {
        // 64 connected sockets, inherited by a child that just waits.
        let socks: Vec<TcpStream> = (0..64).map(|_| TcpStream::connect(addr).unwrap()).collect();
        for _ in 0..64 {
            keep.push(listener.accept().unwrap().0);
        }
        // SAFETY: the child only calls async-signal-safe functions (pause, _exit).
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            use std::os::fd::AsRawFd;
            // SAFETY: in the forked child: closing inherited fds and
            // pausing are async-signal-safe.
            unsafe {
                // Keep only this child's 64 client sockets.
                for k in &keep {
                    libc::close(k.as_raw_fd());
                }
                libc::close(listener.as_raw_fd());
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                loop {
                    libc::pause();
                }
            }
        }
        drop(socks);
        children.push(pid as u32);
    }
    let cfg = SamplerConfig {
        rule: WatchRule {
            key: "KITTY_BENCH_NEVER_SET".into(),
            value: "1".into(),
            pids: children.clone(),
        },
        ..SamplerConfig::default()
    };
    let mut s = Sampler::new(cfg);
    let f = s.tick();
    assert_eq!(f.ranks.len(), 8);
    assert!(
        f.ranks
            .iter()
            .all(|r| r.signal(kitty_core::model::Sig::TcpSockets) == Some(64.0)),
        "each child holds 64 sockets"
    );
    c.bench_function("tick 8 processes x 64 sockets", |b| b.iter(|| s.tick()));
    let mut no_diag = Sampler::new(SamplerConfig {
        sock_diag: false,
        ..s.config().clone()
    });
    no_diag.tick();
    c.bench_function("tick 8 processes x 64 sockets, /proc/net/tcp only", |b| {
        b.iter(|| no_diag.tick())
    });
    for pid in children {
        // SAFETY: killing our own children.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
