//! The NVML poller thread: every interval, reads each GPU (utilization,
//! memory, power and energy, clocks, PCIe, ECC, retired pages, throttle
//! reasons, compute processes, NVLink, GPM) into the shared snapshot.
//!
//! What never changes (name, UUID, NUMA node, maximum clocks) is read once
//! per GPU; the counters (`counters`) and GPM (`gpm`) are read the cheap way.

use super::counters::CounterState;
use super::proc_util::ProcUtil;
use super::{
    decode_throttle, init, unavailable_reason, Shared, Snapshot, SLOWING_REASONS, XID_WINDOW,
};
use crate::model::rates::rate;
use crate::model::{GpuFrame, GpuStatus, Sig, Signals, SourceStatus, Text};
use nvml_wrapper::enum_wrappers::device::{
    Clock, EccCounter, MemoryError, RetirementCause, TemperatureSensor,
};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::gpm::GpmSample;
use nvml_wrapper::{Device, Nvml};
use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(super) fn poll_loop(
    lib_path: Option<PathBuf>,
    interval: Duration,
    shared: Arc<Shared>,
    sys: PathBuf,
) {
    let nvml = match init(lib_path) {
        Ok(n) => Arc::new(n),
        Err(e) => {
            let mut s = shared.snap.lock().unwrap_or_else(|e| e.into_inner());
            s.status = Some(SourceStatus::unavailable(unavailable_reason(&e)));
            s.at = Some(Instant::now());
            return;
        }
    };
    // XID events on their own thread: EventSet::wait blocks.
    let (n2, s2) = (nvml.clone(), shared.clone());
    let _ = std::thread::Builder::new()
        .name("kitty-nvml-xid".into())
        .spawn(move || super::xid::xid_loop(&n2, &s2));
    let mut state = PollState::default();
    // GPM samples borrow the library handle, so they live here, not in PollState.
    let mut gpm_prev: HashMap<u32, GpmSample<'_>> = HashMap::new();
    loop {
        let t0 = Instant::now();
        let mut snap = Snapshot {
            at: Some(Instant::now()),
            ..Default::default()
        };
        match nvml.device_count() {
            Err(e) => snap.status = Some(SourceStatus::degraded(unavailable_reason(&e))),
            Ok(n) => {
                snap.status = Some(SourceStatus::ok());
                let xids = shared
                    .xids
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone();
                for i in 0..n {
                    let g = read_gpu(
                        &nvml,
                        i,
                        &mut state,
                        &mut gpm_prev,
                        &xids,
                        &mut snap.pid_gpu,
                        &sys,
                    );
                    snap.gpus.push(g);
                }
            }
        }
        snap.proc_sm_util = state.proc_util.all();
        snap.at = Some(Instant::now());
        *shared.snap.lock().unwrap_or_else(|e| e.into_inner()) = snap;
        let spent = t0.elapsed();
        std::thread::sleep(
            interval
                .saturating_sub(spent)
                .max(Duration::from_millis(10)),
        );
    }
}

/// A cumulative counter and when it was read, for a rate at the next read.
pub(super) type Reading = (Instant, u64);

/// What the poller keeps between polls.
#[derive(Default)]
struct PollState {
    names: HashMap<u32, Text>,
    /// UUIDs, read once per GPU (they never change).
    uuids: HashMap<u32, Text>,
    /// NUMA nodes of the GPUs' PCI devices, read once per GPU.
    numa: HashMap<u32, Option<u32>>,
    /// Maximum SM and memory clocks, read once per GPU (1.3 ms a call on an H200).
    max_clocks: HashMap<u32, (u32, u32)>,
    counters: CounterState,
    /// NVLink throughput counters (KiB) per GPU: tx, rx.
    nvlink_prev: HashMap<u32, (Reading, Reading)>,
    proc_util: ProcUtil,
}

/// A rate from a new reading of a cumulative counter.
pub(super) fn rate_since(prev: Option<Reading>, now: Reading) -> Option<f64> {
    let (t, v) = prev?;
    rate(v, now.1, now.0.duration_since(t).as_secs_f64())
}

