//! The signal catalog (names, units, sources, meaning) and the derivation of
//! rates from two samples. Names are the contract: snapshot JSON keys,
//! Prometheus names (`kitty_<name>`), TUI columns.

use crate::frame::{Signals, TcpInfo};

/// What a signal is, for help screens, the README and exporters.
#[derive(Debug, Clone, Copy)]
pub struct SignalInfo {
    pub name: &'static str,
    /// Short label for verdict text ("run-queue delay").
    pub label: &'static str,
    pub unit: &'static str,
    pub source: &'static str,
    pub meaning: &'static str,
}

macro_rules! sig {
    ($n:expr, $l:expr, $u:expr, $s:expr, $m:expr) => {
        SignalInfo {
            name: $n,
            label: $l,
            unit: $u,
            source: $s,
            meaning: $m,
        }
    };
}

/// Per-rank signals.
pub const RANK_SIGNALS: &[SignalInfo] = &[
    sig!(
        "cpu_pct",
        "CPU",
        "%",
        "task/*/schedstat",
        "CPU time used, percent of one core"
    ),
    sig!(
        "run_delay_ms_per_s",
        "run-queue delay",
        "ms/s",
        "task/*/schedstat",
        "time runnable but waiting for a CPU, summed over threads"
    ),
    sig!(
        "migrations_per_s",
        "migrations",
        "/s",
        "task/*/sched",
        "cross-CPU migrations, summed over threads"
    ),
    sig!(
        "affinity_cpus",
        "affinity",
        "cpus",
        "status Cpus_allowed_list",
        "CPUs the process may run on"
    ),
    sig!(
        "cfs_throttled_ms_per_s",
        "CFS throttling",
        "ms/s",
        "cgroup cpu.stat",
        "time the rank's cgroup was throttled by its CPU quota"
    ),
    sig!(
        "ctx_voluntary_per_s",
        "voluntary switches",
        "/s",
        "status",
        "voluntary context switches"
    ),
    sig!(
        "ctx_involuntary_per_s",
        "involuntary switches",
        "/s",
        "status",
        "involuntary context switches (preempted)"
    ),
    sig!("threads", "threads", "", "stat", "thread count"),
    sig!("rss_bytes", "RSS", "B", "status VmRSS", "resident memory"),
    sig!(
        "io_read_bytes_per_s",
        "disk read",
        "B/s",
        "io",
        "bytes read from storage"
    ),
    sig!(
        "io_write_bytes_per_s",
        "disk write",
        "B/s",
        "io",
        "bytes written to storage"
    ),
    sig!("fds", "fds", "", "fd/", "open file descriptors"),
    sig!("sockets", "sockets", "", "fd/", "open sockets of any kind"),
    sig!(
        "tcp_sockets",
        "TCP sockets",
        "",
        "sock_diag / net/tcp",
        "the rank's own TCP sockets"
    ),
    sig!(
        "tx_queue_bytes",
        "tx queue",
        "B",
        "sock_diag / net/tcp",
        "unacknowledged bytes queued to send, summed over sockets"
    ),
    sig!(
        "rx_queue_bytes",
        "rx queue",
        "B",
        "sock_diag / net/tcp",
        "received bytes not yet read, summed over sockets"
    ),
    sig!(
        "notsent_bytes",
        "not-sent",
        "B",
        "tcp_info",
        "bytes in the send buffer not yet sent"
    ),
    sig!(
        "retrans_per_s",
        "retransmits",
        "/s",
        "tcp_info",
        "retransmitted segments of the rank's sockets"
    ),
    sig!(
        "out_segs_per_s",
        "out segments",
        "/s",
        "tcp_info",
        "segments sent by the rank's sockets"
    ),
    sig!(
        "in_segs_per_s",
        "in segments",
        "/s",
        "tcp_info",
        "segments received by the rank's sockets"
    ),
    sig!(
        "bytes_sent_per_s",
        "sent",
        "B/s",
        "tcp_info bytes_acked",
        "bytes sent and acknowledged"
    ),
    sig!(
        "bytes_recv_per_s",
        "received",
        "B/s",
        "tcp_info bytes_received",
        "bytes received"
    ),
    sig!(
        "bytes_retrans_per_s",
        "retransmitted bytes",
        "B/s",
        "tcp_info",
        "bytes retransmitted"
    ),
    sig!(
        "srtt_max_us",
        "smoothed RTT",
        "us",
        "tcp_info",
        "largest smoothed RTT among the rank's established sockets"
    ),
    sig!(
        "min_rtt_us",
        "min RTT",
        "us",
        "tcp_info",
        "smallest min_rtt among the rank's sockets"
    ),
    sig!(
        "delivery_rate_bytes_per_s",
        "delivery rate",
        "B/s",
        "tcp_info",
        "summed delivery rate estimates"
    ),
    sig!(
        "rwnd_limited_ms_per_s",
        "rwnd-limited",
        "ms/s",
        "tcp_info",
        "time limited by the receiver's window (slow receiver)"
    ),
    sig!(
        "sndbuf_limited_ms_per_s",
        "sndbuf-limited",
        "ms/s",
        "tcp_info",
        "time limited by the send buffer"
    ),
    sig!(
        "busy_ms_per_s",
        "busy",
        "ms/s",
        "tcp_info",
        "time with data in flight"
    ),
    sig!(
        "rtt_p50_us",
        "raw RTT p50",
        "us",
        "eBPF",
        "median raw RTT sample (eBPF probe)"
    ),
    sig!(
        "rtt_p99_us",
        "raw RTT p99",
        "us",
        "eBPF",
        "p99 raw RTT sample (eBPF probe)"
    ),
    sig!(
        "rtt_max_us",
        "raw RTT max",
        "us",
        "eBPF",
        "largest raw RTT sample of the tick (eBPF probe)"
    ),
    sig!(
        "link_rtt_us",
        "link RTT",
        "us",
        "eBPF",
        "lowest per-connection RTT median among the connections crossing the rank's link"
    ),
    sig!(
        "runq_p50_us",
        "run-queue latency p50",
        "us",
        "eBPF sched",
        "median wait from runnable to running (eBPF probe)"
    ),
    sig!(
        "runq_max_us",
        "run-queue latency max",
        "us",
        "eBPF sched",
        "longest wait from runnable to running in the tick (eBPF probe)"
    ),
    sig!(
        "runq_p99_us",
        "run-queue latency p99",
        "us",
        "eBPF",
        "p99 wakeup-to-run latency (eBPF probe)"
    ),
    sig!(
        "gpu_util_pct",
        "GPU utilization",
        "%",
        "NVML",
        "utilization of the rank's GPU"
    ),
    sig!(
        "gpu_sm_clock_mhz",
        "GPU SM clock",
        "MHz",
        "NVML",
        "SM clock of the rank's GPU"
    ),
    sig!(
        "gpu_sm_active_pct",
        "GPU SM activity",
        "%",
        "NVML GPM",
        "SM activity of the rank's GPU (Hopper+)"
    ),
    sig!(
        "gpu_throttle_slowing",
        "GPU throttled",
        "",
        "NVML",
        "1 when the rank's GPU is slowed (power cap, HW slowdown, thermal, power brake)"
    ),
    sig!(
        "gpu_xid_recent",
        "GPU XID errors",
        "",
        "NVML events",
        "XID errors of the rank's GPU in the last 5 minutes"
    ),
    sig!(
        "gpu_lost",
        "GPU lost",
        "",
        "NVML",
        "1 when the rank's GPU fell off the bus"
    ),
    sig!(
        "gpu_power_w",
        "GPU power",
        "W",
        "NVML",
        "power draw of the rank's GPU"
    ),
    sig!(
        "gpu_temp_c",
        "GPU temperature",
        "C",
        "NVML",
        "temperature of the rank's GPU"
    ),
    sig!(
        "gpu_mem_used_bytes",
        "GPU memory",
        "B",
        "NVML processes",
        "GPU memory the rank's process uses"
    ),
    sig!(
        "gpu_proc_sm_util_pct",
        "GPU SM util (process)",
        "%",
        "NVML process samples",
        "SM utilization of the rank's own process"
    ),
];

