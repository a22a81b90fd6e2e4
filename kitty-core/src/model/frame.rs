//! The Frame: everything known at one tick, as plain serializable data.
//!
//! A frame carries raw counters (so rates can be recomputed from any two
//! frames) and the signals derived from the previous frame (so replay shows
//! exactly what live showed). Signals a source cannot provide are absent.
//! Every string is a sanitised [`Text`]; every signal value is finite.

use super::named::NamedMap;
use super::signal::Sig;
use super::signals::Signals;
use super::text::Text;
use crate::named_enum;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Bumped on incompatible changes of the frame shape. Version 1 frames
/// (kitty 0.1 before typed signals) read as version 2 without loss.
pub const FRAME_VERSION: u32 = 2;

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Frame {
    pub version: u32,
    /// Tick number since the source started (0-based).
    pub seq: u64,
    /// Wall clock, nanoseconds since the Unix epoch.
    pub wall_ns: u64,
    /// Monotonic clock, nanoseconds (CLOCK_MONOTONIC); only differences matter.
    pub mono_ns: u64,
    pub node: Text,
    pub interval_ms: u64,
    pub host: HostFrame,
    pub ranks: Vec<RankFrame>,
    #[serde(default)]
    pub netns: Vec<NetnsFrame>,
    #[serde(default)]
    pub gpus: Vec<GpuFrame>,
    /// RDMA ports (InfiniBand, RoCE, EFA) of the node.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nics: Vec<NicFrame>,
    pub sources: Sources,
    #[serde(default)]
    pub events: Vec<Event>,
    #[serde(default)]
    pub verdicts: Vec<Verdict>,
    /// Step time a job reports about itself, by job name (the demo job does).
    /// Ground truth for checks.
    #[serde(default)]
    pub job_step_ms: StepTimes,
    /// Flows seen by the flow probe in the last seconds, by process and
    /// endpoints (a stable order; `analysis::talkers` ranks them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flows: Vec<FlowFrame>,
    /// Ticks the sampler skipped before this frame because it was stalled
    /// (the clock never catches up: rates span the real elapsed time).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub missed_ticks: u64,
    /// Slow-window findings (pinning, co-location): not stragglers, each
    /// with the remedy it points at.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<Finding>,
    /// Whole nodes whose every rank of a job stands out the same way (in a
    /// frame that spans nodes).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_verdicts: Vec<NodeVerdict>,
    /// Frames the engine dropped before delivering this one, because its
    /// consumer was slower than the interval (only a view may drop; a
    /// recorder never does).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped_frames: u64,
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Frame {
    /// The verdicts of one process.
    pub fn verdicts_of(&self, pid: u32) -> impl Iterator<Item = &Verdict> {
        self.verdicts.iter().filter(move |v| v.pid == pid)
    }

    pub fn rank_by_pid(&self, pid: u32) -> Option<&RankFrame> {
        self.ranks.iter().find(|r| r.key.pid == pid)
    }
}

named_enum! {
    /// Where a frame's data came from.
    pub enum Source {
        Procfs = "procfs",
        SockDiag = "sock_diag",
        EbpfRtt = "ebpf.rtt",
        EbpfRunq = "ebpf.runq",
        EbpfFlow = "ebpf.flow",
        EbpfEvents = "ebpf.events",
        /// Per-thread counters from the BPF task iterator (else procfs).
        EbpfTasks = "ebpf.tasks",
        Nvml = "nvml",
        /// RDMA port counters from sysfs.
        Rdma = "rdma",
        /// NCCL Inspector's per-collective JSON lines.
        NcclInspector = "nccl.inspector",
        /// NCCL's RAS client port.
        NcclRas = "nccl.ras",
        /// The cluster view's Prometheus.
        Prometheus = "prometheus",
    }
}

impl Source {
    /// Sources most nodes lack (no RDMA device, no NCCL Inspector, no RAS):
    /// their absence is the normal case, not a problem to show.
    pub fn usually_absent(self) -> bool {
        matches!(self, Source::Rdma | Source::NcclInspector | Source::NcclRas)
    }
}

/// Each source's state in this frame.
pub type Sources = NamedMap<Source, SourceStatus>;

named_enum! {
    pub enum Status {
        Ok = "ok",
        Unavailable = "unavailable",
        Degraded = "degraded",
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct SourceStatus {
    pub status: Status,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<Text>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<Text>,
}

impl SourceStatus {
    pub fn ok() -> Self {
        SourceStatus {
            status: Status::Ok,
            reason: None,
            strategy: None,
        }
    }
    pub fn unavailable(reason: impl AsRef<str>) -> Self {
        SourceStatus {
            status: Status::Unavailable,
            reason: Some(Text::message(reason)),
            strategy: None,
        }
    }
    pub fn degraded(reason: impl AsRef<str>) -> Self {
        SourceStatus {
            status: Status::Degraded,
            reason: Some(Text::message(reason)),
            strategy: None,
        }
    }
    pub fn with_strategy(mut self, s: impl AsRef<str>) -> Self {
        self.strategy = Some(Text::new(s.as_ref()));
        self
    }
    pub fn is_ok(&self) -> bool {
        self.status == Status::Ok
    }
}

/// Step times by job: finite values only.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct StepTimes(BTreeMap<Text, f64>);

impl StepTimes {
    pub fn set(&mut self, job: Text, ms: f64) {
        if ms.is_finite() {
            self.0.insert(job, ms);
        }
    }
    pub fn get(&self, job: &str) -> Option<f64> {
        self.0.get(&Text::new(job)).copied()
    }
    pub fn iter(&self) -> impl Iterator<Item = (&Text, f64)> {
        self.0.iter().map(|(k, v)| (k, *v))
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<'de> Deserialize<'de> for StepTimes {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw: BTreeMap<Text, Option<f64>> = BTreeMap::deserialize(d)?;
        let mut s = StepTimes::default();
        for (k, v) in raw {
            if let Some(v) = v {
                s.set(k, v);
            }
        }
        Ok(s)
    }
}

named_enum! {
    /// The latency histograms the probes give per rank.
    pub enum HistKind {
        RttUs = "rtt_us",
        RunqUs = "runq_us",
    }
}

/// (bucket upper bound, count), non-empty buckets only, per kind.
pub type Histograms = NamedMap<HistKind, Vec<(f64, u64)>>;

/// Bytes of one (process, local endpoint, remote endpoint), from eBPF.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct FlowFrame {
    pub pid: u32,
    /// The rank's comm when the flow belongs to a watched process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comm: Option<Text>,
    pub netns: u64,
    pub protocol: Text,
    pub local: Text,
    pub remote: Text,
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
    /// The job's name (JOB_NAME, else SLURM_JOB_ID, else TORCHELASTIC_RUN_ID).
    pub job: Option<Text>,
    /// What tells two launches of one job name apart: the launcher's run id
    /// (`torchelastic:...`, `slurm:JOB.STEP`, `pmix:...`, `ompi:...`,
    /// `master:ADDR:PORT`), else the launcher process (`launcher:PID`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<Text>,
    /// SLURM_JOB_ID, when the rank runs under SLURM (a join label).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm_job_id: Option<Text>,
    pub pod_uid: Option<Text>,
    pub container_id: Option<Text>,
    pub runtime: Option<Text>,
}

/// What ranks are grouped by: the job's name and its launch's identity.
pub type JobKey<'a> = (Option<&'a str>, Option<&'a str>);

impl Labels {
    /// The key ranks are grouped by: the job's name and its identity.
    pub fn job_key(&self) -> JobKey<'_> {
        (self.job.as_deref(), self.job_id.as_deref())
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct RankFrame {
    pub key: ProcKey,
    /// The node the rank runs on, in a frame that spans nodes (the cluster
    /// view); a node's own frames leave it out (it is `Frame::node`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<Text>,
    /// Its node stopped reporting (cluster view): the data is its last,
    /// kept on screen and out of the comparison.
    #[serde(default, skip_serializing_if = "is_false")]
    pub stale: bool,
    /// The NICs its NCCL settings name, with their NUMA nodes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nic_numa: Vec<(Text, u32)>,
    /// The RDMA ports it uses (`mlx5_0/1`): from its open uverbs devices,
    /// narrowed by NCCL_IB_HCA.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nics: Vec<Text>,
    /// Its latest collectives as NCCL Inspector reported them (a few).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub collectives: Vec<CollectiveFrame>,
    /// Where PyTorch's Flight Recorder takes a dump request and writes the
    /// dump, as kitty reaches them (its environment names a pipe).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flight_recorder: Option<FlightRecorderPaths>,
    /// Where its node's `kitty-tui serve` answers (`host:port`, the scrape
    /// target), for the cluster view's drill-down.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<Text>,
    pub comm: Text,
    pub labels: Labels,
    /// Single-letter process state from /proc/<pid>/stat (R, S, D, Z...).
    pub state: Text,
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
    /// Latency histograms of this tick from the probes.
    #[serde(default, skip_serializing_if = "NamedMap::is_empty")]
    pub histograms: Histograms,
    /// The CPUs the rank may run on (Cpus_allowed_list ranges).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub affinity: Vec<(u32, u32)>,
    /// Who held the rank's CPUs while its threads waited in this tick
    /// (run-queue probe), most first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ran_instead: Vec<RanInstead>,
    /// The rank's cgroup CPU limit and use, when it was throttled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup_cpu: Option<CgroupCpu>,
}

/// A rank's Flight Recorder pipe and dump file (host paths).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct FlightRecorderPaths {
    pub pipe: Text,
    pub dump: Text,
}

/// One collective of one rank, from NCCL Inspector.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct CollectiveFrame {
    /// The communicator's id (`0x7f8c496ae9f661`).
    pub comm: Text,
    /// `AllReduce`, `AllGather`...
    pub coll: Text,
    /// The collective's sequence number in its communicator.
    pub seq: u64,
    pub msg_bytes: u64,
    pub exec_us: u64,
    pub busbw_gbs: f64,
    /// How much later than its peers on this node it arrived (their
    /// median exec time minus its own), when peers reported the same one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub late_us: Option<f64>,
}

/// One RDMA port at one tick.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct NicFrame {
    pub device: Text,
    pub port: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_layer: Option<Text>,
    /// Logical state (`ACTIVE`, `DOWN`...) and physical state (`LinkUp`...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<Text>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phys_state: Option<Text>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netdev: Option<Text>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa_node: Option<u32>,
    /// Raw counters by their sysfs name (`port_xmit_wait`, `np_cnp_sent`,
    /// `dev.<name>` device-wide, `eth.<name>` from the netdev): the rates
    /// are recomputed from two frames. A counter the device lacks is absent.
    #[serde(default)]
    pub counters: BTreeMap<Text, u64>,
    pub signals: Signals,
    /// Why the port is degraded (down, slower or narrower than the node's
    /// other ports, flapping); None while healthy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<Text>,
    /// The ranks using it (pids).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pids: Vec<u32>,
}

impl NicFrame {
    /// `mlx5_0/1`.
    pub fn id(&self) -> String {
        format!("{}/{}", self.device, self.port)
    }
}

/// A task that held a CPU while a rank's thread waited for it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct RanInstead {
    /// Its process (0: the CPU was idle, the wait was the scheduler's).
    pub pid: u32,
    pub comm: Text,
    /// The rank's wait charged to it, per second (the probe gives it to
    /// 0.01 ms/s).
    pub wait_ms_per_s: f64,
    /// Its share of all the rank's charged wait in the tick, percent (a
    /// whole one from the probe).
    pub share_pct: f64,
    /// The CPU where the rank's thread waited.
    pub cpu: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_uid: Option<Text>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_id: Option<Text>,
}

