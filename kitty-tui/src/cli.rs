//! Command-line interface (a contract: scripts and tests rely on it): the commands and
//! their options, each command with only the options it uses, every
//! duration and rate bounded with a one-line error. Parsing only: `cmd`
//! carries the commands out.

use crate::demo::{DemoArgs, FlowArgs, RankArgs};
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(
    name = "kitty-tui",
    version,
    args_conflicts_with_subcommands = true,
    about = "Live straggler triage for distributed GPU training jobs",
    long_about = "Live straggler triage for distributed GPU training jobs.\n\n\
        Watches processes with KITTY_WATCH=1 in their environment (or --pid), compares each \
        rank with its peers and explains the outliers: CPU (schedstat, eBPF run-queue latency), \
        network (tcp_info from a BPF run over the ranks' sockets or sock_diag, eBPF raw RTT and \
        flows; InfiniBand/RoCE/EFA port counters from sysfs), GPU (NVML), host; NCCL's own view confirms it (Inspector: who arrives late; \
        RAS: missing ranks; `F`: PyTorch Flight Recorder dumps). As root the eBPF probes load \
        (--no-ebpf to skip) and `p` profiles a rank on- and off-CPU. `cluster` shows every node \
        of a job through Prometheus. Without a subcommand, opens the live TUI.",
    after_help = "Examples:\n  sudo kitty-tui                    live view of this node\n  \
        kitty-tui demo                    a local 4-rank job with a CPU straggler\n  \
        sudo kitty-tui record -o run.kitty --duration 10m\n  \
        kitty-tui replay run.kitty\n  \
        sudo kitty-tui snapshot --json --duration 5s | jq .verdicts\n  \
        sudo kitty-tui demo --straggler net-delay    50 ms on one rank's link\n  \
        sudo kitty-tui profile --pid 4242 --format svg -o rank3.svg\n  \
        kitty-tui cluster --prometheus http://prometheus:9090 --job llama-70b\n\n\
        Exit status: 0 success, 1 a runtime failure (or a doctor check failed), \
        2 a usage error (bad option or argument), 141 output closed early (a closed pipe)."
)]
pub struct Cli {
    #[command(flatten)]
    pub live: LiveArgs,
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The live TUI's options.
#[derive(Args, Debug, Clone)]
pub struct LiveArgs {
    #[command(flatten)]
    pub sampling: Sampling,
    /// Record the live session to FILE while viewing (as `record` does
    /// without `--histograms`).
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    /// Replace an existing file that is not a kitty recording.
    #[arg(long)]
    pub force: bool,
}

/// How the node is sampled: for every command that samples.
#[derive(Args, Debug, Clone)]
pub struct Sampling {
    /// Sampling interval (50ms to 60s).
    #[arg(long, default_value = "500ms", value_parser = interval)]
    pub interval: Duration,
    #[command(flatten)]
    pub node: NodeArgs,
    /// Also watch this pid (repeatable).
    #[arg(long = "pid", value_name = "PID")]
    pub pids: Vec<u32>,
    /// Environment marker of watched processes.
    #[arg(long, default_value = "KITTY_WATCH=1", value_name = "KEY=VALUE")]
    pub watch_env: String,
    /// Do not open sock_diag sockets; read /proc/<pid>/net/tcp only.
    #[arg(long)]
    pub no_sock_diag: bool,
    /// The steady window placement findings are judged on (10s to 1h).
    #[arg(long, default_value = "60s", value_parser = findings_window, value_name = "DURATION")]
    pub findings_window: Duration,
}

/// What kitty may load and where it looks: for sampling and `doctor`.
#[derive(Args, Debug, Clone)]
pub struct NodeArgs {
    /// Where the host's /proc is (e.g. /host/proc under kubectl debug).
    #[arg(long, default_value = "/proc", value_name = "DIR")]
    pub proc_root: PathBuf,
    /// Where the host's /sys is (RDMA counters, NUMA, PCI); default: beside
    /// the proc root (/host/proc -> /host/sys).
    #[arg(long, value_name = "DIR")]
    pub sys_root: Option<PathBuf>,
    /// No GPU telemetry (do not load NVML).
    #[arg(long)]
    pub no_gpu: bool,
    /// Do not load the eBPF probes (raw RTT, run-queue latency, flows, events).
    #[arg(long)]
    pub no_ebpf: bool,
    /// Read per-thread counters from /proc/<pid>/task/* rather than the
    /// BPF task iterator (the fallback it takes by itself when the iterator
    /// cannot load; `ebpf.tasks` in the header and doctor says which).
    #[arg(long)]
    pub no_task_iter: bool,
    /// Load this libnvidia-ml.so.1 instead of the system's.
    #[arg(long, env = "KITTY_NVML_LIB", value_name = "PATH")]
    pub nvml_lib: Option<PathBuf>,
}

/// Bounds of the options, in one place (and in `--help`).
pub mod bounds {
    use std::time::Duration;
    pub const MIN_INTERVAL: Duration = Duration::from_millis(50);
    pub const MAX_INTERVAL: Duration = Duration::from_secs(60);
    pub const MIN_FINDINGS_WINDOW: Duration = Duration::from_secs(10);
    pub const MAX_FINDINGS_WINDOW: Duration = Duration::from_secs(3600);
    /// A recording or snapshot of at most a year.
    pub const MAX_DURATION: Duration = Duration::from_secs(366 * 86_400);
    pub const MAX_GRACE: Duration = Duration::from_secs(86_400);
    pub const MAX_FAULT_AFTER: Duration = Duration::from_secs(3_600);
}

fn bounded(s: &str, min: Duration, max: Duration, what: &str) -> Result<Duration, String> {
    // humantime accepts "18446744073709551615s" and overflows later: bound
    // the number of seconds first.
    let d = kitty_core::model::time::parse_duration(s)?;
    if d < min || d > max {
        return Err(format!(
            "{what} must be between {} and {}, got {s}",
            humantime::format_duration(min),
            humantime::format_duration(max)
        ));
    }
    Ok(d)
}

fn interval(s: &str) -> Result<Duration, String> {
    bounded(
        s,
        bounds::MIN_INTERVAL,
        bounds::MAX_INTERVAL,
        "the interval",
    )
}

fn findings_window(s: &str) -> Result<Duration, String> {
    bounded(
        s,
        bounds::MIN_FINDINGS_WINDOW,
        bounds::MAX_FINDINGS_WINDOW,
        "the findings window",
    )
}

fn duration(s: &str) -> Result<Duration, String> {
    bounded(
        s,
        Duration::from_millis(1),
        bounds::MAX_DURATION,
        "the duration",
    )
}

fn cluster_interval(s: &str) -> Result<Duration, String> {
    bounded(
        s,
        Duration::from_secs(1),
        Duration::from_secs(600),
        "the interval",
    )
}

fn rate_window(s: &str) -> Result<Duration, String> {
    bounded(
        s,
        Duration::from_secs(2),
        Duration::from_secs(3600),
        "the rate window",
    )
}

fn stale_after(s: &str) -> Result<Duration, String> {
    bounded(
        s,
        Duration::from_secs(5),
        Duration::from_secs(3600),
        "--stale-after",
    )
}

fn request_timeout(s: &str) -> Result<Duration, String> {
    bounded(
        s,
        Duration::from_millis(100),
        Duration::from_secs(60),
        "the timeout",
    )
}

fn grace(s: &str) -> Result<Duration, String> {
    bounded(s, Duration::ZERO, bounds::MAX_GRACE, "the grace period")
}

fn fault_after(s: &str) -> Result<Duration, String> {
    bounded(s, Duration::ZERO, bounds::MAX_FAULT_AFTER, "--fault-after")
}

fn profile_duration(s: &str) -> Result<Duration, String> {
    bounded(
        s,
        Duration::from_millis(100),
        kitty_probe_ebpf::profile::MAX_DURATION,
        "the profile duration",
    )
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Record frames to a file without a UI (SIGINT/SIGTERM close it cleanly).
    Record(RecordArgs),
    /// Sample for a while and print the final state as one JSON document.
    Snapshot(SnapshotArgs),
    /// What works on this node and why not.
    Doctor(DoctorArgs),
    /// Serve Prometheus / OpenMetrics metrics, /healthz and /api/snapshot over HTTP.
    Serve(ServeArgs),
    /// The same triage across every node of a job, read from Prometheus
    /// (each node runs `kitty-tui serve`; PromQL only, so Thanos, Mimir and
    /// VictoriaMetrics work too).
    Cluster(ClusterArgs),
    /// Open the TUI over a recording (pause, step, seek, speed).
    Replay(ReplayArgs),
    /// Convert a recording into rows for pandas, jq or a spreadsheet.
    Export(ExportArgs),
    /// On-CPU (or --off-cpu) profile of one process (BPF, blazesym symbols):
    /// folded stacks (inferno-flamegraph, speedscope) or an SVG flame graph.
    Profile(ProfileArgs),
    /// Start a small local ring all-reduce job with a straggler and watch it.
    Demo(DemoCmd),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff): `kitty-tui man | man -l -`.
    Man,
    /// One rank of the demo job (started by `demo`).
    #[command(hide = true)]
    DemoRank(RankArgs),
    /// One TCP flow, sender or sink (used by the network tests).
    #[command(hide = true)]
    DemoFlow(FlowArgs),
    /// The demo's CPU hog (started by `demo`).
    #[command(hide = true)]
    DemoHog {
        #[arg(long)]
        cpu: Option<usize>,
        /// Busy threads.
        #[arg(long, default_value_t = 4)]
        threads: usize,
        /// Nice level to run at (default: the one it was started at).
        #[arg(long, allow_hyphen_values = true)]
        nice: Option<i32>,
    },
}

