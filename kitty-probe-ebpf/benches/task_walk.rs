//! One read of the task iterator for 8 watched processes (one thread
//! each), among 0 and 4,000 other idle threads: the walk of each watched
//! process (Linux 6.1+) against the walk of every task of the node (older
//! kernels). One read of a watched process of 1,200 threads (a GPU node's
//! ranks have ~150 each): the per-thread cost, rows made included (warm
//! here: a tick every 500 ms finds each `task_struct` cold, ~1 us a
//! thread). And one process's fd inventory (its open files' count,
//! sockets and verbs devices) with 16, 256 and 1,024 fds open: the walk of
//! its files (`iter/task_file`) against /proc/<pid>/fd and a readlink per
//! fd (what the sampler reads when a rank's fd count changed). Needs root
//! (loading BPF).

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
    let mut others = Parked::new();
    let mut g = c.benchmark_group("task iterator, 8 watched processes");
    for extra in [0usize, 4000] {
        others.grow_to(extra);
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
    drop(others);
    for mut k in kids.drain(..) {
        let _ = k.kill();
        let _ = k.wait();
    }
    many_threads(c);
}

/// This process, watched, with 1,200 parked threads.
fn many_threads(c: &mut Criterion) {
    const THREADS: usize = 1200;
    let mut threads = Parked::new();
    threads.grow_to(THREADS);
    let own: BTreeSet<u32> = [std::process::id()].into_iter().collect();
    let mut it = TaskIter::start().expect("the task iterator loads (root?)");
    assert!(it.read(&own).expect("a walk").len() > THREADS);
    c.bench_function("task iterator, one process of 1,200 threads", |b| {
        b.iter(|| it.read(&own).expect("a walk"))
    });
    drop(threads);
}

/// Idle threads of this process, parked until it is dropped (then joined,
/// so the next bench does not walk them).
struct Parked {
    stop: Option<std::sync::mpsc::Sender<()>>,
    until: std::sync::Arc<std::sync::Mutex<std::sync::mpsc::Receiver<()>>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Parked {
    fn new() -> Self {
        let (stop, until) = std::sync::mpsc::channel();
        Parked {
            stop: Some(stop),
            until: std::sync::Arc::new(std::sync::Mutex::new(until)),
            threads: Vec::new(),
        }
    }

    /// Parks more threads until there are `n`.
    fn grow_to(&mut self, n: usize) {
        while self.threads.len() < n {
            let until = self.until.clone();
            self.threads.push(std::thread::spawn(move || {
                let _ = until
                    .lock()
                    .map(|rx| rx.recv_timeout(Duration::from_secs(600)));
            }));
        }
    }
}

impl Drop for Parked {
    fn drop(&mut self) {
        self.stop.take();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// A process with `n` fds open, about a tenth of them sockets, until its
/// stdin closes.
fn holder(n: usize) -> std::process::Child {
    use std::io::BufRead;
    let script = format!(
        "import os, socket, sys\n\
         keep = [socket.socketpair() for _ in range({n} // 20)]\n\
         keep += [open('/dev/null') for _ in range({n} - 3 - 2 * len(keep))]\n\
         print('ready', flush=True)\n\
         sys.stdin.read()\n"
    );
    let mut kid = std::process::Command::new("python3")
        .args(["-c", &script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3");
    let mut line = String::new();
    std::io::BufReader::new(kid.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "ready");
    kid
}

fn fd_inventory(c: &mut Criterion) {
    use kitty_core::sources::process::scan_fds;
    let mut it = TaskIter::start().expect("the task iterator loads (root?)");
    let mut g = c.benchmark_group("fd inventory of one process");
    for n in [16usize, 256, 1024] {
        let mut kid = holder(n);
        let (pid, dir) = (
            kid.id(),
            std::path::PathBuf::from(format!("/proc/{}", kid.id())),
        );
        let walked = it.open_files(pid).expect("a file walk").unwrap();
        // Only the walk tells a socket's kind (these are Unix socket
        // pairs: no TCP socket to ask sock_diag for).
        assert_eq!(walked.tcp_inodes.as_deref(), Some(&[][..]));
        let walked = kitty_core::sources::tasks::FdInventory {
            tcp_inodes: None,
            ..walked
        };
        assert_eq!(Some(walked), scan_fds(&dir));
        g.bench_with_input(BenchmarkId::new("iter/task_file", n), &n, |b, _| {
            b.iter(|| it.open_files(pid).unwrap().unwrap())
        });
        g.bench_with_input(BenchmarkId::new("/proc/<pid>/fd", n), &n, |b, _| {
            b.iter(|| scan_fds(&dir).unwrap())
        });
        drop(kid.stdin.take());
        let _ = kid.wait();
    }
    g.finish();
}

criterion_group!(benches, bench, fd_inventory);
criterion_main!(benches);
