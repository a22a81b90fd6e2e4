//! The signal catalog: every signal kitty knows, as a typed id (`Sig`) with
//! its snake_case name, label, unit, source and meaning. Code names signals
//! only through `Sig`; the names are the strings at the edges (frames in
//! recordings, snapshot JSON, CSV, the exporter's mapping table).
//!
//! A signal that is not in the catalog cannot be used:
//!
//! ```compile_fail
//! let _ = kitty_core::model::Sig::NoSuchSignal;
//! ```

/// Where a signal lives in a frame (a bit set: one signal may live in several).
pub mod scope {
    pub const RANK: u8 = 1;
    pub const SOCKET: u8 = 2;
    pub const HOST: u8 = 4;
    pub const GPU: u8 = 8;
    pub const NETNS: u8 = 16;
    /// An RDMA port (InfiniBand, RoCE, EFA).
    pub const NIC: u8 = 32;
}

/// What a signal is, for help screens, verdict text, the README and exporters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignalInfo {
    pub sig: Sig,
    pub name: &'static str,
    /// Short label for verdict text ("run-queue delay").
    pub label: &'static str,
    pub unit: Unit,
    pub source: &'static str,
    pub meaning: &'static str,
    pub scopes: u8,
}

/// The unit a signal's value is in (also decides how it is formatted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// A plain count or level.
    Count,
    Percent,
    /// Per second.
    PerSec,
    MsPerSec,
    Micros,
    Bytes,
    BytesPerSec,
    Cpus,
    Mhz,
    Watts,
    Joules,
    Celsius,
    Millis,
    /// Gigabits per second (a link's signalling rate).
    Gbps,
    /// 0 or 1.
    Flag,
}

impl Unit {
    /// The suffix shown after a number ("ms/s", "%").
    pub fn suffix(self) -> &'static str {
        match self {
            Unit::Count | Unit::Flag => "",
            Unit::Percent => "%",
            Unit::PerSec => "/s",
            Unit::MsPerSec => "ms/s",
            Unit::Micros => "us",
            Unit::Bytes => "B",
            Unit::BytesPerSec => "B/s",
            Unit::Cpus => "cpus",
            Unit::Mhz => "MHz",
            Unit::Watts => "W",
            Unit::Joules => "J",
            Unit::Celsius => "C",
            Unit::Millis => "ms",
            Unit::Gbps => "Gb/s",
        }
    }
}

macro_rules! catalog {
    ($( $var:ident = $name:literal, $scopes:expr, $label:literal, $unit:ident, $source:literal, $meaning:literal; )*) => {
        /// A signal's typed id.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Sig { $( $var, )* }

        /// Every signal, in catalog order.
        pub const CATALOG: &[SignalInfo] = &[
            $( SignalInfo {
                sig: Sig::$var,
                name: $name,
                label: $label,
                unit: Unit::$unit,
                source: $source,
                meaning: $meaning,
                scopes: $scopes,
            }, )*
        ];

        impl Sig {
            /// The snake_case name used in frames, JSON and exports.
            pub const fn name(self) -> &'static str {
                match self { $( Sig::$var => $name, )* }
            }

            /// The signal of a name; None for a name kitty does not know
            /// (a newer recording, a typo in a script).
            pub fn from_name(name: &str) -> Option<Sig> {
                match name { $( $name => Some(Sig::$var), )* _ => None }
            }
        }
    };
}

use scope::{GPU, HOST, NETNS, NIC, RANK, SOCKET};