#[derive(Args, Debug)]
pub struct RecordArgs {
    #[command(flatten)]
    pub sampling: Sampling,
    /// Output file, or - for standard output.
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
    /// Stop after this long (at least one interval; default: until interrupted).
    #[arg(long, value_parser = duration)]
    pub duration: Option<Duration>,
    /// Replace an existing file that is not a kitty recording.
    #[arg(long)]
    pub force: bool,
    /// Also keep each tick's latency histograms (run queue, RTT), which a
    /// replay's detail view draws. Without them a recording keeps each
    /// tick's p50, p99 and max and is about a quarter smaller (~140 KB a
    /// minute for 8 ranks at 500 ms, against ~195).
    #[arg(long)]
    pub histograms: bool,
}

#[derive(Args, Debug)]
pub struct SnapshotArgs {
    #[command(flatten)]
    pub sampling: Sampling,
    /// Print JSON (the only format; kept for scripts that pass it).
    #[arg(long)]
    pub json: bool,
    /// How long to sample before printing (at least one interval; long
    /// enough by default for a verdict to be raised).
    #[arg(long, default_value = "5s", value_parser = duration)]
    pub duration: Duration,
}

#[derive(Args, Debug)]
pub struct DoctorArgs {
    #[command(flatten)]
    pub node: NodeArgs,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    #[command(flatten)]
    pub sampling: Sampling,
    /// Address to listen on (9977: away from node_exporter's 9100 and
    /// dcgm-exporter's 9400). The data names processes and peers: binding
    /// all interfaces (0.0.0.0) is an explicit choice.
    #[arg(long, default_value = "127.0.0.1:9977")]
    pub listen: std::net::SocketAddr,
    /// Keep an exited rank's series this long (at most 24h).
    #[arg(long, default_value = "60s", value_parser = grace)]
    pub grace: Duration,
    /// Opt-in per-socket series: at most N sockets per rank (0: none).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=64))]
    pub socket_series: u32,
    /// Add a `pid` label to rank series (off: it changes with every
    /// restart and multiplies series).
    #[arg(long)]
    pub pid_labels: bool,
}