fn read_gpu<'n>(
    nvml: &'n Nvml,
    i: u32,
    st: &mut PollState,
    gpm_prev: &mut HashMap<u32, GpmSample<'n>>,
    xids: &VecDeque<(Instant, u32, u64)>,
    pid_gpu: &mut HashMap<u32, u32>,
    sys: &std::path::Path,
) -> GpuFrame {
    let mut g = GpuFrame {
        index: i,
        ..Default::default()
    };
    let dev = match nvml.device_by_index(i) {
        Ok(d) => d,
        Err(NvmlError::GpuLost) => {
            g.status = GpuStatus::Lost;
            g.name = st.names.get(&i).cloned().unwrap_or_default();
            g.uuid = st.uuids.get(&i).cloned();
            return g;
        }
        Err(e) => {
            g.status = GpuStatus::Error;
            g.error = Some(Text::new(&e.to_string()));
            return g;
        }
    };
    if let Some(n) = st.names.get(&i) {
        g.name = n.clone();
    } else if let Ok(n) = dev.name() {
        g.name = Text::new(&n);
        st.names.insert(i, g.name.clone());
    }
    if let Some(u) = st.uuids.get(&i) {
        g.uuid = Some(u.clone());
    } else if let Ok(u) = dev.uuid() {
        let u = Text::new(&u);
        st.uuids.insert(i, u.clone());
        g.uuid = Some(u);
    }
    g.numa_node = *st.numa.entry(i).or_insert_with(|| {
        dev.pci_info()
            .ok()
            .and_then(|p| crate::sources::numa::pci_node(sys, &p.bus_id))
    });
    let mut sig = Signals::new();
    let mut lost = false;
    // A missing metric (not supported on this GPU) is absent; a lost GPU is noted.
    let mut got: Vec<(Sig, Result<f64, NvmlError>)> = Vec::new();
    let mut put = |k: Sig, v: Result<f64, NvmlError>| got.push((k, v));
    let util = dev.utilization_rates();
    put(
        Sig::UtilPct,
        util.as_ref().map(|u| u.gpu as f64).map_err(clone_err),
    );
    put(
        Sig::MemUtilPct,
        util.as_ref().map(|u| u.memory as f64).map_err(clone_err),
    );
    let mem = dev.memory_info();
    put(
        Sig::MemUsedBytes,
        mem.as_ref().map(|m| m.used as f64).map_err(clone_err),
    );
    put(
        Sig::MemTotalBytes,
        mem.as_ref().map(|m| m.total as f64).map_err(clone_err),
    );
    put(Sig::PowerW, dev.power_usage().map(|mw| mw as f64 / 1000.0));
    put(
        Sig::TempC,
        dev.temperature(TemperatureSensor::Gpu).map(|t| t as f64),
    );
    put(Sig::SmClockMhz, dev.clock_info(Clock::SM).map(|c| c as f64));
    put(
        Sig::MemClockMhz,
        dev.clock_info(Clock::Memory).map(|c| c as f64),
    );
    put(Sig::PcieGen, dev.current_pcie_link_gen().map(|v| v as f64));
    put(
        Sig::PcieWidth,
        dev.current_pcie_link_width().map(|v| v as f64),
    );
    put(
        Sig::EccSbeVolatile,
        dev.total_ecc_errors(MemoryError::Corrected, EccCounter::Volatile)
            .map(|v| v as f64),
    );
    put(
        Sig::EccDbeVolatile,
        dev.total_ecc_errors(MemoryError::Uncorrected, EccCounter::Volatile)
            .map(|v| v as f64),
    );
    if let Some((sm, mem)) = max_clocks(&dev, i, &mut st.max_clocks) {
        sig.set(Sig::SmClockMaxMhz, sm as f64);
        sig.set(Sig::MemClockMaxMhz, mem as f64);
    }
    let pcie_counted = super::counters::read(&dev, i, &mut st.counters, &mut sig);
    for (k, v) in got {
        match v {
            Ok(v) => {
                sig.set(k, v);
            }
            Err(NvmlError::GpuLost) => lost = true,
            Err(_) => {}
        }
    }
    // Retired pages (pre-Ampere); nvml-wrapper 0.13 has no remapped-rows call.
    let sbe = dev.retired_pages(RetirementCause::MultipleSingleBitEccErrors);
    let dbe = dev.retired_pages(RetirementCause::DoubleBitEccError);
    if let (Ok(a), Ok(b)) = (&sbe, &dbe) {
        sig.set(Sig::RetiredPages, (a.len() + b.len()) as f64);
    }
    match dev.current_throttle_reasons().map(|r| r.bits()) {
        Ok(bits) => {
            g.throttle = decode_throttle(bits);
            let slowing = bits & SLOWING_REASONS != 0;
            sig.set(Sig::ThrottleSlowing, if slowing { 1.0 } else { 0.0 });
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
    let gpm_pending = super::gpm::read(nvml, &dev, i, gpm_prev, &mut sig);
    if !pcie_counted && !gpm_pending {
        super::counters::legacy_pcie(&dev, i, &mut st.counters, &mut sig);
    }
    let on_gpu: Vec<u32> = g.processes.iter().map(|(pid, _)| *pid).collect();
    if st.proc_util.read(&dev, i, &on_gpu).is_err() {
        lost = true;
    }
    let window_start = Instant::now().checked_sub(XID_WINDOW);
    let recent: Vec<u64> = xids
        .iter()
        .filter(|(t, gi, _)| *gi == i && window_start.is_none_or(|w| *t >= w))
        .map(|(_, _, code)| *code)
        .collect();
    g.xid_recent = recent.len() as u32;
    g.xid_last = recent.iter().rev().take(3).copied().collect();
    sig.set(Sig::XidRecent, recent.len() as f64);
    if lost {
        g.status = GpuStatus::Lost;
    }
    g.signals = sig;
    g
}

/// The maximum clocks (SM, memory) of GPU `i`: asked once, kept.
fn max_clocks(dev: &Device, i: u32, kept: &mut HashMap<u32, (u32, u32)>) -> Option<(u32, u32)> {
    if let Some(c) = kept.get(&i) {
        return Some(*c);
    }
    let c = (
        dev.max_clock_info(Clock::SM).ok()?,
        dev.max_clock_info(Clock::Memory).ok()?,
    );
    kept.insert(i, c);
    Some(c)
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
    prev: &mut HashMap<u32, (Reading, Reading)>,
    sig: &mut Signals,
) {
    use nvml_wrapper::enum_wrappers::nv_link::ErrorCounter;
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
    sig.set(Sig::NvlinkActiveLinks, active as f64);
    sig.set(Sig::NvlinkCrcErrors, crc as f64);
    sig.set(Sig::NvlinkReplayErrors, replay as f64);
    sig.set(Sig::NvlinkRecoveryErrors, recovery as f64);
    let Ok(vals) = dev.field_values_for(&[FieldId(138), FieldId(139)]) else {
        return;
    };
    let get = |k: usize| {
        vals.get(k)
            .and_then(|r| r.as_ref().ok())
            .and_then(|s| super::counters::as_u64(&s.value))
    };
    if let (Some(tx), Some(rx)) = (get(0), get(1)) {
        let now = Instant::now();
        let (tx, rx) = ((now, tx), (now, rx));
        let before = prev.insert(i, (tx, rx));
        let kib = |r: Option<f64>| r.map(|v| v * 1024.0);
        sig.set_opt(
            Sig::NvlinkTxBytesPerS,
            kib(rate_since(before.map(|b| b.0), tx)),
        );
        sig.set_opt(
            Sig::NvlinkRxBytesPerS,
            kib(rate_since(before.map(|b| b.1), rx)),
        );
    }
}
