//! The Frame: everything known at one tick, as plain serializable data.
//!
//! A frame carries raw counters (so rates can be recomputed from any two
//! frames) and the signals derived from the previous frame (so replay shows
//! exactly what live showed). Signals a source cannot provide are absent.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Bumped on incompatible changes of the frame shape.
pub const FRAME_VERSION: u32 = 1;

/// Named numeric signals (`run_delay_ms_per_s`, `cpu_pct`, ...).
pub type Signals = BTreeMap<String, f64>;

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Frame {
    pub version: u32,
    /// Tick number since the source started (0-based).
    pub seq: u64,
    /// Wall clock, nanoseconds since the Unix epoch.
    pub wall_ns: u64,
    /// Monotonic clock, nanoseconds (CLOCK_MONOTONIC); only differences matter.
    pub mono_ns: u64,
    pub node: String,
    pub interval_ms: u64,
    pub host: HostFrame,
    pub ranks: Vec<RankFrame>,
    #[serde(default)]
    pub netns: Vec<NetnsFrame>,
    #[serde(default)]
    pub gpus: Vec<GpuFrame>,
    pub sources: BTreeMap<String, SourceStatus>,
    #[serde(default)]
    pub events: Vec<Event>,
    #[serde(default)]
    pub verdicts: Vec<Verdict>,
    /// Step time a job reports about itself, by job name (the demo job does;
    /// real jobs may later through a side channel). Ground truth for checks.
    #[serde(default)]
    pub job_step_ms: BTreeMap<String, f64>,
    /// Flows seen by the flow probe in the last seconds, busiest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flows: Vec<FlowFrame>,
}

/// Bytes of one (process, local endpoint, remote endpoint), from eBPF.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct FlowFrame {
    pub pid: u32,
    /// The rank's comm when the flow belongs to a watched process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comm: Option<String>,
    pub netns: u64,
    pub protocol: String,
    pub local: String,
    pub remote: String,
    /// Since the flow was first seen.
    pub tx_bytes: u64,
    pub rx_bytes: u64,
    pub tx_bytes_per_s: f64,
    pub rx_bytes_per_s: f64,
}