#[derive(Args, Debug)]
pub struct ClusterArgs {
    /// The Prometheus HTTP API's base URL (with its path prefix, if any).
    #[arg(long, value_name = "URL", env = "KITTY_PROMETHEUS")]
    pub prometheus: String,
    /// Only this training job (its `training_job` label).
    #[arg(long, value_name = "NAME")]
    pub job: Option<String>,
    /// Only nodes whose name matches this regular expression.
    #[arg(long, value_name = "REGEX")]
    pub node_selector: Option<String>,
    /// How often the view refreshes (1s to 10m).
    #[arg(long, default_value = "5s", value_parser = cluster_interval)]
    pub interval: Duration,
    /// The rate() window: at least two scrape intervals (2s to 1h).
    #[arg(long, default_value = "1m", value_parser = rate_window, value_name = "DURATION")]
    pub window: Duration,
    /// A node whose last frame is older than this is shown stale (5s to 1h).
    #[arg(long, default_value = "60s", value_parser = stale_after, value_name = "DURATION")]
    pub stale_after: Duration,
    /// Send `Authorization: Bearer` with the token in FILE (read at every refresh).
    #[arg(long, value_name = "FILE", conflicts_with = "basic_auth_user")]
    pub bearer_token_file: Option<PathBuf>,
    /// Basic auth user (the password comes from --basic-auth-password-file).
    #[arg(long, value_name = "USER", requires = "basic_auth_password_file")]
    pub basic_auth_user: Option<String>,
    #[arg(long, value_name = "FILE", requires = "basic_auth_user")]
    pub basic_auth_password_file: Option<PathBuf>,
    /// Trust the certificates in this PEM file (an https:// URL with a private CA).
    #[arg(long, value_name = "FILE")]
    pub ca_file: Option<PathBuf>,
    /// Deadline of one request to Prometheus or a node (100ms to 60s).
    #[arg(long, default_value = "5s", value_parser = request_timeout)]
    pub timeout: Duration,
    /// Record what the view shows to FILE (`replay` opens it).
    #[arg(long, value_name = "FILE", conflicts_with = "json")]
    pub record: Option<PathBuf>,
    /// Replace an existing file that is not a kitty recording.
    #[arg(long)]
    pub force: bool,
    /// Print the cluster's state as one JSON document instead of the TUI.
    #[arg(long)]
    pub json: bool,
    /// With --json: refresh for this long first (at least two refreshes).
    #[arg(long, default_value = "5s", value_parser = duration, requires = "json")]
    pub duration: Duration,
}

