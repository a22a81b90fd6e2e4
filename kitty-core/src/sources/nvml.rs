//! GPU telemetry from NVML (nvml-wrapper, which dlopens libnvidia-ml.so.1 at
//! run time: kitty builds and runs without it).
//!
//! NVML calls run on their own threads, never on the sampler's or the UI's:
//! a poller refreshes a shared snapshot every interval and an event thread
//! waits for XID errors. The sampler's enricher only copies the snapshot, so
//! a slow or hung NVML call marks the GPUs stale instead of freezing kitty.

use crate::engine::Enricher;
use crate::frame::{Frame, GpuFrame, Signals, SourceStatus};
use nvml_wrapper::bitmasks::event::EventTypes;
use nvml_wrapper::enum_wrappers::device::{
    Clock, EccCounter, MemoryError, PcieUtilCounter, RetirementCause, TemperatureSensor,
};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::Nvml;
use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// XIDs are shown as counts over this window, not as a last-value gauge.
pub const XID_WINDOW: Duration = Duration::from_secs(300);

/// Throttle (clock event) reason bits, as NVML defines them.
pub const THROTTLE_REASONS: &[(u64, &str)] = &[
    (0x1, "gpu_idle"),
    (0x2, "app_clocks"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal"),
    (0x40, "hw_thermal"),
    (0x80, "hw_power_brake"),
    (0x100, "display_clocks"),
];

/// Reasons that mean the GPU runs slower than it should (idle and app clocks do not).
pub const SLOWING_REASONS: u64 = 0x4 | 0x8 | 0x20 | 0x40 | 0x80;

pub fn decode_throttle(bits: u64) -> Vec<String> {
    THROTTLE_REASONS
        .iter()
        .filter(|(b, _)| bits & b != 0)
        .map(|(_, n)| n.to_string())
        .collect()
}

/// Why NVML is unavailable, in words an operator can act on.
pub fn unavailable_reason(e: &NvmlError) -> String {
    match e {
        NvmlError::LibloadingError(_) => "libnvidia-ml.so.1 not found".into(),
        NvmlError::DriverNotLoaded => "no NVIDIA driver loaded".into(),
        NvmlError::NoPermission => "insufficient permissions".into(),
        NvmlError::FailedToLoadSymbol(s) => format!("libnvidia-ml.so.1 lacks {s}"),
        other => format!("NVML: {other}"),
    }
}

#[derive(Debug, Clone, Default)]
struct Snapshot {
    status: Option<SourceStatus>,
    gpus: Vec<GpuFrame>,
    /// host pid -> GPU index.
    pid_gpu: HashMap<u32, u32>,
    /// host pid -> SM utilization from NVML's per-process samples.
    proc_sm_util: HashMap<u32, f64>,
    at: Option<Instant>,
}

#[derive(Default)]
struct Shared {
    snap: Mutex<Snapshot>,
    /// (when, gpu index, xid code)
    xids: Mutex<VecDeque<(Instant, u32, u64)>>,
}

/// The NVML source: starts its threads, and enriches frames from what they found.
pub struct NvmlSource {
    shared: Arc<Shared>,
    interval: Duration,
    /// Where this pid namespace's /proc is (to tell if NVML's pids are visible).
    proc_root: PathBuf,
}

impl NvmlSource {
    /// Starts polling NVML (from `lib_path`, or the system's libnvidia-ml.so.1).
    pub fn start(lib_path: Option<PathBuf>, interval: Duration, proc_root: PathBuf) -> NvmlSource {
        let shared = Arc::new(Shared::default());
        let s2 = shared.clone();
        let _ = std::thread::Builder::new()
            .name("kitty-nvml".into())
            .spawn(move || poll_loop(lib_path, interval, s2));
        NvmlSource {
            shared,
            interval,
            proc_root,
        }
    }

    /// Runs one probe synchronously (for `doctor`): Ok(driver and GPU count) or the reason.
    pub fn probe(lib_path: Option<PathBuf>) -> Result<String, String> {
        let nvml = init(lib_path).map_err(|e| unavailable_reason(&e))?;
        let n = nvml.device_count().map_err(|e| unavailable_reason(&e))?;
        let driver = nvml.sys_driver_version().unwrap_or_else(|_| "?".into());
        let names: Vec<String> = (0..n)
            .filter_map(|i| nvml.device_by_index(i).ok()?.name().ok())
            .collect();
        Ok(format!("driver {driver}, {n} GPU(s): {}", names.join(", ")))
    }
}

fn init(lib_path: Option<PathBuf>) -> Result<Nvml, NvmlError> {
    match lib_path {
        Some(p) => Nvml::builder().lib_path(p.as_os_str()).init(),
        None => Nvml::init(),
    }
}

fn poll_loop(lib_path: Option<PathBuf>, interval: Duration, shared: Arc<Shared>) {
    let nvml = match init(lib_path) {
        Ok(n) => Arc::new(n),
        Err(e) => {
            let mut s = shared.snap.lock().unwrap();
            s.status = Some(SourceStatus::unavailable(unavailable_reason(&e)));
            s.at = Some(Instant::now());
            return;
        }
    };
    // XID events on their own thread: EventSet::wait blocks.
    let (n2, s2) = (nvml.clone(), shared.clone());
    let _ = std::thread::Builder::new()
        .name("kitty-nvml-xid".into())
        .spawn(move || xid_loop(&n2, &s2));
    let mut state = PollState::default();
    loop {
        let t0 = Instant::now();
        let count = nvml.device_count();
        let mut snap = Snapshot {
            at: Some(Instant::now()),
            ..Default::default()
        };
        match count {
            Err(e) => snap.status = Some(SourceStatus::degraded(unavailable_reason(&e))),
            Ok(n) => {
                snap.status = Some(SourceStatus::ok());
                let xids = shared.xids.lock().unwrap().clone();
                for i in 0..n {
                    let g = read_gpu(&nvml, i, &mut state, &xids, &mut snap.pid_gpu);
                    snap.gpus.push(g);
                }
            }
        }
        snap.proc_sm_util = state.proc_sm_util.clone();
        snap.at = Some(Instant::now());
        *shared.snap.lock().unwrap() = snap;
        let spent = t0.elapsed();
        std::thread::sleep(
            interval
                .saturating_sub(spent)
                .max(Duration::from_millis(10)),
        );
    }
}

/// What the poller keeps between polls.
#[derive(Default)]
struct PollState {
    names: HashMap<u32, String>,
    energy_prev: HashMap<u32, (Instant, u64)>,
    /// NVLink throughput counters (KiB) per GPU: (when, tx, rx).
    nvlink_prev: HashMap<u32, (Instant, u64, u64)>,
    /// Last process-utilization sample timestamp per GPU.
    util_seen: HashMap<u32, u64>,
    /// host pid -> SM utilization of its last sample.
    proc_sm_util: HashMap<u32, f64>,
}

fn read_gpu(
    nvml: &Nvml,
    i: u32,
    st: &mut PollState,
    xids: &VecDeque<(Instant, u32, u64)>,
    pid_gpu: &mut HashMap<u32, u32>,
) -> GpuFrame {
    let names = &mut st.names;
    let mut g = GpuFrame {
        index: i,
        status: "ok".into(),
        ..Default::default()
    };
    let dev = match nvml.device_by_index(i) {
        Ok(d) => d,
        Err(NvmlError::GpuLost) => {
            g.status = "lost".into();
            g.name = names.get(&i).cloned().unwrap_or_default();
            return g;
        }
        Err(e) => {
            g.status = format!("error: {e}");
            return g;
        }
    };
    if let Some(n) = names.get(&i) {
        g.name = n.clone();
    } else if let Ok(n) = dev.name() {
        names.insert(i, n.clone());
        g.name = n;
    }
    let mut sig = Signals::new();
    let mut lost = false;
    // A missing metric (not supported on this GPU) is absent; a lost GPU is noted.
    let mut got: Vec<(&str, Result<f64, NvmlError>)> = Vec::new();
    let mut put = |k: &'static str, v: Result<f64, NvmlError>| got.push((k, v));
    let util = dev.utilization_rates();
    put(
        "util_pct",
        util.as_ref().map(|u| u.gpu as f64).map_err(clone_err),
    );
    put(
        "mem_util_pct",
        util.as_ref().map(|u| u.memory as f64).map_err(clone_err),
    );
    let mem = dev.memory_info();
    put(
        "mem_used_bytes",
        mem.as_ref().map(|m| m.used as f64).map_err(clone_err),
    );
    put(
        "mem_total_bytes",
        mem.as_ref().map(|m| m.total as f64).map_err(clone_err),
    );
    put("power_w", dev.power_usage().map(|mw| mw as f64 / 1000.0));
    let energy = dev.total_energy_consumption();
    put(
        "temp_c",
        dev.temperature(TemperatureSensor::Gpu).map(|t| t as f64),
    );
    put("sm_clock_mhz", dev.clock_info(Clock::SM).map(|c| c as f64));
    put(
        "sm_clock_max_mhz",
        dev.max_clock_info(Clock::SM).map(|c| c as f64),
    );
    put(
        "mem_clock_mhz",
        dev.clock_info(Clock::Memory).map(|c| c as f64),
    );
    put(
        "mem_clock_max_mhz",
        dev.max_clock_info(Clock::Memory).map(|c| c as f64),
    );
    put(
        "pcie_rx_bytes_per_s",
        dev.pcie_throughput(PcieUtilCounter::Receive)
            .map(|kb| kb as f64 * 1024.0),
    );
    put(
        "pcie_tx_bytes_per_s",
        dev.pcie_throughput(PcieUtilCounter::Send)
            .map(|kb| kb as f64 * 1024.0),
    );
    put("pcie_gen", dev.current_pcie_link_gen().map(|v| v as f64));
    put(
        "pcie_width",
        dev.current_pcie_link_width().map(|v| v as f64),
    );
    put(
        "ecc_sbe_volatile",
        dev.total_ecc_errors(MemoryError::Corrected, EccCounter::Volatile)
            .map(|v| v as f64),
    );
    put(
        "ecc_dbe_volatile",
        dev.total_ecc_errors(MemoryError::Uncorrected, EccCounter::Volatile)
            .map(|v| v as f64),
    );
    if let Ok(mj) = energy {
        let now = Instant::now();
        if let Some((t, prev)) = st.energy_prev.insert(i, (now, mj)) {
            let dt = now.duration_since(t).as_secs_f64();
            if mj >= prev && dt > 0.0 {
                sig.insert("energy_w".into(), (mj - prev) as f64 / 1000.0 / dt);
            }
        }
        sig.insert("energy_j".into(), mj as f64 / 1000.0);
    }
    for (k, v) in got {
        match v {
            Ok(v) => {
                sig.insert(k.to_string(), v);
            }
            Err(NvmlError::GpuLost) => lost = true,
            Err(_) => {}
        }
    }
    // Retired pages (pre-Ampere) ; nvml-wrapper 0.13 has no remapped-rows call.
    let sbe = dev.retired_pages(RetirementCause::MultipleSingleBitEccErrors);
    let dbe = dev.retired_pages(RetirementCause::DoubleBitEccError);
    if let (Ok(a), Ok(b)) = (&sbe, &dbe) {
        sig.insert("retired_pages".into(), (a.len() + b.len()) as f64);
    }
    match dev.current_throttle_reasons().map(|r| r.bits()) {
        Ok(bits) => {
            g.throttle = decode_throttle(bits);
            sig.insert(
                "throttle_slowing".into(),
                if bits & SLOWING_REASONS != 0 {
                    1.0
                } else {
                    0.0
                },
            );
        }
        Err(NvmlError::GpuLost) => lost = true,
        Err(_) => {}
    }
    match dev.running_compute_processes() {
        Ok(ps) => {
            for p in ps {
                let used = match p.used_gpu_memory {
                    UsedGpuMemory::Used(b) => b,
                    UsedGpuMemory::Unavailable => 0,
                };
                g.processes.push((p.pid, used));
                pid_gpu.insert(p.pid, i);
            }
        }
        Err(NvmlError::GpuLost) => lost = true,
        Err(_) => {}
    }
    nvlink(&dev, i, &mut st.nvlink_prev, &mut sig);
    match dev.process_utilization_stats(st.util_seen.get(&i).copied()) {
        Ok(samples) => {
            for p in &samples {
                st.util_seen.insert(
                    i,
                    p.timestamp.max(st.util_seen.get(&i).copied().unwrap_or(0)),
                );
                st.proc_sm_util.insert(p.pid, p.sm_util as f64);
            }
        }
        Err(NvmlError::GpuLost) => lost = true,
        Err(_) => {}
    }
    gpm(nvml, &dev, &mut sig);
    let window_start = Instant::now().checked_sub(XID_WINDOW);
    let recent: Vec<u64> = xids
        .iter()
        .filter(|(t, gi, _)| *gi == i && window_start.is_none_or(|w| *t >= w))
        .map(|(_, _, code)| *code)
        .collect();
    g.xid_recent = recent.len() as u32;
    g.xid_last = recent.iter().rev().take(3).copied().collect();
    sig.insert("xid_recent".into(), recent.len() as f64);
    if lost {
        g.status = "lost".into();
    }
    g.signals = sig;
    g
}

fn clone_err(e: &NvmlError) -> NvmlError {
    match e {
        NvmlError::GpuLost => NvmlError::GpuLost,
        _ => NvmlError::Unknown,
    }
}

/// NVLink: active links, summed error counters, and throughput from NVML's
/// field values (NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX/RX, KiB counters).
fn nvlink(
    dev: &nvml_wrapper::Device,
    i: u32,
    prev: &mut HashMap<u32, (Instant, u64, u64)>,
    sig: &mut Signals,
) {
    use nvml_wrapper::enum_wrappers::nv_link::ErrorCounter;
    use nvml_wrapper::enums::device::SampleValue;
    use nvml_wrapper::structs::device::FieldId;
    const MAX_LINKS: u32 = 18;
    let (mut active, mut crc, mut replay, mut recovery) = (0u32, 0u64, 0u64, 0u64);
    for l in 0..MAX_LINKS {
        let link = dev.link_wrapper_for(l);
        match link.is_active() {
            Ok(true) => active += 1,
            Ok(false) => continue,
            // No NVLink on this GPU (or past its last link).
            Err(_) => break,
        }
        crc += link.error_counter(ErrorCounter::DlCrcFlit).unwrap_or(0)
            + link.error_counter(ErrorCounter::DlCrcData).unwrap_or(0);
        replay += link.error_counter(ErrorCounter::DlReplay).unwrap_or(0);
        recovery += link.error_counter(ErrorCounter::DlRecovery).unwrap_or(0);
    }
    if active == 0 {
        return;
    }
    sig.insert("nvlink_active_links".into(), active as f64);
    sig.insert("nvlink_crc_errors".into(), crc as f64);
    sig.insert("nvlink_replay_errors".into(), replay as f64);
    sig.insert("nvlink_recovery_errors".into(), recovery as f64);
    let as_u64 = |v: &Result<SampleValue, NvmlError>| match v {
        Ok(SampleValue::U64(x)) => Some(*x),
        Ok(SampleValue::U32(x)) => Some(*x as u64),
        Ok(SampleValue::I64(x)) => Some(*x as u64),
        _ => None,
    };
    if let Ok(vals) = dev.field_values_for(&[FieldId(138), FieldId(139)]) {
        let get = |k: usize| {
            vals.get(k)
                .and_then(|r| r.as_ref().ok())
                .and_then(|s| as_u64(&s.value))
        };
        if let (Some(tx), Some(rx)) = (get(0), get(1)) {
            let now = Instant::now();
            if let Some((t, ptx, prx)) = prev.insert(i, (now, tx, rx)) {
                let dt = now.duration_since(t).as_secs_f64();
                if dt > 0.0 && tx >= ptx && rx >= prx {
                    sig.insert(
                        "nvlink_tx_bytes_per_s".into(),
                        (tx - ptx) as f64 * 1024.0 / dt,
                    );
                    sig.insert(
                        "nvlink_rx_bytes_per_s".into(),
                        (rx - prx) as f64 * 1024.0 / dt,
                    );
                }
            }
        }
    }
}

/// GPM (Hopper and newer): SM activity, occupancy, tensor and DRAM
/// utilization over the poll interval, without DCGM.
fn gpm(nvml: &Nvml, dev: &nvml_wrapper::Device, sig: &mut Signals) {
    use nvml_wrapper::enums::gpm::GpmMetricId;
    if !dev.gpm_support().unwrap_or(false) {
        return;
    }
    let Ok(a) = dev.gpm_sample() else { return };
    std::thread::sleep(Duration::from_millis(100));
    let Ok(b) = dev.gpm_sample() else { return };
    let ids = [
        GpmMetricId::SmUtil,
        GpmMetricId::SmOccupancy,
        GpmMetricId::AnyTensorUtil,
        GpmMetricId::DramBwUtil,
    ];
    let names = [
        "sm_active_pct",
        "sm_occupancy_pct",
        "tensor_active_pct",
        "dram_bw_util_pct",
    ];
    if let Ok(results) = nvml_wrapper::gpm::gpm_metrics_get(nvml, &a, &b, &ids) {
        for (r, name) in results.into_iter().zip(names) {
            if let Ok(r) = r {
                sig.insert(name.into(), r.value);
            }
        }
    }
}

fn xid_loop(nvml: &Nvml, shared: &Shared) {
    let Ok(mut set) = nvml.create_event_set() else {
        return;
    };
    let n = nvml.device_count().unwrap_or(0);
    for i in 0..n {
        let Ok(dev) = nvml.device_by_index(i) else {
            continue;
        };
        let supported = dev
            .supported_event_types()
            .is_ok_and(|t| t.contains(EventTypes::CRITICAL_XID_ERROR));
        if !supported {
            continue;
        }
        set = match dev.register_events(EventTypes::CRITICAL_XID_ERROR, set) {
            Ok(s) => s,
            // The set is consumed on failure: start a fresh one for the others.
            Err(_) => match nvml.create_event_set() {
                Ok(s) => s,
                Err(_) => return,
            },
        };
    }
    loop {
        match set.wait(1000) {
            Ok(ev) => {
                let idx = ev.device.index().unwrap_or(u32::MAX);
                if let Some(nvml_wrapper::enums::event::XidError::Value(code)) = ev.event_data {
                    let mut x = shared.xids.lock().unwrap();
                    x.push_back((Instant::now(), idx, code));
                    while x.len() > 1000 {
                        x.pop_front();
                    }
                }
            }
            Err(NvmlError::Timeout) => {}
            Err(_) => std::thread::sleep(Duration::from_secs(1)),
        }
    }
}

impl Enricher for NvmlSource {
    fn enrich(&mut self, frame: &mut Frame) {
        // Never wait on the poller: if it holds the lock, use the last frame's view.
        let Ok(snap) = self.shared.snap.try_lock().map(|s| s.clone()) else {
            return;
        };
        let Some(status) = snap.status.clone() else {
            frame
                .sources
                .insert("nvml".into(), SourceStatus::degraded("starting"));
            return;
        };
        // Only a running poller can go stale; an unavailable NVML stays unavailable.
        let stale = status.is_ok()
            && snap
                .at
                .is_some_and(|t| t.elapsed() > self.interval * 4 + Duration::from_secs(2));
        let mut gpus = snap.gpus.clone();
        if stale {
            for g in &mut gpus {
                g.status = "stale".into();
            }
            frame.sources.insert(
                "nvml".into(),
                SourceStatus::degraded("NVML stopped answering; GPU data is stale"),
            );
        } else {
            frame.sources.insert("nvml".into(), status.clone());
        }
        // NVML reports host pids: if none of them exist here, kitty is in a
        // container without the host PID namespace and cannot map ranks.
        if !stale && status.is_ok() && !snap.pid_gpu.is_empty() {
            let visible = snap
                .pid_gpu
                .keys()
                .any(|p| self.proc_root.join(p.to_string()).exists());
            if !visible {
                frame.sources.insert(
                    "nvml".into(),
                    SourceStatus::degraded(
                        "NVML's process pids are not visible here: run kitty in the host PID namespace (hostPID: true) to map ranks to GPUs",
                    ),
                );
            }
        }
        for r in &mut frame.ranks {
            let Some(gi) = snap.pid_gpu.get(&r.key.pid).copied() else {
                continue;
            };
            r.gpu = Some(gi);
            let Some(g) = gpus.iter().find(|g| g.index == gi) else {
                continue;
            };
            if let Some(u) = snap.proc_sm_util.get(&r.key.pid) {
                r.signals.insert("gpu_proc_sm_util_pct".into(), *u);
            }
            if let Some((_, used)) = g.processes.iter().find(|(p, _)| *p == r.key.pid) {
                r.signals.insert("gpu_mem_used_bytes".into(), *used as f64);
            }
            // The GPU's signals join the rank comparison under gpu_* names.
            for (k, rk) in [
                ("util_pct", "gpu_util_pct"),
                ("sm_clock_mhz", "gpu_sm_clock_mhz"),
                ("throttle_slowing", "gpu_throttle_slowing"),
                ("xid_recent", "gpu_xid_recent"),
                ("sm_active_pct", "gpu_sm_active_pct"),
                ("power_w", "gpu_power_w"),
                ("temp_c", "gpu_temp_c"),
            ] {
                if let Some(v) = g.signals.get(k) {
                    r.signals.insert(rk.into(), *v);
                }
            }
            if g.status == "lost" {
                r.signals.insert("gpu_lost".into(), 1.0);
            }
        }
        frame.gpus = gpus;
    }
}