/// Identity of a watched process: a pid alone is not enough (pid reuse).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
pub struct ProcKey {
    pub pid: u32,
    /// Start time in clock ticks since boot (field 22 of /proc/<pid>/stat).
    pub start_time: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Labels {
    pub rank: Option<u32>,
    pub local_rank: Option<u32>,
    pub world_size: Option<u32>,
    pub job: Option<String>,
    pub pod_uid: Option<String>,
    pub container_id: Option<String>,
    pub runtime: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct RankFrame {
    pub key: ProcKey,
    pub comm: String,
    pub labels: Labels,
    /// Single-letter process state from /proc/<pid>/stat (R, S, D, Z...).
    pub state: String,
    /// Network namespace inode, when readable.
    pub netns: Option<u64>,
    /// GPU index serving this rank, when known (NVML).
    #[serde(default)]
    pub gpu: Option<u32>,
    pub counters: RankCounters,
    pub signals: Signals,
    #[serde(default)]
    pub sockets: Vec<SocketFrame>,
    /// The busiest threads by run-queue delay (at most a handful).
    #[serde(default)]
    pub threads: Vec<ThreadFrame>,
    /// Latency histograms of this tick from the probes ("rtt_us",
    /// "runq_us"): (bucket upper bound, count), non-empty buckets only.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub histograms: BTreeMap<String, Vec<(f64, u64)>>,
}

impl RankFrame {
    /// `rank 3` or `pid 4242` when the process has no rank label.
    pub fn display_name(&self) -> String {
        match self.labels.rank {
            Some(r) => format!("rank {r}"),
            None => format!("pid {}", self.key.pid),
        }
    }

    pub fn signal(&self, name: &str) -> Option<f64> {
        self.signals.get(name).copied()
    }
}

/// Cumulative counters of one process at one tick; rates come from two of these.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct RankCounters {
    pub cpu_ticks: u64,
    pub ctx_voluntary: u64,
    pub ctx_involuntary: u64,
    pub run_delay_ns: u64,
    pub exec_ns: u64,
    pub nr_migrations: u64,
    pub io_read_bytes: Option<u64>,
    pub io_write_bytes: Option<u64>,
    pub cfs_throttled_ns: Option<u64>,
    /// Sums over the sockets seen this tick (informative; rates use per-socket deltas).
    pub tcp_total_retrans: Option<u64>,
    pub tcp_segs_out: Option<u64>,
    pub tcp_segs_in: Option<u64>,
    pub tcp_bytes_acked: Option<u64>,
    pub tcp_bytes_received: Option<u64>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct SocketFrame {
    pub inode: u64,
    pub local: String,
    pub remote: String,
    pub state: String,
    pub tx_queue: u64,
    pub rx_queue: u64,
    /// tcp_info, when sock_diag answered for this socket.
    pub info: Option<TcpInfo>,
    /// Per-socket rates against the previous frame.
    #[serde(default)]
    pub signals: Signals,
}

/// The tcp_info fields kitty uses (see linux/tcp.h). Fields newer than the
/// running kernel are None.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct TcpInfo {
    pub rtt_us: u32,
    pub rttvar_us: u32,
    pub total_retrans: u32,
    pub snd_cwnd: u32,
    pub min_rtt_us: Option<u32>,
    pub bytes_acked: Option<u64>,
    pub bytes_received: Option<u64>,
    pub segs_out: Option<u32>,
    pub segs_in: Option<u32>,
    pub notsent_bytes: Option<u32>,
    pub delivery_rate: Option<u64>,
    pub busy_time_us: Option<u64>,
    pub rwnd_limited_us: Option<u64>,
    pub sndbuf_limited_us: Option<u64>,
    pub bytes_sent: Option<u64>,
    pub bytes_retrans: Option<u64>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ThreadFrame {
    pub tid: u32,
    pub comm: String,
    pub run_delay_ms_per_s: f64,
    pub cpu_pct: f64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct HostFrame {
    pub signals: Signals,
    /// Utilization of each CPU, percent.
    #[serde(default)]
    pub cpu_pct: Vec<f64>,
    #[serde(default)]
    pub interfaces: Vec<InterfaceFrame>,
    /// Raw counters kept for the next rate computation.
    #[serde(default)]
    pub counters: HostCounters,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct HostCounters {
    /// (busy, total) jiffies: all CPUs, then each CPU.
    pub cpu_total: (u64, u64),
    pub cpu_each: Vec<(u64, u64)>,
    /// PSI "some" total stall microseconds: cpu, memory, io.
    pub psi_some_us: [Option<u64>; 3],
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct InterfaceFrame {
    pub name: String,
    pub rx_bytes: u64,
    pub tx_bytes: u64,
    pub rx_bytes_per_s: Option<f64>,
    pub tx_bytes_per_s: Option<f64>,
}

/// Per network namespace TCP counters (/proc/<pid>/net/snmp and netstat).
/// Shared by every rank in the namespace: the node view, not a rank signal.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct NetnsFrame {
    pub inode: u64,
    pub pids: Vec<u32>,
    pub counters: BTreeMap<String, u64>,
    pub signals: Signals,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct GpuFrame {
    pub index: u32,
    pub name: String,
    pub signals: Signals,
    /// "ok", "lost" (fell off the bus) or "stale" (NVML stopped answering).
    #[serde(default)]
    pub status: String,
    /// Active clock throttle reasons, decoded ("hw_slowdown", "sw_thermal"...).
    #[serde(default)]
    pub throttle: Vec<String>,
    /// XID errors in the last window (count) and the most recent codes.
    #[serde(default)]
    pub xid_recent: u32,
    #[serde(default)]
    pub xid_last: Vec<u64>,
    /// Compute processes on this GPU: (host pid, used memory bytes).
    #[serde(default)]
    pub processes: Vec<(u32, u64)>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct SourceStatus {
    /// "ok" or "unavailable" or "degraded".
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<String>,
}

impl SourceStatus {
    pub fn ok() -> Self {
        SourceStatus {
            status: "ok".into(),
            reason: None,
            strategy: None,
        }
    }
    pub fn unavailable(reason: impl Into<String>) -> Self {
        SourceStatus {
            status: "unavailable".into(),
            reason: Some(reason.into()),
            strategy: None,
        }
    }
    pub fn degraded(reason: impl Into<String>) -> Self {
        SourceStatus {
            status: "degraded".into(),
            reason: Some(reason.into()),
            strategy: None,
        }
    }
    pub fn is_ok(&self) -> bool {
        self.status == "ok"
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Event {
    pub wall_ns: u64,
    pub kind: EventKind,
    pub message: String,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    RankAppeared,
    RankExited,
    VerdictRaised,
    VerdictCleared,
    SourceLost,
    SourceRecovered,
    /// The OOM killer chose a victim (from eBPF).
    OomKill,
    /// A watched process died from a fatal signal (from eBPF).
    FatalSignal,
    /// Many execve calls in a short time (from eBPF, rate-limited).
    ExecBurst,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Verdict {
    pub rank: Option<u32>,
    pub pid: u32,
    pub job: Option<String>,
    pub signal: String,
    pub value: f64,
    pub peer_median: f64,
    pub ratio: f64,
    pub for_s: f64,
    pub severity: Severity,
    pub message: String,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Warning,
    Critical,
}