/// A cgroup's CPU quota against what it used, for a throttling verdict.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct CgroupCpu {
    pub path: Text,
    /// The quota in CPUs (quota / period), when one is set.
    pub quota_cpus: Option<f64>,
    /// CPUs used over the tick.
    pub used_cpus: Option<f64>,
}

impl RankFrame {
    /// `rank 3` or `pid 4242` when the process has no rank label.
    pub fn display_name(&self) -> String {
        Self::name_of(self.labels.rank, self.key.pid)
    }

    /// [`RankFrame::display_name`] of a process with this rank label and
    /// pid (one the frame may no longer hold).
    pub fn name_of(rank: Option<u32>, pid: u32) -> String {
        match rank {
            Some(r) => format!("rank {r}"),
            None => format!("pid {pid}"),
        }
    }

    pub fn signal(&self, sig: Sig) -> Option<f64> {
        self.signals.get(sig)
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
    pub local: Text,
    pub remote: Text,
    pub state: Text,
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
    pub comm: Text,
    /// To 0.01 ms/s, as the sampler gives it (and `cpu_pct` to 0.01 %).
    pub run_delay_ms_per_s: f64,
    pub cpu_pct: f64,
}

/// A NUMA node and its CPUs (inclusive ranges).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct NumaNode {
    pub node: u32,
    pub cpus: Vec<(u32, u32)>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct HostFrame {
    /// The NUMA nodes and their CPUs (from sysfs; empty without it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub numa: Vec<NumaNode>,
    pub signals: Signals,
    /// Utilization of each CPU, percent.
    #[serde(default)]
    pub cpu_pct: Vec<f64>,
    #[serde(default)]
    pub interfaces: Vec<InterfaceFrame>,
    /// Raw counters kept for the next rate computation.
    #[serde(default)]
    pub counters: HostCounters,
    /// The busiest processes that are not ranks, from the last scan (in the
    /// frames where a scan happened).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub busy: Vec<BusyProcess>,
}

/// A busy process on the node that is not a rank: a possible noisy
/// neighbour of the ranks whose CPUs it may run on.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct BusyProcess {
    pub pid: u32,
    pub comm: Text,
    /// CPU used since the previous scan, percent of one core.
    pub cpu_pct: f64,
    /// The CPUs it may run on (Cpus_allowed_list ranges).
    pub affinity: Vec<(u32, u32)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_uid: Option<Text>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_id: Option<Text>,
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
    pub name: Text,
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
    pub counters: BTreeMap<Text, u64>,
    pub signals: Signals,
}