/// Per-GPU signals (`gpus[].signals`).
pub const GPU_SIGNALS: &[SignalInfo] = &[
    sig!("util_pct", "util", "%", "NVML", "GPU utilization"),
    sig!(
        "mem_util_pct",
        "mem util",
        "%",
        "NVML",
        "memory controller utilization"
    ),
    sig!("mem_used_bytes", "mem used", "B", "NVML", "memory used"),
    sig!("mem_total_bytes", "mem total", "B", "NVML", "memory size"),
    sig!("power_w", "power", "W", "NVML", "power draw"),
    sig!(
        "energy_j",
        "energy",
        "J",
        "NVML",
        "energy since driver load"
    ),
    sig!(
        "energy_w",
        "energy rate",
        "W",
        "NVML",
        "energy per second between polls"
    ),
    sig!("temp_c", "temperature", "C", "NVML", "GPU temperature"),
    sig!("sm_clock_mhz", "SM clock", "MHz", "NVML", "SM clock"),
    sig!(
        "sm_clock_max_mhz",
        "SM clock max",
        "MHz",
        "NVML",
        "maximum SM clock"
    ),
    sig!("mem_clock_mhz", "mem clock", "MHz", "NVML", "memory clock"),
    sig!(
        "mem_clock_max_mhz",
        "mem clock max",
        "MHz",
        "NVML",
        "maximum memory clock"
    ),
    sig!(
        "pcie_rx_bytes_per_s",
        "PCIe rx",
        "B/s",
        "NVML",
        "PCIe receive throughput"
    ),
    sig!(
        "pcie_tx_bytes_per_s",
        "PCIe tx",
        "B/s",
        "NVML",
        "PCIe transmit throughput"
    ),
    sig!(
        "pcie_gen",
        "PCIe gen",
        "",
        "NVML",
        "current PCIe link generation"
    ),
    sig!(
        "pcie_width",
        "PCIe width",
        "",
        "NVML",
        "current PCIe link width"
    ),
    sig!(
        "ecc_sbe_volatile",
        "ECC SBE",
        "",
        "NVML",
        "corrected (single-bit) ECC errors since boot"
    ),
    sig!(
        "ecc_dbe_volatile",
        "ECC DBE",
        "",
        "NVML",
        "uncorrected (double-bit) ECC errors since boot"
    ),
    sig!(
        "retired_pages",
        "retired pages",
        "",
        "NVML",
        "pages retired for ECC errors (pre-Ampere)"
    ),
    sig!(
        "throttle_slowing",
        "throttled",
        "",
        "NVML",
        "1 when a slowing clock event reason is active"
    ),
    sig!(
        "xid_recent",
        "XIDs",
        "",
        "NVML events",
        "XID errors in the last 5 minutes"
    ),
    sig!(
        "nvlink_active_links",
        "NVLinks",
        "",
        "NVML",
        "active NVLink links"
    ),
    sig!(
        "nvlink_crc_errors",
        "NVLink CRC",
        "",
        "NVML",
        "NVLink CRC (flit + data) errors, all links"
    ),
    sig!(
        "nvlink_replay_errors",
        "NVLink replay",
        "",
        "NVML",
        "NVLink replay errors, all links"
    ),
    sig!(
        "nvlink_recovery_errors",
        "NVLink recovery",
        "",
        "NVML",
        "NVLink recovery errors, all links"
    ),
    sig!(
        "nvlink_tx_bytes_per_s",
        "NVLink tx",
        "B/s",
        "NVML field values",
        "NVLink data sent"
    ),
    sig!(
        "nvlink_rx_bytes_per_s",
        "NVLink rx",
        "B/s",
        "NVML field values",
        "NVLink data received"
    ),
    sig!(
        "sm_active_pct",
        "SM active",
        "%",
        "NVML GPM",
        "SM activity (Hopper+)"
    ),
    sig!(
        "sm_occupancy_pct",
        "SM occupancy",
        "%",
        "NVML GPM",
        "SM occupancy (Hopper+)"
    ),
    sig!(
        "tensor_active_pct",
        "tensor active",
        "%",
        "NVML GPM",
        "tensor pipe activity (Hopper+)"
    ),
    sig!(
        "dram_bw_util_pct",
        "DRAM bandwidth",
        "%",
        "NVML GPM",
        "DRAM bandwidth utilization (Hopper+)"
    ),
];

