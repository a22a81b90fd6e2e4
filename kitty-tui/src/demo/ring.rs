//! One rank of the demo job: a compute phase (fixed CPU work), a "GPU" wait,
//! then a ring all-reduce over loopback TCP. A rank that loses CPU time takes
//! longer for the same work, and the ring makes every rank wait for it, as
//! in a real data-parallel job. With NCCL Inspector enabled in its
//! environment, each all-reduce is also written as Inspector writes one.

use clap::Args;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// Why a rank could not run.
#[derive(Debug, thiserror::Error)]
pub enum RingError {
    #[error("demo-rank: {0}")]
    Args(&'static str),
    #[error("demo-rank: {0}: {1}")]
    Io(&'static str, std::io::Error),
}

/// The command of one demo rank of `ports.len()` (the demo and the tests
/// start ranks with it), labelled as a rank of `job` by its environment.
pub fn rank_command(exe: &Path, rank: usize, ports: &[u16], job: &str) -> Command {
    let world = ports.len();
    let ports_arg = ports
        .iter()
        .map(|p| p.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let mut cmd = Command::new(exe);
    cmd.args([
        "demo-rank",
        "--rank",
        &rank.to_string(),
        "--world",
        &world.to_string(),
        "--ports",
        &ports_arg,
    ])
    .env("KITTY_WATCH", "1")
    .env("RANK", rank.to_string())
    .env("LOCAL_RANK", rank.to_string())
    .env("WORLD_SIZE", world.to_string())
    .env("JOB_NAME", job)
    // What torchrun sets: the rendezvous address tells launches apart.
    .env("MASTER_ADDR", "127.0.0.1")
    .env(
        "MASTER_PORT",
        ports.first().copied().unwrap_or(0).to_string(),
    );
    cmd
}

#[derive(Args, Debug, Clone)]
pub struct RankArgs {
    #[arg(long)]
    pub rank: usize,
    #[arg(long)]
    pub world: usize,
    /// Listening port of every rank, comma-separated, in rank order.
    #[arg(long, value_delimiter = ',')]
    pub ports: Vec<u16>,
    /// Address of every rank, in rank order (default: all on 127.0.0.1).
    #[arg(long, value_delimiter = ',')]
    pub hosts: Vec<std::net::Ipv4Addr>,
    /// Units of CPU work per step (see `work_units_per_ms`).
    #[arg(long, default_value_t = 4_000)]
    pub work: u64,
    /// Simulated GPU time per step, in ms.
    #[arg(long, default_value_t = 15)]
    pub gpu_ms: u64,
    /// All-reduce chunk size in KiB.
    #[arg(long, default_value_t = 64)]
    pub chunk_kb: usize,
    /// Pin this rank to these CPUs (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub cpus: Vec<usize>,
    /// Print "step <ms>" after each step.
    #[arg(long)]
    pub report: bool,
    /// Run the compute phase in a worker thread while the main thread sleeps.
    #[arg(long)]
    pub worker_thread: bool,
    /// Stop after this many steps (default: run until killed).
    #[arg(long)]
    pub steps: Option<u64>,
}

/// One unit of CPU work; the demo calibrates how many take a millisecond.
#[inline(never)]
pub fn compute_phase(units: u64) -> u64 {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for i in 0..units * 256 {
        x = x.rotate_left(7) ^ i.wrapping_mul(0x2545_F491_4F6C_DD1D);
    }
    std::hint::black_box(x)
}

/// Units of work per millisecond on this machine (measured, idle CPU).
pub fn work_units_per_ms() -> u64 {
    let t = Instant::now();
    let mut units = 0;
    while t.elapsed() < Duration::from_millis(30) {
        compute_phase(100);
        units += 100;
    }
    (units as f64 / t.elapsed().as_secs_f64() / 1000.0).max(1.0) as u64
}

/// The "all-reduce" arithmetic: a sum over 8-byte words.
fn reduce(acc: &mut [u8], inbuf: &[u8]) {
    for (x, y) in acc.chunks_exact_mut(8).zip(inbuf.chunks_exact(8)) {
        let v = u64::from_ne_bytes(x.try_into().unwrap())
            .wrapping_add(u64::from_ne_bytes(y.try_into().unwrap()));
        x.copy_from_slice(&v.to_ne_bytes());
    }
}

pub fn pin_to_cpus(cpus: &[usize]) -> std::io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET writes inside it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for cpu in cpus {
            libc::CPU_SET(*cpu, &mut set);
        }
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

fn connect_retry(host: std::net::Ipv4Addr, port: u16) -> std::io::Result<TcpStream> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match TcpStream::connect((host, port)) {
            Ok(s) => return Ok(s),
            Err(e) if Instant::now() > deadline => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

pub fn run(a: RankArgs) -> Result<i32, RingError> {
    if a.ports.len() != a.world || a.rank >= a.world || a.world < 2 {
        return Err(RingError::Args(
            "--ports must list one port per rank, and --rank < --world",
        ));
    }
    if !a.cpus.is_empty() {
        pin_to_cpus(&a.cpus).map_err(|e| RingError::Io("pin to cpus", e))?;
    }
    if !a.hosts.is_empty() && a.hosts.len() != a.world {
        return Err(RingError::Args("--hosts must list one address per rank"));
    }
    let host = |r: usize| {
        a.hosts
            .get(r)
            .copied()
            .unwrap_or(std::net::Ipv4Addr::LOCALHOST)
    };
    let listener =
        TcpListener::bind((host(a.rank), a.ports[a.rank])).map_err(|e| RingError::Io("bind", e))?;
    let next_rank = (a.rank + 1) % a.world;
    let next = connect_retry(host(next_rank), a.ports[next_rank])
        .map_err(|e| RingError::Io("connect", e))?;
    let (mut prev, _) = listener.accept().map_err(|e| RingError::Io("accept", e))?;
    let _ = next.set_nodelay(true);
    // A writer thread so that sends never deadlock against receives.
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(4);
    let mut writer = next.try_clone().map_err(|e| RingError::Io("socket", e))?;
    std::thread::spawn(move || {
        for buf in rx {
            if writer.write_all(&buf).is_err() {
                std::process::exit(0);
            }
        }
    });
    let worker = a.worker_thread.then(|| {
        let (go_tx, go_rx) = std::sync::mpsc::channel::<u64>();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        std::thread::Builder::new()
            .name("compute".into())
            .spawn(move || {
                for units in go_rx {
                    compute_phase(units);
                    let _ = done_tx.send(());
                }
            })
            .expect("spawn worker");
        (go_tx, done_rx)
    });
    let job = std::env::var("JOB_NAME").unwrap_or_default();
    let mut inspector = super::inspector::InspectorOut::from_env(a.rank, a.world, &job);
    let chunk = a.chunk_kb * 1024;
    let mut acc = vec![0u8; chunk];
    let mut inbuf = vec![0u8; chunk];
    let mut step = 0u64;
    let out = std::io::stdout();
    loop {
        let t = Instant::now();
        match &worker {
            Some((go, done)) => {
                let _ = go.send(a.work);
                let _ = done.recv();
            }
            None => {
                compute_phase(a.work);
            }
        }
        std::thread::sleep(Duration::from_millis(a.gpu_ms));
        let coll = Instant::now();
        for _ in 0..a.world - 1 {
            if tx.send(acc.clone()).is_err() {
                return Ok(0);
            }
            if prev.read_exact(&mut inbuf).is_err() {
                // A peer went away: the job is over.
                return Ok(0);
            }
            reduce(&mut acc, &inbuf);
        }
        step += 1;
        if let Some(i) = &mut inspector {
            i.collective(step, chunk, coll.elapsed());
        }
        if a.report {
            let mut o = out.lock();
            let _ = writeln!(o, "step {:.3}", t.elapsed().as_secs_f64() * 1000.0);
            let _ = o.flush();
        }
        if a.steps.is_some_and(|n| step >= n) {
            return Ok(0);
        }
    }
}