named_enum! {
    /// A GPU's state as kitty sees it.
    #[derive(Default)]
    pub enum GpuStatus {
        #[default]
        Ok = "ok",
        /// Fell off the bus (NVML_ERROR_GPU_IS_LOST).
        Lost = "lost",
        /// NVML stopped answering; the values are the last it gave.
        Stale = "stale",
        /// NVML refused to open the device; see `error`.
        Error = "error",
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct GpuFrame {
    pub index: u32,
    pub name: Text,
    /// The GPU's UUID (`GPU-...`): what dcgm-exporter's `UUID` label joins on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<Text>,
    /// The NUMA node of its PCI device (sysfs), when the kernel gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa_node: Option<u32>,
    pub signals: Signals,
    #[serde(default, deserialize_with = "gpu_status")]
    pub status: GpuStatus,
    /// Why the device could not be read, with `GpuStatus::Error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Text>,
    /// Active clock throttle reasons, decoded ("hw_slowdown", "sw_thermal"...).
    #[serde(default)]
    pub throttle: Vec<Text>,
    /// XID errors in the last window (count) and the most recent codes.
    #[serde(default)]
    pub xid_recent: u32,
    #[serde(default)]
    pub xid_last: Vec<u64>,
    /// Compute processes on this GPU: (host pid, used memory bytes).
    #[serde(default)]
    pub processes: Vec<(u32, u64)>,
}

/// Version 1 wrote the status as free text ("", "ok", "error: ...").
fn gpu_status<'de, D: serde::Deserializer<'de>>(d: D) -> Result<GpuStatus, D::Error> {
    let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
    Ok(match s.as_ref() {
        "" | "ok" => GpuStatus::Ok,
        "lost" => GpuStatus::Lost,
        "stale" => GpuStatus::Stale,
        _ => GpuStatus::Error,
    })
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Event {
    pub wall_ns: u64,
    pub kind: EventKind,
    pub message: Text,
}

impl Event {
    pub fn new(wall_ns: u64, kind: EventKind, message: impl AsRef<str>) -> Event {
        Event {
            wall_ns,
            kind,
            message: Text::message(message),
        }
    }
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
    /// The sampler was stalled and skipped ticks (no catch-up burst).
    SamplingGap,
    /// A view was slower than the sampler and skipped frames.
    FramesSkipped,
    /// A slow-window finding appeared (pinning, co-location).
    FindingFound,
    /// An RDMA port went down, slowed, narrowed or flapped.
    PortDegraded,
    /// An RDMA port is healthy again.
    PortRecovered,
    /// NCCL's RAS reported a rank missing, unresponsive or behind.
    NcclRas,
    /// Anything a newer kitty reports that this one does not know.
    #[serde(other)]
    Other,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Verdict {
    pub rank: Option<u32>,
    pub pid: u32,
    pub job: Option<Text>,
    pub signal: Sig,
    /// The rank's mean over the ticks it stood out since the verdict began.
    pub value: f64,
    /// Its largest value in that window.
    #[serde(default)]
    pub peak: f64,
    /// The peers' median, averaged over the same ticks.
    pub peer_median: f64,
    /// value / peer_median (a zero median lifted to 1 % of the rule's floor).
    pub ratio: f64,
    /// How far the rank stands from its peers, comparable across signals:
    /// its excess over the peers' median in units of the rule's floor (a
    /// flag counts as 10). A ratio against a near-zero median cannot
    /// outrank a real outlier.
    #[serde(default)]
    pub score: f64,
    pub for_s: f64,
    pub severity: Severity,
    pub message: Text,
    /// Set when the symptom lies on connections to a rank with a verdict of
    /// its own: this rank is that one's victim, not a straggler.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consequence_of: Option<Cause>,
    /// For run-queue verdicts: who held the rank's CPUs while it waited.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub culprits: Vec<Culprit>,
    /// What else explains it (a cgroup's quota and use; the busiest
    /// process on a slow link).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<Text>,
}

impl Verdict {
    pub fn is_consequence(&self) -> bool {
        self.consequence_of.is_some()
    }
}

/// The rank (and its verdict) another rank's symptom comes from.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Cause {
    pub rank: Option<u32>,
    pub pid: u32,
    pub signal: Sig,
    /// The connection the symptom was seen on, `local -> remote`.
    pub via: Text,
}

/// A task that took a rank's CPU while it waited.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Culprit {
    pub pid: u32,
    pub comm: Text,
    /// Set when the culprit is another rank (overlapping affinity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
    /// Its share of the rank's charged wait over the verdict, percent.
    pub share_pct: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_uid: Option<Text>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_id: Option<Text>,
    /// Named without the run-queue probe: the busiest process allowed on
    /// the rank's CPUs, not a measured charge.
    #[serde(default)]
    pub guess: bool,
}

named_enum! {
    /// What a finding is about.
    pub enum FindingKind {
        /// A small but steady run-queue delay far above the peers'.
        RunDelayAsymmetry = "run_delay_asymmetry",
        /// One rank unpinned among pinned peers, or different CPU counts.
        AffinityAsymmetry = "affinity_asymmetry",
        /// Steady cross-CPU migrations far above the peers'.
        MigrationAsymmetry = "migration_asymmetry",
        /// Pinned ranks whose CPU sets overlap.
        SharedCpus = "shared_cpus",
        /// A busy process that is not a rank may run on pinned ranks' CPUs.
        BusyNeighbour = "busy_neighbour",
        /// A rank whose CPUs are mostly on another NUMA node than its GPU
        /// or NIC.
        NumaMismatch = "numa_mismatch",
    }
}

/// A node whose every rank of a job has the same verdict: the node, not
/// one rank, is slow ("node gpu-017: all 8 ranks 3x the job's run delay").
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct NodeVerdict {
    pub node: Text,
    pub job: Option<Text>,
    pub signal: Sig,
    pub ranks: Vec<Option<u32>>,
    /// The ranks' mean ratio against their peers.
    pub ratio: f64,
    pub message: Text,
}

/// A slow-window observation about a job's placement (seed 003's
/// fingerprints): shown apart from verdicts, never a straggler.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Finding {
    pub kind: FindingKind,
    pub job: Option<Text>,
    /// The ranks it is about (pids), and their rank labels.
    pub pids: Vec<u32>,
    pub ranks: Vec<Option<u32>>,
    pub message: Text,
    /// What it points at ("pin the ranks", "move the process").
    pub remedy: Text,
    /// Seconds since it was first found.
    pub for_s: f64,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Warning,
    Critical,
}