catalog! {
    CpuPct = "cpu_pct", RANK, "CPU", Percent, "iter/task or task/*/schedstat", "CPU time used, percent of one core";
    RunDelayMsPerS = "run_delay_ms_per_s", RANK, "run-queue delay", MsPerSec, "iter/task or task/*/schedstat", "time runnable but waiting for a CPU, summed over threads";
    MigrationsPerS = "migrations_per_s", RANK, "migrations", PerSec, "iter/task or task/*/sched", "cross-CPU migrations, summed over threads";
    AffinityCpus = "affinity_cpus", RANK, "affinity", Cpus, "status Cpus_allowed_list", "CPUs the process may run on";
    CfsThrottledMsPerS = "cfs_throttled_ms_per_s", RANK, "CFS throttling", MsPerSec, "cgroup cpu.stat", "time the rank's cgroup was throttled by its CPU quota";
    CtxVoluntaryPerS = "ctx_voluntary_per_s", RANK, "voluntary switches", PerSec, "status", "voluntary context switches";
    CtxInvoluntaryPerS = "ctx_involuntary_per_s", RANK, "involuntary switches", PerSec, "status", "involuntary context switches (preempted)";
    Threads = "threads", RANK, "threads", Count, "stat", "thread count";
    RssBytes = "rss_bytes", RANK, "RSS", Bytes, "status VmRSS", "resident memory";
    IoReadBytesPerS = "io_read_bytes_per_s", RANK, "disk read", BytesPerSec, "io", "bytes read from storage";
    IoWriteBytesPerS = "io_write_bytes_per_s", RANK, "disk write", BytesPerSec, "io", "bytes written to storage";
    Fds = "fds", RANK, "fds", Count, "fd/", "open file descriptors";
    Sockets = "sockets", RANK, "sockets", Count, "fd/", "open sockets of any kind";
    TcpSockets = "tcp_sockets", RANK, "TCP sockets", Count, "BPF socket run / sock_diag / net/tcp", "the rank's own TCP sockets";
    TxQueueBytes = "tx_queue_bytes", RANK, "tx queue", Bytes, "BPF socket run / sock_diag / net/tcp", "unacknowledged bytes queued to send, summed over sockets";
    RxQueueBytes = "rx_queue_bytes", RANK, "rx queue", Bytes, "BPF socket run / sock_diag / net/tcp", "received bytes not yet read, summed over sockets";
    NotsentBytes = "notsent_bytes", RANK, "not-sent", Bytes, "tcp_info", "bytes in the send buffer not yet sent";
    RetransPerS = "retrans_per_s", RANK | SOCKET, "retransmits", PerSec, "tcp_info", "retransmitted segments of the rank's sockets";
    OutSegsPerS = "out_segs_per_s", RANK | SOCKET | NETNS, "out segments", PerSec, "tcp_info", "segments sent by the rank's sockets";
    InSegsPerS = "in_segs_per_s", RANK | SOCKET | NETNS, "in segments", PerSec, "tcp_info", "segments received by the rank's sockets";
    BytesSentPerS = "bytes_sent_per_s", RANK | SOCKET, "sent", BytesPerSec, "tcp_info bytes_acked", "bytes sent and acknowledged";
    BytesRecvPerS = "bytes_recv_per_s", RANK | SOCKET, "received", BytesPerSec, "tcp_info bytes_received", "bytes received";
    BytesRetransPerS = "bytes_retrans_per_s", RANK | SOCKET, "retransmitted bytes", BytesPerSec, "tcp_info", "bytes retransmitted";
    SrttMaxUs = "srtt_max_us", RANK, "smoothed RTT", Micros, "tcp_info", "largest smoothed RTT among the rank's established sockets";
    MinRttUs = "min_rtt_us", RANK, "min RTT", Micros, "tcp_info", "smallest min_rtt among the rank's sockets";
    DeliveryRateBytesPerS = "delivery_rate_bytes_per_s", RANK, "delivery rate", BytesPerSec, "tcp_info", "summed delivery rate estimates";
    RwndLimitedMsPerS = "rwnd_limited_ms_per_s", RANK | SOCKET, "rwnd-limited", MsPerSec, "tcp_info", "time limited by the receiver's window (slow receiver)";
    SndbufLimitedMsPerS = "sndbuf_limited_ms_per_s", RANK | SOCKET, "sndbuf-limited", MsPerSec, "tcp_info", "time limited by the send buffer";
    BusyMsPerS = "busy_ms_per_s", RANK | SOCKET, "busy", MsPerSec, "tcp_info", "time with data in flight";
    RttP50Us = "rtt_p50_us", RANK | SOCKET, "raw RTT p50", Micros, "eBPF", "median raw RTT sample (eBPF probe)";
    RttP99Us = "rtt_p99_us", RANK, "raw RTT p99", Micros, "eBPF", "p99 raw RTT sample (eBPF probe)";
    RttMaxUs = "rtt_max_us", RANK, "raw RTT max", Micros, "eBPF", "largest raw RTT sample of the tick (eBPF probe)";
    LinkRttUs = "link_rtt_us", RANK, "link RTT", Micros, "eBPF", "lowest per-connection RTT median among the connections crossing the rank's link";
    RunqP50Us = "runq_p50_us", RANK, "run-queue latency p50", Micros, "eBPF sched", "median wait from runnable to running (eBPF probe)";
    RunqMaxUs = "runq_max_us", RANK, "run-queue latency max", Micros, "eBPF sched", "longest wait from runnable to running in the tick (eBPF probe)";
    RunqP99Us = "runq_p99_us", RANK, "run-queue latency p99", Micros, "eBPF sched", "p99 wait from runnable to running (eBPF probe)";
    GpuUtilPct = "gpu_util_pct", RANK, "GPU utilization", Percent, "NVML", "utilization of the rank's GPU";
    GpuSmClockMhz = "gpu_sm_clock_mhz", RANK, "GPU SM clock", Mhz, "NVML", "SM clock of the rank's GPU";
    GpuSmActivePct = "gpu_sm_active_pct", RANK, "GPU SM activity", Percent, "NVML GPM", "SM activity of the rank's GPU (Hopper+)";
    GpuThrottleSlowing = "gpu_throttle_slowing", RANK, "GPU throttled", Flag, "NVML", "1 when the rank's GPU is slowed (power cap, HW slowdown, thermal, power brake)";
    GpuXidRecent = "gpu_xid_recent", RANK, "GPU XID errors", Count, "NVML events", "XID errors of the rank's GPU in the last 5 minutes";
    GpuLost = "gpu_lost", RANK, "GPU lost", Flag, "NVML", "1 when the rank's GPU fell off the bus";
    GpuPowerW = "gpu_power_w", RANK, "GPU power", Watts, "NVML", "power draw of the rank's GPU";
    GpuTempC = "gpu_temp_c", RANK, "GPU temperature", Celsius, "NVML", "temperature of the rank's GPU";
    GpuMemUsedBytes = "gpu_mem_used_bytes", RANK, "GPU memory", Bytes, "NVML processes", "GPU memory the rank's process uses";
    GpuProcSmUtilPct = "gpu_proc_sm_util_pct", RANK, "GPU SM util (process)", Percent, "NVML process samples", "SM utilization of the rank's own process";
    NcclLateMs = "nccl_late_ms", RANK, "late to collectives", Millis, "NCCL Inspector", "how much later than its peers the rank arrives at the same collective (their median exec time minus its own), median over the tick's collectives";
    NcclExecMs = "nccl_exec_ms", RANK, "collective time", Millis, "NCCL Inspector", "median collective execution time of the tick";
    NcclBusbwBytesPerS = "nccl_busbw_bytes_per_s", RANK, "bus bandwidth", BytesPerSec, "NCCL Inspector", "median bus bandwidth of the tick's collectives";
    NcclCollsBehind = "nccl_colls_behind", RANK, "collectives behind", Count, "NCCL RAS", "collectives the rank has completed fewer than the most advanced rank of its communicator";
    NcclRasMissing = "nccl_ras_missing", RANK, "missing in NCCL RAS", Flag, "NCCL RAS", "1 when NCCL's RAS reports the rank missing or unresponsive";

    RdmaXmitWaitPerS = "rdma_xmit_wait_per_s", RANK | NIC, "RDMA xmit wait", PerSec, "counters/port_xmit_wait", "ticks the port had data to send but no credits (congestion), summed over the rank's ports";
    RdmaCnpPerS = "rdma_cnp_per_s", RANK | NIC, "RoCE CNPs", PerSec, "hw_counters np_cnp_sent + rp_cnp_handled", "congestion notification packets sent and handled";
    RdmaEcnMarkedPerS = "rdma_ecn_marked_per_s", RANK | NIC, "RoCE ECN marks", PerSec, "hw_counters np_ecn_marked_roce_packets", "RoCE packets that arrived ECN-marked";
    RdmaPausePerS = "rdma_pause_per_s", RANK | NIC, "PFC pauses", PerSec, "ethtool rx/tx_prio*_pause", "PFC pause frames received and sent, all priorities";
    RdmaPauseUsPerS = "rdma_pause_us_per_s", NIC, "PFC pause time", PerSec, "ethtool *_pause_duration", "microseconds paused per second, all priorities";
    RdmaRetransPerS = "rdma_retrans_per_s", RANK | NIC, "RDMA retransmits", PerSec, "hw_counters", "out-of-sequence, sequence errors, ack timeouts, RNR retries, adaptive retransmits (EFA: retrans_pkts)";
    RdmaErrorsPerS = "rdma_errors_per_s", RANK | NIC, "RDMA link errors", PerSec, "counters", "receive, symbol, link recovery, link integrity and buffer overrun errors";
    RdmaDiscardsPerS = "rdma_discards_per_s", NIC, "RDMA discards", PerSec, "counters/port_xmit_discards, EFA rx_drops", "packets dropped";
    RdmaOutOfBufferPerS = "rdma_out_of_buffer_per_s", RANK | NIC, "RDMA out of buffer", PerSec, "hw_counters/out_of_buffer", "packets dropped for lack of receive buffers (a slow receiver)";
    RdmaTxBytesPerS = "rdma_tx_bytes_per_s", RANK | NIC, "RDMA sent", BytesPerSec, "counters/port_xmit_data x4, EFA tx_bytes", "bytes sent by the port";
    RdmaRxBytesPerS = "rdma_rx_bytes_per_s", RANK | NIC, "RDMA received", BytesPerSec, "counters/port_rcv_data x4, EFA rx_bytes", "bytes received by the port";
    RdmaTxPacketsPerS = "rdma_tx_packets_per_s", NIC, "RDMA tx packets", PerSec, "counters/port_xmit_packets, EFA tx_pkts", "packets sent";
    RdmaRxPacketsPerS = "rdma_rx_packets_per_s", NIC, "RDMA rx packets", PerSec, "counters/port_rcv_packets, EFA rx_pkts", "packets received";
    RdmaRateGbps = "rdma_rate_gbps", NIC, "link rate", Gbps, "ports/N/rate", "signalling rate of the port";
    RdmaWidth = "rdma_width", NIC, "link width", Count, "ports/N/rate", "lanes of the port (4 for 4X)";
    RdmaActive = "rdma_active", NIC, "port active", Flag, "ports/N/state", "1 when the port's logical state is ACTIVE";
    RdmaFlaps = "rdma_flaps", NIC, "link flaps", Count, "counters/link_downed", "times the link went down in the last 5 minutes";
    RdmaPortDegraded = "rdma_port_degraded", RANK | NIC, "RDMA port degraded", Flag, "sysfs", "1 when the port is down, slower or narrower than the node's other ports, or flapping";

    UtilPct = "util_pct", GPU, "util", Percent, "NVML", "GPU utilization";
    MemUtilPct = "mem_util_pct", GPU, "mem util", Percent, "NVML", "memory controller utilization";
    MemUsedBytes = "mem_used_bytes", GPU, "mem used", Bytes, "NVML", "memory used";
    MemTotalBytes = "mem_total_bytes", GPU, "mem total", Bytes, "NVML", "memory size";
    PowerW = "power_w", GPU, "power", Watts, "NVML", "power draw";
    EnergyJ = "energy_j", GPU, "energy", Joules, "NVML", "energy since driver load";
    EnergyW = "energy_w", GPU, "energy rate", Watts, "NVML", "energy per second between polls";
    TempC = "temp_c", GPU, "temperature", Celsius, "NVML", "GPU temperature";
    SmClockMhz = "sm_clock_mhz", GPU, "SM clock", Mhz, "NVML", "SM clock";
    SmClockMaxMhz = "sm_clock_max_mhz", GPU, "SM clock max", Mhz, "NVML", "maximum SM clock";
    MemClockMhz = "mem_clock_mhz", GPU, "mem clock", Mhz, "NVML", "memory clock";
    MemClockMaxMhz = "mem_clock_max_mhz", GPU, "mem clock max", Mhz, "NVML", "maximum memory clock";
    PcieRxBytesPerS = "pcie_rx_bytes_per_s", GPU, "PCIe rx", BytesPerSec, "NVML", "PCIe receive throughput";
    PcieTxBytesPerS = "pcie_tx_bytes_per_s", GPU, "PCIe tx", BytesPerSec, "NVML", "PCIe transmit throughput";
    PcieGen = "pcie_gen", GPU, "PCIe gen", Count, "NVML", "current PCIe link generation";
    PcieWidth = "pcie_width", GPU, "PCIe width", Count, "NVML", "current PCIe link width";
    EccSbeVolatile = "ecc_sbe_volatile", GPU, "ECC SBE", Count, "NVML", "corrected (single-bit) ECC errors since boot";
    EccDbeVolatile = "ecc_dbe_volatile", GPU, "ECC DBE", Count, "NVML", "uncorrected (double-bit) ECC errors since boot";
    RetiredPages = "retired_pages", GPU, "retired pages", Count, "NVML", "pages retired for ECC errors (pre-Ampere)";
    ThrottleSlowing = "throttle_slowing", GPU, "throttled", Flag, "NVML", "1 when a slowing clock event reason is active";
    XidRecent = "xid_recent", GPU, "XIDs", Count, "NVML events", "XID errors in the last 5 minutes";
    NvlinkActiveLinks = "nvlink_active_links", GPU, "NVLinks", Count, "NVML", "active NVLink links";
    NvlinkCrcErrors = "nvlink_crc_errors", GPU, "NVLink CRC", Count, "NVML", "NVLink CRC (flit + data) errors, all links";
    NvlinkReplayErrors = "nvlink_replay_errors", GPU, "NVLink replay", Count, "NVML", "NVLink replay errors, all links";
    NvlinkRecoveryErrors = "nvlink_recovery_errors", GPU, "NVLink recovery", Count, "NVML", "NVLink recovery errors, all links";
    NvlinkTxBytesPerS = "nvlink_tx_bytes_per_s", GPU, "NVLink tx", BytesPerSec, "NVML field values", "NVLink data sent";
    NvlinkRxBytesPerS = "nvlink_rx_bytes_per_s", GPU, "NVLink rx", BytesPerSec, "NVML field values", "NVLink data received";
    SmActivePct = "sm_active_pct", GPU, "SM active", Percent, "NVML GPM", "SM activity (Hopper+)";
    SmOccupancyPct = "sm_occupancy_pct", GPU, "SM occupancy", Percent, "NVML GPM", "SM occupancy (Hopper+)";
    TensorActivePct = "tensor_active_pct", GPU, "tensor active", Percent, "NVML GPM", "tensor pipe activity (Hopper+)";
    DramBwUtilPct = "dram_bw_util_pct", GPU, "DRAM bandwidth", Percent, "NVML GPM", "DRAM bandwidth utilization (Hopper+)";

    ExecsPerS = "execs_per_s", HOST, "execs", PerSec, "eBPF exec", "execve calls on the node per second";
    FlowCoveragePct = "flow_coverage_pct", HOST, "flow coverage", Percent, "eBPF flows", "share of the interfaces' bytes that the flow probe attributed to a process";
    TcpClosedPerS = "tcp_closed_per_s", HOST, "TCP closes", PerSec, "eBPF flows", "TCP connections closed per second on the node";
    CpuUtilPct = "cpu_util_pct", HOST, "host CPU", Percent, "/proc/stat", "busy share of all CPUs";
    ProcsRunning = "procs_running", HOST, "running", Count, "/proc/stat", "runnable tasks";
    ProcsBlocked = "procs_blocked", HOST, "blocked", Count, "/proc/stat", "tasks blocked on I/O";
    Load1 = "load1", HOST, "load", Count, "/proc/loadavg", "1-minute load average";
    MemAvailableBytes = "mem_available_bytes", HOST, "available", Bytes, "/proc/meminfo", "MemAvailable";
    MemUsedPct = "mem_used_pct", HOST, "memory used", Percent, "/proc/meminfo", "1 - MemAvailable/MemTotal";
    ShmUsedBytes = "shm_used_bytes", HOST, "/dev/shm used", Bytes, "statvfs", "shared memory in use (NCCL buffers live here)";
    ShmTotalBytes = "shm_total_bytes", HOST, "/dev/shm size", Bytes, "statvfs", "size of /dev/shm";
    PsiCpuSomePct = "psi_cpu_some_pct", HOST, "CPU pressure", Percent, "/proc/pressure/cpu", "PSI some avg10";
    PsiMemorySomePct = "psi_memory_some_pct", HOST, "memory pressure", Percent, "/proc/pressure/memory", "PSI some avg10";
    PsiIoSomePct = "psi_io_some_pct", HOST, "I/O pressure", Percent, "/proc/pressure/io", "PSI some avg10";

    RetransSegsPerS = "retrans_segs_per_s", NETNS, "retransmitted segments", PerSec, "net/snmp", "Tcp RetransSegs of the namespace";
    TimeoutsPerS = "timeouts_per_s", NETNS, "TCP timeouts", PerSec, "net/netstat", "TcpExt TCPTimeouts of the namespace";
}

