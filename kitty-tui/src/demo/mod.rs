//! `kitty-tui demo`: a small local multi-rank job with an injected straggler,
//! watched by the live TUI. Its processes die with it (parent-death signal).

pub mod flow;
pub mod ring;

use crate::cli::{DemoArgs, Straggler};
use kitty_core::engine::Enricher;
use kitty_core::frame::Frame;
use kitty_core::sampler::SamplerConfig;
use std::io::BufRead;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

pub const JOB_NAME: &str = "kitty-demo";

/// The processes of a running demo; killed when dropped (then the network
/// lab, if any, is taken down).
pub struct DemoJob {
    children: Vec<Child>,
    pub step_ms: Arc<Mutex<Option<f64>>>,
    pub lab: Option<Arc<Mutex<kitty_faultlab::Lab>>>,
}

impl Drop for DemoJob {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
        }
        for c in &mut self.children {
            let _ = c.wait();
        }
    }
}

fn die_with_parent(cmd: &mut Command) {
    // SAFETY: prctl is async-signal-safe; it runs in the child before exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
}

fn free_ports(n: usize) -> std::io::Result<Vec<u16>> {
    let listeners: Vec<_> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0"))
        .collect::<std::io::Result<_>>()?;
    listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect()
}

pub fn ncpus() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// Starts the ranks (and the straggler's hog) and returns at once.
pub fn start(args: &DemoArgs) -> crate::cmd::Result<DemoJob> {
    if args.ranks < 3 || args.ranks > 64 {
        return Err("--ranks must be between 3 and 64 (peers need a majority)".into());
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot find own binary: {e}"))?;
    let n = args.ranks as usize;
    let ports = free_ports(n).map_err(|e| format!("no free loopback ports: {e}"))?;
    let ports_arg = ports
        .iter()
        .map(|p| p.to_string())
        .collect::<Vec<_>>()
        .join(",");
    // Little CPU per step (a rank mostly waits on its GPU): peers sharing a
    // small machine then do not contend with each other, only the straggler
    // with its hog.
    let work = (ring::work_units_per_ms() / 4).max(1);
    let straggler = (args.straggler == Straggler::Cpu).then_some(n / 2);
    let hog_cpu = ncpus() - 1;
    let net = matches!(
        args.straggler,
        Straggler::NetDelay | Straggler::NetLoss | Straggler::NetThrottle
    );
    let lab = if net {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err("--straggler net-* needs root (it creates network namespaces)".into());
        }
        Some(kitty_faultlab::Lab::new(n).map_err(|e| format!("network lab: {e}"))?)
    } else {
        None
    };
    let hosts = (0..n)
        .map(|i| kitty_faultlab::addr(i).to_string())
        .collect::<Vec<_>>()
        .join(",");
    let mut job = DemoJob {
        children: Vec::new(),
        step_ms: Arc::new(Mutex::new(None)),
        lab: None,
    };
    for rank in 0..n {
        let mut cmd = Command::new(&exe);
        cmd.args([
            "demo-rank",
            "--rank",
            &rank.to_string(),
            "--world",
            &n.to_string(),
            "--ports",
            &ports_arg,
        ])
        .args(["--work", &work.to_string()])
        .env("KITTY_WATCH", "1")
        .env("RANK", rank.to_string())
        .env("LOCAL_RANK", rank.to_string())
        .env("WORLD_SIZE", n.to_string())
        .env("JOB_NAME", JOB_NAME)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .stdout(if rank == 0 {
            Stdio::piped()
        } else {
            Stdio::null()
        });
        if rank == 0 {
            cmd.arg("--report");
        }
        if let Some(lab) = &lab {
            // Bigger chunks: a throttled link then shows its queue.
            cmd.args(["--hosts", &hosts, "--chunk-kb", "512"]);
            lab.enter(rank, &mut cmd)
                .map_err(|e| format!("rank {rank} namespace: {e}"))?;
        }
        // The straggler shares the hog's CPU; its peers keep to the others.
        if Some(rank) == straggler {
            cmd.args(["--cpus", &hog_cpu.to_string()]);
        } else if straggler.is_some() && ncpus() > 1 {
            let others: Vec<String> = (0..ncpus())
                .filter(|c| *c != hog_cpu)
                .map(|c| c.to_string())
                .collect();
            cmd.args(["--cpus", &others.join(",")]);
        }
        die_with_parent(&mut cmd);
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start rank {rank}: {e}"))?;
        if rank == 0 {
            let out = child.stdout.take().expect("piped");
            let shared = job.step_ms.clone();
            std::thread::spawn(move || follow_steps(out, shared));
        }
        job.children.push(child);
    }
    if let Some(lab) = lab {
        let lab = Arc::new(Mutex::new(lab));
        inject_later(lab.clone(), args.straggler, n / 2, args.fault_after);
        job.lab = Some(lab);
    }
    if straggler.is_some() {
        let mut cmd = Command::new(&exe);
        cmd.args(["demo-hog", "--cpu", &hog_cpu.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        die_with_parent(&mut cmd);
        job.children.push(
            cmd.spawn()
                .map_err(|e| format!("cannot start the hog: {e}"))?,
        );
    }
    Ok(job)
}

/// After a healthy start, puts the network fault on one rank's link.
fn inject_later(
    lab: Arc<Mutex<kitty_faultlab::Lab>>,
    kind: Straggler,
    rank: usize,
    after: std::time::Duration,
) {
    std::thread::spawn(move || {
        std::thread::sleep(after);
        let mut lab = lab.lock().unwrap();
        let r = match kind {
            Straggler::NetDelay => {
                lab.set_delay(rank, std::time::Duration::from_millis(50));
                Ok(())
            }
            Straggler::NetLoss => lab.set_loss(rank, 0.05),
            Straggler::NetThrottle => lab.set_throttle(rank, "8mbit"),
            _ => Ok(()),
        };
        if let Err(e) = r {
            eprintln!("kitty-tui demo: could not inject the fault: {e}");
        }
    });
}

/// Keeps a moving average of rank 0's reported step times.
fn follow_steps(out: std::process::ChildStdout, shared: Arc<Mutex<Option<f64>>>) {
    let mut avg: Option<f64> = None;
    for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
        if let Some(ms) = line
            .strip_prefix("step ")
            .and_then(|v| v.trim().parse::<f64>().ok())
        {
            let a = avg.map_or(ms, |a| a * 0.9 + ms * 0.1);
            avg = Some(a);
            *shared.lock().unwrap() = Some(a);
        }
    }
}

/// Adds the demo job's own step time to each frame (ground truth on screen).
pub struct StepTimes(pub Arc<Mutex<Option<f64>>>);

impl Enricher for StepTimes {
    fn enrich(&mut self, frame: &mut Frame) {
        if let Some(ms) = *self.0.lock().unwrap() {
            frame.job_step_ms.insert(JOB_NAME.to_string(), ms);
        }
    }
}

pub fn run(
    args: DemoArgs,
    cfg: SamplerConfig,
    record: Option<std::path::PathBuf>,
    mut enrichers: Vec<Box<dyn Enricher>>,
) -> crate::cmd::Result<i32> {
    let job = start(&args)?;
    enrichers.push(Box::new(StepTimes(job.step_ms.clone())));
    let code = match args.headless {
        Some(d) => crate::cmd::snapshot::run_with(cfg, d, enrichers),
        None => crate::tui::run_live(cfg, record, enrichers),
    };
    drop(job);
    code
}

/// The demo's CPU hog: busy threads that spin forever, pinned if asked
/// (a noisy neighbour such as a data loader or a co-located service).
pub fn hog(cpu: Option<usize>, threads: usize) -> crate::cmd::Result<i32> {
    if let Some(c) = cpu {
        ring::pin_to_cpus(&[c]).map_err(|e| format!("pin to cpu {c}: {e}"))?;
    }
    for _ in 1..threads.max(1) {
        std::thread::spawn(|| loop {
            std::hint::black_box(ring::compute_phase(1000));
        });
    }
    loop {
        std::hint::black_box(ring::compute_phase(1000));
    }
}