/// Host signals.
pub const HOST_SIGNALS: &[SignalInfo] = &[
    sig!(
        "execs_per_s",
        "execs",
        "/s",
        "eBPF exec",
        "execve calls on the node per second"
    ),
    sig!(
        "flow_coverage_pct",
        "flow coverage",
        "%",
        "eBPF flows",
        "share of the interfaces' bytes that the flow probe attributed to a process"
    ),
    sig!(
        "tcp_closed_per_s",
        "TCP closes",
        "/s",
        "eBPF flows",
        "TCP connections closed per second on the node"
    ),
    sig!(
        "cpu_util_pct",
        "host CPU",
        "%",
        "/proc/stat",
        "busy share of all CPUs"
    ),
    sig!(
        "procs_running",
        "running",
        "",
        "/proc/stat",
        "runnable tasks"
    ),
    sig!(
        "procs_blocked",
        "blocked",
        "",
        "/proc/stat",
        "tasks blocked on I/O"
    ),
    sig!(
        "load1",
        "load",
        "",
        "/proc/loadavg",
        "1-minute load average"
    ),
    sig!(
        "mem_available_bytes",
        "available",
        "B",
        "/proc/meminfo",
        "MemAvailable"
    ),
    sig!(
        "mem_used_pct",
        "memory used",
        "%",
        "/proc/meminfo",
        "1 - MemAvailable/MemTotal"
    ),
    sig!(
        "shm_used_bytes",
        "/dev/shm used",
        "B",
        "statvfs",
        "shared memory in use (NCCL buffers live here)"
    ),
    sig!(
        "shm_total_bytes",
        "/dev/shm size",
        "B",
        "statvfs",
        "size of /dev/shm"
    ),
    sig!(
        "psi_cpu_some_pct",
        "CPU pressure",
        "%",
        "/proc/pressure/cpu",
        "PSI some avg10"
    ),
    sig!(
        "psi_memory_some_pct",
        "memory pressure",
        "%",
        "/proc/pressure/memory",
        "PSI some avg10"
    ),
    sig!(
        "psi_io_some_pct",
        "I/O pressure",
        "%",
        "/proc/pressure/io",
        "PSI some avg10"
    ),
];