impl Sig {
    pub fn info(self) -> &'static SignalInfo {
        // The catalog lists the variants in declaration order.
        &CATALOG[self as usize]
    }

    pub fn label(self) -> &'static str {
        self.info().label
    }

    pub fn unit(self) -> Unit {
        self.info().unit
    }

    /// Rank signals that come from the rank's RDMA ports (the catalog's
    /// signals of both scopes): summed over its ports, their verdicts light
    /// the NIC cell.
    pub fn from_rdma_ports() -> impl Iterator<Item = Sig> {
        Sig::in_scope(scope::NIC).filter(|s| s.info().scopes & scope::RANK != 0)
    }

    /// The signals that live in one scope, in catalog order.
    pub fn in_scope(scope: u8) -> impl Iterator<Item = Sig> {
        CATALOG
            .iter()
            .filter(move |i| i.scopes & scope != 0)
            .map(|i| i.sig)
    }
}

/// The signals of one scope as a Markdown table (the README's copies,
/// checked by a test so they cannot go stale).
pub fn markdown_table(scope: u8) -> String {
    let mut t = String::from("| signal | meaning | source | unit |\n|---|---|---|---|\n");
    for i in CATALOG.iter().filter(|i| i.scopes & scope != 0) {
        let unit = match i.unit.suffix() {
            "" => "-",
            u => u,
        };
        t.push_str(&format!(
            "| `{}` | {} | {} | {unit} |\n",
            i.name, i.meaning, i.source
        ));
    }
    t
}