#[derive(Args, Debug)]
pub struct ReplayArgs {
    pub file: PathBuf,
    /// Print frames as text instead of opening the TUI.
    #[arg(long)]
    pub dump: bool,
    /// Open at this time: HH:MM[:SS] (the recording's day, in the zone
    /// shown), `5m ago`, `+30s` from the start, an RFC 3339 time, or `end`.
    #[arg(long, value_name = "TIME", conflicts_with = "dump")]
    pub at: Option<String>,
    /// Show times in UTC instead of the local zone (TZ).
    #[arg(long)]
    pub utc: bool,
}

#[derive(Args, Debug)]
pub struct ExportArgs {
    pub file: PathBuf,
    /// JSON Lines (every table in one stream, a `kind` per row) or CSV (one table).
    #[arg(long, value_enum, default_value = "jsonl")]
    pub format: ExportFormat,
    /// The table a CSV export writes.
    #[arg(long, value_enum, default_value = "ranks")]
    pub table: ExportTable,
    /// Output file, or - for standard output (the default).
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Replace an existing file that is not a kitty export.
    #[arg(long)]
    pub force: bool,
}

#[derive(Args, Debug)]
pub struct ProfileArgs {
    /// The process to profile.
    #[arg(long, value_name = "PID")]
    pub pid: Option<u32>,
    /// How long to sample (100ms to 60s).
    #[arg(long, default_value = "5s", value_parser = profile_duration)]
    pub duration: Duration,
    /// Where it waits instead of where it runs: time off-CPU from
    /// sched_switch (microseconds), split into runnable (waiting for a CPU)
    /// and blocked (sleeping: recv, locks, I/O).
    #[arg(long)]
    pub off_cpu: bool,
    /// Samples per second per CPU (1 to 999; on-CPU only).
    #[arg(long, default_value_t = 99,
          value_parser = clap::value_parser!(u64).range(1..=kitty_probe_ebpf::profile::MAX_FREQUENCY_HZ))]
    pub frequency: u64,
    /// Output format.
    #[arg(long, value_enum, default_value = "folded")]
    pub format: ProfileFormat,
    /// Each thread as its own root instead of merged stacks.
    #[arg(long)]
    pub per_thread: bool,
    /// Output file, or - for standard output (the default).
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Replace an existing file that is not a kitty profile.
    #[arg(long)]
    pub force: bool,
}

