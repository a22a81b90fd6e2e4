//! Command-line interface (the contract in DESIGN.md).

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "kitty-tui",
    version,
    about = "Live straggler triage for distributed GPU training jobs",
    long_about = "Live straggler triage for distributed GPU training jobs.\n\n\
        Watches processes with KITTY_WATCH=1 in their environment (or --pid), compares each \
        rank with its peers and explains the outliers: CPU (schedstat, eBPF run-queue latency), \
        network (sock_diag tcp_info, eBPF raw RTT and flows), GPU (NVML), host. As root the eBPF \
        probes load (--no-ebpf to skip) and `p` profiles a rank on-CPU. Without a subcommand, \
        opens the live TUI.",
    after_help = "Examples:\n  sudo kitty-tui                    live view of this node\n  \
        kitty-tui demo                    a local 4-rank job with a CPU straggler\n  \
        sudo kitty-tui record -o run.kitty --duration 10m\n  \
        kitty-tui replay run.kitty\n  \
        sudo kitty-tui snapshot --json --duration 5s | jq .verdicts\n  \
        sudo kitty-tui demo --straggler net-delay    50 ms on one rank's link\n  \
        sudo kitty-tui profile --pid 4242 --format svg -o rank3.svg"
)]
pub struct Cli {
    #[command(flatten)]
    pub common: Common,
    /// Record the live session to FILE while viewing.
    #[arg(long, value_name = "FILE", global = false)]
    pub record: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Args, Debug, Clone)]
pub struct Common {
    /// Sampling interval (e.g. 500ms, 1s).
    #[arg(long, global = true, default_value = "500ms", value_parser = parse_interval)]
    pub interval: std::time::Duration,
    /// Where the host's /proc is (e.g. /host/proc under kubectl debug).
    #[arg(long, global = true, default_value = "/proc", value_name = "DIR")]
    pub proc_root: PathBuf,
    /// Also watch this pid (repeatable); for `profile`, the process to profile.
    #[arg(long = "pid", global = true, value_name = "PID")]
    pub pids: Vec<u32>,
    /// Environment marker of watched processes.
    #[arg(
        long,
        global = true,
        default_value = "KITTY_WATCH=1",
        value_name = "KEY=VALUE"
    )]
    pub watch_env: String,
    /// Do not open sock_diag sockets; read /proc/<pid>/net/tcp only.
    #[arg(long, global = true)]
    pub no_sock_diag: bool,
    /// No GPU telemetry (do not load NVML).
    #[arg(long, global = true)]
    pub no_gpu: bool,
    /// Do not load the eBPF probes (raw RTT, run-queue latency, flows, events).
    #[arg(long, global = true)]
    pub no_ebpf: bool,
    /// Load this libnvidia-ml.so.1 instead of the system's.
    #[arg(long, global = true, env = "KITTY_NVML_LIB", value_name = "PATH")]
    pub nvml_lib: Option<PathBuf>,
}

fn parse_interval(s: &str) -> Result<std::time::Duration, String> {
    let d = kitty_core::timefmt::parse_duration(s)?;
    if d < std::time::Duration::from_millis(50) {
        return Err("interval must be at least 50ms".into());
    }
    Ok(d)
}

fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    kitty_core::timefmt::parse_duration(s)
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Record frames to a file without a UI (SIGINT/SIGTERM close it cleanly).
    Record {
        /// Output file.
        #[arg(short, long, value_name = "FILE")]
        output: PathBuf,
        /// Stop after this long (default: until interrupted).
        #[arg(long, value_parser = parse_duration)]
        duration: Option<std::time::Duration>,
    },
    /// Sample for a while and print the final state as one JSON document.
    Snapshot {
        /// Print JSON (the only format; kept for scripts that pass it).
        #[arg(long)]
        json: bool,
        /// How long to sample before printing.
        #[arg(long, default_value = "3s", value_parser = parse_duration)]
        duration: std::time::Duration,
    },
    /// What works on this node and why not.
    Doctor {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Serve Prometheus / OpenMetrics metrics, /healthz and /api/snapshot over HTTP.
    Serve {
        /// Address to listen on. The data names processes and peers: binding
        /// all interfaces (0.0.0.0) is an explicit choice.
        #[arg(long, default_value = "127.0.0.1:9100")]
        listen: std::net::SocketAddr,
        /// Keep an exited rank's series this long.
        #[arg(long, default_value = "60s", value_parser = parse_duration)]
        grace: std::time::Duration,
        /// Opt-in per-socket series: at most N sockets per rank (0: none).
        #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=64))]
        socket_series: u32,
    },
    /// Open the TUI over a recording (pause, step, seek, speed).
    Replay {
        file: PathBuf,
        /// Print frames as text instead of opening the TUI.
        #[arg(long)]
        dump: bool,
    },
    /// Convert a recording into rows for pandas, jq or a spreadsheet.
    Export {
        file: PathBuf,
        #[arg(long, value_enum, default_value = "jsonl")]
        format: ExportFormat,
        /// Output file (default: stdout).
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// On-CPU profile of one process, given with --pid (perf_event BPF,
    /// blazesym symbols): folded stacks (inferno-flamegraph, speedscope) or
    /// an SVG flame graph.
    Profile {
        /// How long to sample (at most 60s).
        #[arg(long, default_value = "5s", value_parser = parse_duration)]
        duration: std::time::Duration,
        /// Samples per second per CPU (1 to 999).
        #[arg(long, default_value_t = 99)]
        frequency: u64,
        /// Output format.
        #[arg(long, value_enum, default_value = "folded")]
        format: ProfileFormat,
        /// Each thread as its own root instead of merged stacks.
        #[arg(long)]
        per_thread: bool,
        /// Write here instead of standard output.
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Start a small local ring all-reduce job with a straggler and watch it.
    Demo(DemoArgs),
    /// One rank of the demo job (started by `demo`).
    #[command(hide = true)]
    DemoRank(crate::demo::ring::RankArgs),
    /// One TCP flow, sender or sink (used by the network tests).
    #[command(hide = true)]
    DemoFlow(crate::demo::flow::FlowArgs),
    /// The demo's CPU hog (started by `demo`).
    #[command(hide = true)]
    DemoHog {
        #[arg(long)]
        cpu: Option<usize>,
        /// Busy threads.
        #[arg(long, default_value_t = 4)]
        threads: usize,
    },
}

#[derive(Args, Debug, Clone)]
pub struct DemoArgs {
    /// Number of ranks.
    #[arg(long, default_value_t = 4)]
    pub ranks: u32,
    /// Which fault to inject into one rank.
    #[arg(long, value_enum, default_value = "cpu")]
    pub straggler: Straggler,
    /// Run headless for this long and print a snapshot instead of the TUI.
    #[arg(long, value_parser = parse_duration)]
    pub headless: Option<std::time::Duration>,
    /// Network stragglers: how long the job runs healthy before the fault.
    #[arg(long, default_value = "3s", value_parser = parse_duration)]
    pub fault_after: std::time::Duration,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Straggler {
    /// A busy process pinned to the CPU of one pinned rank.
    Cpu,
    /// A healthy job: no verdict should appear.
    None,
    /// Root: ranks in network namespaces; 50 ms of delay on one rank's link.
    NetDelay,
    /// Root: ranks in network namespaces; 5 % of one rank's frames dropped.
    NetLoss,
    /// Root: ranks in network namespaces; one rank's sending throttled to 8 Mbit/s.
    NetThrottle,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProfileFormat {
    Folded,
    Svg,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    Jsonl,
    Csv,
}