impl std::fmt::Display for Sig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl serde::Serialize for Sig {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for Sig {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Sig::from_name(&name)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown signal {name:?}")))
    }
}

/// How a GPU's own signal joins the comparison of the ranks it serves:
/// (GPU signal, the rank signal it becomes). The one place that says so.
pub const GPU_TO_RANK: &[(Sig, Sig)] = &[
    (Sig::UtilPct, Sig::GpuUtilPct),
    (Sig::SmClockMhz, Sig::GpuSmClockMhz),
    (Sig::ThrottleSlowing, Sig::GpuThrottleSlowing),
    (Sig::XidRecent, Sig::GpuXidRecent),
    (Sig::SmActivePct, Sig::GpuSmActivePct),
    (Sig::PowerW, Sig::GpuPowerW),
    (Sig::TempC, Sig::GpuTempC),
];

/// Rank signals that come from the rank's GPU (their verdicts light the GPU cell).
pub const GPU_RANK_SIGNALS: &[Sig] = &[
    Sig::GpuLost,
    Sig::GpuThrottleSlowing,
    Sig::GpuXidRecent,
    Sig::GpuSmClockMhz,
    Sig::GpuSmActivePct,
    Sig::GpuUtilPct,
    Sig::GpuPowerW,
    Sig::GpuTempC,
    Sig::GpuMemUsedBytes,
    Sig::GpuProcSmUtilPct,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_readme_carries_the_current_signal_tables() {
        let readme = include_str!("../../../README.md");
        for (what, sc) in [
            ("rank", scope::RANK),
            ("host", scope::HOST),
            ("gpu", scope::GPU),
            ("netns", scope::NETNS),
            ("nic", scope::NIC),
        ] {
            let t = markdown_table(sc);
            assert!(
                readme.contains(&t),
                "README's {what} signal table is stale; the current one:\n{t}"
            );
        }
    }

    #[test]
    fn catalog_is_in_variant_order_with_unique_snake_case_names() {
        let mut names = std::collections::HashSet::new();
        for (i, s) in CATALOG.iter().enumerate() {
            assert_eq!(s.sig as usize, i, "{} out of order", s.name);
            assert!(names.insert(s.name), "duplicate {}", s.name);
            assert!(
                s.name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
                "{}",
                s.name
            );
            assert_eq!(Sig::from_name(s.name), Some(s.sig));
            assert!(s.scopes != 0, "{} has no scope", s.name);
        }
        assert_eq!(Sig::from_name("no_such_signal"), None);
    }

    #[test]
    fn names_round_trip_through_json() {
        let j = serde_json::to_string(&Sig::RunDelayMsPerS).unwrap();
        assert_eq!(j, "\"run_delay_ms_per_s\"");
        assert_eq!(
            serde_json::from_str::<Sig>(&j).unwrap(),
            Sig::RunDelayMsPerS
        );
        assert!(serde_json::from_str::<Sig>("\"bogus\"").is_err());
    }

    #[test]
    fn gpu_join_table_stays_in_its_scopes() {
        for (g, r) in GPU_TO_RANK {
            assert!(g.info().scopes & GPU != 0 && r.info().scopes & RANK != 0);
            assert!(GPU_RANK_SIGNALS.contains(r));
        }
    }

    /// No signal name is spelt as a string literal in kitty's source outside
    /// this catalog: code must name signals through `Sig`. (Tests and the
    /// JSON edges in end-to-end tests read names from documents, not code.)
    #[test]
    fn no_signal_name_is_written_as_a_string_in_code() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut offenders = Vec::new();
        for krate in ["kitty-core/src", "kitty-probe-ebpf/src", "kitty-tui/src"] {
            scan(&root.join(krate), &mut offenders);
        }
        assert!(
            offenders.is_empty(),
            "signal names as strings: {offenders:#?}"
        );
    }

    fn scan(dir: &std::path::Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                scan(&p, out);
                continue;
            }
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            // The catalog itself, and test modules (which check the edges).
            if p.extension().is_none_or(|x| x != "rs") || name == "signal.rs" || name == "tests.rs"
            {
                continue;
            }
            let text = std::fs::read_to_string(&p).unwrap();
            let code = text.split("#[cfg(test)]").next().unwrap_or("");
            // A line may say why a look-alike string is not a signal.
            for line in code.lines().filter(|l| !l.contains("not a signal")) {
                for s in CATALOG {
                    if line.contains(&format!("\"{}\"", s.name)) {
                        out.push(format!("{}: {}", p.display(), s.name));
                    }
                }
            }
        }
    }
}