#[derive(Args, Debug)]
pub struct DemoCmd {
    #[command(flatten)]
    pub sampling: Sampling,
    #[command(flatten)]
    pub demo: DemoArgs,
    /// Run headless for this long and print a snapshot instead of the TUI.
    #[arg(long, value_parser = duration)]
    pub headless: Option<Duration>,
    /// Network stragglers: how long the job runs healthy before the fault.
    #[arg(long, default_value = "3s", value_parser = fault_after)]
    pub fault_after: Duration,
    /// Record the session to FILE while viewing (as `record` does without
    /// `--histograms`).
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    /// Replace an existing file that is not a kitty recording.
    #[arg(long)]
    pub force: bool,
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

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportTable {
    /// One row per rank per frame: identity, then every rank signal.
    Ranks,
    /// One row per frame: the host signals.
    Host,
    /// One row per GPU per frame.
    Gpus,
    /// One row per RDMA port per frame.
    Nics,
    /// One row per verdict in force per frame.
    Verdicts,
    /// One row per placement finding in force per frame.
    Findings,
    /// One row per event.
    Events,
}

impl ExportTable {
    pub fn table(self) -> kitty_core::sinks::export::Table {
        use kitty_core::sinks::export::Table;
        match self {
            ExportTable::Ranks => Table::Ranks,
            ExportTable::Host => Table::Host,
            ExportTable::Gpus => Table::Gpus,
            ExportTable::Nics => Table::Nics,
            ExportTable::Verdicts => Table::Verdicts,
            ExportTable::Findings => Table::Findings,
            ExportTable::Events => Table::Events,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_range_durations_are_refused_with_one_line() {
        for bad in ["18446744073709551615s", "100000h", "10ms", "0s"] {
            let e = interval(bad).unwrap_err();
            assert_eq!(e.lines().count(), 1, "{e}");
        }
        assert_eq!(interval("1s").unwrap(), Duration::from_secs(1));
        assert!(duration("18446744073709551615s").is_err());
        assert!(grace("25h").is_err());
    }

    #[test]
    fn each_command_lists_only_its_options() {
        use clap::CommandFactory;
        let cmd = Cli::command();
        let names = |sub: &str| -> Vec<String> {
            cmd.find_subcommand(sub)
                .unwrap()
                .get_arguments()
                .filter_map(|a| a.get_long().map(str::to_string))
                .collect()
        };
        let replay = names("replay");
        for flag in ["pid", "proc-root", "no-ebpf", "interval"] {
            assert!(!replay.contains(&flag.to_string()), "replay lists --{flag}");
            assert!(
                !names("export").contains(&flag.to_string()),
                "export lists --{flag}"
            );
        }
        assert!(names("record").contains(&"interval".to_string()));
        assert!(names("doctor").contains(&"proc-root".to_string()));
        cmd.debug_assert();
    }
}