pub fn info(name: &str) -> Option<&'static SignalInfo> {
    RANK_SIGNALS
        .iter()
        .chain(HOST_SIGNALS)
        .find(|s| s.name == name)
}

/// Formats a value with its unit in a compact, human way ("1.2 MB/s", "51 ms").
pub fn format_value(name: &str, v: f64) -> String {
    let unit = info(name).map(|i| i.unit).unwrap_or("");
    match unit {
        "us" => {
            if v >= 1000.0 {
                format!("{} ms", trim(v / 1000.0))
            } else {
                format!("{} us", trim(v))
            }
        }
        "B" | "B/s" => format!("{}{}", bytes(v), &unit[1..]),
        "" => trim(v),
        u => format!("{} {u}", trim(v)),
    }
}

fn trim(v: f64) -> String {
    let a = v.abs();
    if a >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

pub fn bytes(v: f64) -> String {
    const U: [&str; 5] = ["B", "KB", "MB", "GB", "TB"];
    let mut x = v;
    let mut i = 0;
    while x.abs() >= 1000.0 && i < U.len() - 1 {
        x /= 1000.0;
        i += 1;
    }
    if i == 0 {
        format!("{x:.0} B")
    } else {
        format!("{} {}", trim(x), U[i])
    }
}

/// A counter difference per second that never goes negative: a counter that
/// went backwards (pid reuse, reset, namespace change) yields None.
pub fn rate(prev: u64, cur: u64, dt_s: f64) -> Option<f64> {
    (cur >= prev && dt_s > 0.0).then(|| (cur - prev) as f64 / dt_s)
}

/// Per-socket deltas of tcp_info counters; a socket without a previous value
/// was opened during the interval and counts from zero.
#[derive(Debug, Default, Clone, Copy)]
pub struct TcpDeltas {
    pub retrans: u64,
    pub segs_out: u64,
    pub segs_in: u64,
    pub bytes_acked: u64,
    pub bytes_received: u64,
    pub bytes_retrans: u64,
    pub rwnd_limited_us: u64,
    pub sndbuf_limited_us: u64,
    pub busy_us: u64,
}

impl TcpDeltas {
    pub fn add(&mut self, prev: Option<&TcpInfo>, cur: &TcpInfo) {
        let d64 = |p: Option<u64>, c: Option<u64>| c.unwrap_or(0).saturating_sub(p.unwrap_or(0));
        // 32-bit counters wrap; a wrapped difference is still right modulo 2^32.
        let d32 =
            |p: Option<u32>, c: Option<u32>| c.unwrap_or(0).wrapping_sub(p.unwrap_or(0)) as u64;
        let p = prev.cloned().unwrap_or_default();
        self.retrans += d32(Some(p.total_retrans), Some(cur.total_retrans));
        self.segs_out += d32(p.segs_out, cur.segs_out);
        self.segs_in += d32(p.segs_in, cur.segs_in);
        self.bytes_acked += d64(p.bytes_acked, cur.bytes_acked);
        self.bytes_received += d64(p.bytes_received, cur.bytes_received);
        self.bytes_retrans += d64(p.bytes_retrans, cur.bytes_retrans);
        self.rwnd_limited_us += d64(p.rwnd_limited_us, cur.rwnd_limited_us);
        self.sndbuf_limited_us += d64(p.sndbuf_limited_us, cur.sndbuf_limited_us);
        self.busy_us += d64(p.busy_time_us, cur.busy_time_us);
    }

    pub fn write(&self, dt_s: f64, out: &mut Signals) {
        let mut put = |k: &str, v: f64| {
            out.insert(k.to_string(), v / dt_s);
        };
        put("retrans_per_s", self.retrans as f64);
        put("out_segs_per_s", self.segs_out as f64);
        put("in_segs_per_s", self.segs_in as f64);
        put("bytes_sent_per_s", self.bytes_acked as f64);
        put("bytes_recv_per_s", self.bytes_received as f64);
        put("bytes_retrans_per_s", self.bytes_retrans as f64);
        put(
            "rwnd_limited_ms_per_s",
            self.rwnd_limited_us as f64 / 1000.0,
        );
        put(
            "sndbuf_limited_ms_per_s",
            self.sndbuf_limited_us as f64 / 1000.0,
        );
        put("busy_ms_per_s", self.busy_us as f64 / 1000.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_never_negative() {
        assert_eq!(rate(10, 20, 2.0), Some(5.0));
        assert_eq!(rate(20, 10, 2.0), None);
        assert_eq!(rate(1, 2, 0.0), None);
    }

    #[test]
    fn tcp_deltas_wrap_and_new_sockets() {
        let mut d = TcpDeltas::default();
        let prev = TcpInfo {
            segs_out: Some(u32::MAX - 1),
            bytes_acked: Some(100),
            ..Default::default()
        };
        let cur = TcpInfo {
            segs_out: Some(3),
            bytes_acked: Some(50),
            ..Default::default()
        };
        d.add(Some(&prev), &cur);
        assert_eq!(d.segs_out, 5, "u32 wrap");
        assert_eq!(
            d.bytes_acked, 0,
            "u64 going backwards is not a negative rate"
        );
        d.add(
            None,
            &TcpInfo {
                bytes_acked: Some(1000),
                ..Default::default()
            },
        );
        assert_eq!(
            d.bytes_acked, 1000,
            "a socket opened mid-interval counts from zero"
        );
    }

    #[test]
    fn catalog_is_consistent() {
        let mut names: Vec<_> = RANK_SIGNALS
            .iter()
            .chain(HOST_SIGNALS)
            .map(|s| s.name)
            .collect();
        let n = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), n, "duplicate signal names");
        for s in RANK_SIGNALS.iter().chain(HOST_SIGNALS) {
            assert!(
                s.name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
                "{}",
                s.name
            );
        }
    }

    #[test]
    fn formatting() {
        assert_eq!(format_value("rtt_p50_us", 51_000.0), "51 ms");
        assert_eq!(format_value("rtt_p50_us", 2_150.0), "2.15 ms");
        assert_eq!(format_value("run_delay_ms_per_s", 120.0), "120 ms/s");
        assert_eq!(format_value("bytes_sent_per_s", 1_500_000.0), "1.50 MB/s");
        assert_eq!(format_value("sockets", 3.0), "3");
    }
}
