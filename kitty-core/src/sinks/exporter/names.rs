//! The one table from kitty's signals to Prometheus families (also printed
//! in the README, and checked against it by a test). kitty's TUI, JSON and
//! recordings keep their names (`run_delay_ms_per_s`); the exposition
//! follows Prometheus' conventions: base units (seconds, bytes, ratios,
//! hertz), a `_total` counter for every cumulative quantity (rates are
//! PromQL's job: kitty adds each tick's rate times its elapsed time), and
//! gauges only for levels and states. Per-tick percentiles are not exported:
//! the probes' buckets are, as cumulative histograms.

use crate::model::signal::{scope, GPU_TO_RANK};
use crate::model::{Sig, Unit, CATALOG};
use std::sync::OnceLock;

/// How a signal is exported.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Export {
    /// A gauge, its value times `scale`.
    Gauge { name: &'static str, scale: f64 },
    /// A counter that kitty accumulates: rate × elapsed seconds × `scale`.
    Accumulated { name: &'static str, scale: f64 },
    /// A counter the source already keeps (since boot, since driver load).
    Cumulative { name: &'static str, scale: f64 },
    /// In a histogram family instead (`kitty_rank_tcp_rtt_seconds`, ...).
    Histogram(&'static str),
    /// Not exported on its own: what it says is on another series.
    Elsewhere(&'static str),
}

/// The scope prefix of a family.
pub fn prefix(scope_bit: u8) -> &'static str {
    match scope_bit {
        scope::RANK => "kitty_rank_",
        scope::HOST => "kitty_node_",
        scope::GPU => "kitty_gpu_",
        scope::NETNS => "kitty_netns_",
        scope::NIC => "kitty_rdma_port_",
        _ => "kitty_socket_",
    }
}

/// Families whose names read better than the signal's stem.
fn stem(sig: Sig) -> &'static str {
    match sig {
        Sig::RetransPerS => "tcp_retransmits",
        Sig::OutSegsPerS => "tcp_segments_sent",
        Sig::InSegsPerS => "tcp_segments_received",
        Sig::BytesSentPerS => "tcp_sent",
        Sig::BytesRecvPerS => "tcp_received",
        Sig::BytesRetransPerS => "tcp_retransmitted",
        Sig::DeliveryRateBytesPerS => "tcp_delivery_rate",
        Sig::RwndLimitedMsPerS => "tcp_rwnd_limited",
        Sig::SndbufLimitedMsPerS => "tcp_sndbuf_limited",
        Sig::BusyMsPerS => "tcp_busy",
        Sig::SrttMaxUs => "tcp_srtt_max",
        Sig::MinRttUs => "tcp_min_rtt",
        Sig::LinkRttUs => "link_rtt",
        Sig::TxQueueBytes => "tcp_tx_queue",
        Sig::RxQueueBytes => "tcp_rx_queue",
        Sig::NotsentBytes => "tcp_notsent",
        Sig::CtxVoluntaryPerS => "voluntary_context_switches",
        Sig::CtxInvoluntaryPerS => "involuntary_context_switches",
        Sig::IoReadBytesPerS => "io_read",
        Sig::IoWriteBytesPerS => "io_written",
        Sig::TcpClosedPerS => "tcp_closed_connections",
        Sig::GpuProcSmUtilPct => "gpu_process_sm_utilization",
        Sig::GpuMemUsedBytes => "gpu_memory_used",
        Sig::FlowCoveragePct => "flow_coverage",
        Sig::CpuUtilPct => "cpu_utilization",
        Sig::MemUsedPct => "memory_used",
        Sig::PsiCpuSomePct => "pressure_cpu_some",
        Sig::PsiMemorySomePct => "pressure_memory_some",
        Sig::PsiIoSomePct => "pressure_io_some",
        Sig::UtilPct => "utilization",
        Sig::MemUtilPct => "memory_utilization",
        Sig::SmActivePct => "sm_active",
        Sig::SmOccupancyPct => "sm_occupancy",
        Sig::TensorActivePct => "tensor_active",
        Sig::DramBwUtilPct => "dram_bandwidth_utilization",
        Sig::EnergyJ => "energy",
        Sig::EccSbeVolatile => "ecc_corrected_errors",
        Sig::EccDbeVolatile => "ecc_uncorrected_errors",
        _ => strip_unit(sig.name()),
    }
}

/// `run_delay_ms_per_s` -> `run_delay`.
fn strip_unit(name: &'static str) -> &'static str {
    for suffix in [
        "_bytes_per_s",
        "_ms_per_s",
        "_us_per_s",
        "_per_s",
        "_bytes",
        "_pct",
        "_us",
        "_ms",
        "_gbps",
        "_mhz",
        "_w",
        "_c",
    ] {
        if let Some(s) = name.strip_suffix(suffix) {
            return s;
        }
    }
    name
}

/// Rates that are estimates of a moment (a gauge), not bytes moved.
const RATE_GAUGES: &[Sig] = &[Sig::DeliveryRateBytesPerS, Sig::NcclBusbwBytesPerS];

/// Counters the source keeps itself (monotonic since boot or driver load).
const CUMULATIVE: &[Sig] = &[
    Sig::EnergyJ,
    Sig::EccSbeVolatile,
    Sig::EccDbeVolatile,
    Sig::NvlinkCrcErrors,
    Sig::NvlinkReplayErrors,
    Sig::NvlinkRecoveryErrors,
];

/// Names are built once: a family name is `'static` for the registry.
fn name(parts: [&str; 3]) -> &'static str {
    use std::collections::HashMap;
    use std::sync::Mutex;
    static NAMES: OnceLock<Mutex<HashMap<String, &'static str>>> = OnceLock::new();
    let key = parts.concat();
    let mut m = NAMES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(n) = m.get(&key) {
        return n;
    }
    let leaked: &'static str = Box::leak(key.clone().into_boxed_str());
    m.insert(key, leaked);
    leaked
}

/// Every scope, in the order [`export`]'s table keeps.
const EVERY_SCOPE: [u8; 6] = [
    scope::RANK,
    scope::SOCKET,
    scope::HOST,
    scope::GPU,
    scope::NETNS,
    scope::NIC,
];

/// How `sig` is exported in the scope `scope_bit`: worked out once per
/// signal and scope, then read from a table (the exporter asks for every
/// signal of every rank and row, every frame).
pub fn export(sig: Sig, scope_bit: u8) -> Export {
    static TABLE: OnceLock<Vec<[Export; EVERY_SCOPE.len()]>> = OnceLock::new();
    let Some(j) = EVERY_SCOPE.iter().position(|b| *b == scope_bit) else {
        return work_out(sig, scope_bit);
    };
    let table = TABLE.get_or_init(|| {
        CATALOG
            .iter()
            .map(|i| EVERY_SCOPE.map(|b| work_out(i.sig, b)))
            .collect()
    });
    table[sig as usize][j]
}

fn work_out(sig: Sig, scope_bit: u8) -> Export {
    let p = prefix(scope_bit);
    match sig {
        Sig::RttP50Us | Sig::RttP99Us | Sig::RttMaxUs => {
            return Export::Histogram("kitty_rank_tcp_rtt_seconds")
        }
        Sig::RunqP50Us | Sig::RunqP99Us | Sig::RunqMaxUs => {
            return Export::Histogram("kitty_rank_runq_latency_seconds")
        }
        Sig::EnergyW => return Export::Elsewhere("kitty_gpu_energy_joules_total"),
        Sig::GpuLost => return Export::Elsewhere("kitty_gpu_up"),
        // The rank's CPU time: a counter, in seconds.
        Sig::CpuPct => {
            return Export::Accumulated {
                name: name([p, "cpu", "_seconds_total"]),
                scale: 0.01,
            }
        }
        _ => {}
    }
    if scope_bit == scope::RANK && GPU_TO_RANK.iter().any(|(_, r)| *r == sig) {
        return Export::Elsewhere("kitty_gpu_* (join on gpu, UUID)");
    }
    let mut s = stem(sig);
    if scope_bit == scope::NIC {
        // kitty_rdma_port_xmit_wait_total, not ..._port_rdma_xmit_wait_total.
        s = s.strip_prefix("rdma_").unwrap_or(s);
    }
    if CUMULATIVE.contains(&sig) {
        let unit = if sig == Sig::EnergyJ {
            "_joules_total"
        } else {
            "_total"
        };
        return Export::Cumulative {
            name: name([p, s, unit]),
            scale: 1.0,
        };
    }
    let (suffix, scale, counter) = match sig.unit() {
        Unit::PerSec if sig == Sig::RdmaPauseUsPerS => ("_seconds_total", 1e-6, true),
        Unit::PerSec => ("_total", 1.0, true),
        Unit::MsPerSec => ("_seconds_total", 1e-3, true),
        Unit::BytesPerSec if RATE_GAUGES.contains(&sig) => ("_bytes_per_second", 1.0, false),
        Unit::BytesPerSec => ("_bytes_total", 1.0, true),
        Unit::Percent => ("_ratio", 0.01, false),
        Unit::Micros => ("_seconds", 1e-6, false),
        Unit::Bytes => ("_bytes", 1.0, false),
        Unit::Mhz => ("_hertz", 1e6, false),
        Unit::Watts => ("_watts", 1.0, false),
        Unit::Joules => ("_joules", 1.0, false),
        Unit::Celsius => ("_celsius", 1.0, false),
        Unit::Millis => ("_seconds", 1e-3, false),
        Unit::Gbps => ("_bits_per_second", 1e9, false),
        Unit::Count | Unit::Flag | Unit::Cpus => ("", 1.0, false),
    };
    let name = name([p, s, suffix]);
    if counter {
        Export::Accumulated { name, scale }
    } else {
        Export::Gauge { name, scale }
    }
}

/// The scopes a signal is exported in (socket series are opt-in, elsewhere).
pub const SCOPES: &[u8] = &[
    scope::RANK,
    scope::HOST,
    scope::GPU,
    scope::NETNS,
    scope::NIC,
];

/// The mapping as a Markdown table (the README's copy).
pub fn markdown_table() -> String {
    let mut out =
        String::from("| kitty signal | scope | Prometheus family | type |\n|---|---|---|---|\n");
    for &sc in SCOPES {
        let scope_name = match sc {
            scope::RANK => "rank",
            scope::HOST => "node",
            scope::GPU => "gpu",
            scope::NIC => "rdma port",
            _ => "netns",
        };
        for sig in Sig::in_scope(sc) {
            let (family, kind) = match export(sig, sc) {
                Export::Gauge { name, .. } => (name.to_string(), "gauge"),
                Export::Accumulated { name, .. } | Export::Cumulative { name, .. } => {
                    (name.to_string(), "counter")
                }
                Export::Histogram(n) => (n.to_string(), "histogram"),
                Export::Elsewhere(n) => (format!("on {n}"), "-"),
            };
            out.push_str(&format!(
                "| `{}` | {scope_name} | `{family}` | {kind} |\n",
                sig.name()
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_name_follows_the_conventions() {
        let mut seen = std::collections::HashSet::new();
        for &sc in SCOPES {
            for sig in Sig::in_scope(sc) {
                let (name, counter) = match export(sig, sc) {
                    Export::Gauge { name, .. } => (name, false),
                    Export::Accumulated { name, .. } | Export::Cumulative { name, .. } => {
                        (name, true)
                    }
                    _ => continue,
                };
                assert!(seen.insert(name), "{name} twice");
                assert_eq!(counter, name.ends_with("_total"), "{name}");
                for bad in ["_ms", "_us", "_pct", "_mhz"] {
                    assert!(
                        !name.contains(&format!("{bad}_")) && !name.ends_with(bad),
                        "{name} has a non-base unit"
                    );
                }
                assert!(!name.ends_with("_per_s"), "{name} has a non-base unit");
            }
        }
    }

    #[test]
    fn the_table_gives_what_each_signal_and_scope_work_out_to() {
        for info in CATALOG {
            for sc in EVERY_SCOPE.into_iter().chain([0, 64]) {
                assert_eq!(
                    export(info.sig, sc),
                    work_out(info.sig, sc),
                    "{} in scope {sc}",
                    info.name
                );
            }
        }
    }

    #[test]
    fn the_readme_carries_the_current_table() {
        let readme = include_str!("../../../../README.md");
        let table = markdown_table();
        assert!(
            readme.contains(&table),
            "README's metric table is stale; the current one:\n{table}"
        );
    }
}
