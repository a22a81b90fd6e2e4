//! GPU telemetry from NVML (nvml-wrapper, which dlopens libnvidia-ml.so.1 at
//! run time: kitty builds and runs without it).
//!
//! NVML calls run on their own threads, never on the sampler's or the UI's:
//! a poller (`poll`) refreshes a shared snapshot every interval and an event
//! thread (`xid`) waits for XID errors. The enricher here only copies the
//! snapshot, so a slow or hung NVML call marks the GPUs stale instead of
//! freezing kitty.

mod counters;
mod gpm;
mod held;
mod poll;
mod proc_util;
mod xid;

use super::Enricher;
use crate::model::signal::GPU_TO_RANK;
use crate::model::{Frame, GpuFrame, GpuStatus, Sig, Source, SourceStatus, Text};
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

pub fn decode_throttle(bits: u64) -> Vec<Text> {
    THROTTLE_REASONS
        .iter()
        .filter(|(b, _)| bits & b != 0)
        .map(|(_, n)| Text::new(n))
        .collect()
}

/// Whether a decoded reason slows the GPU down.
pub fn is_slowing(reason: &str) -> bool {
    THROTTLE_REASONS
        .iter()
        .any(|(b, n)| *n == reason && b & SLOWING_REASONS != 0)
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

/// What the poller last saw.
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

fn init(lib_path: Option<PathBuf>) -> Result<Nvml, NvmlError> {
    match lib_path {
        Some(p) => Nvml::builder().lib_path(p.as_os_str()).init(),
        None => Nvml::init(),
    }
}

impl NvmlSource {
    /// Starts polling NVML (from `lib_path`, or the system's libnvidia-ml.so.1).
    /// `sys` is the host's sysfs (for the GPUs' NUMA nodes).
    pub fn start(
        lib_path: Option<PathBuf>,
        interval: Duration,
        proc_root: PathBuf,
        sys: PathBuf,
    ) -> NvmlSource {
        let shared = Arc::new(Shared::default());
        let s2 = shared.clone();
        let _ = std::thread::Builder::new()
            .name("kitty-nvml".into())
            .spawn(move || poll::poll_loop(lib_path, interval, s2, sys));
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
            .map(|n| Text::new(&n).into_string())
            .collect();
        Ok(format!("driver {driver}, {n} GPU(s): {}", names.join(", ")))
    }
}

impl Enricher for NvmlSource {
    fn name(&self) -> &'static str {
        "nvml"
    }

    fn enrich(&mut self, frame: &mut Frame) {
        // Never wait on the poller: if it holds the lock, use the last frame's view.
        let Ok(snap) = self.shared.snap.try_lock().map(|s| s.clone()) else {
            return;
        };
        let Some(status) = snap.status.clone() else {
            frame
                .sources
                .insert(Source::Nvml, SourceStatus::degraded("starting"));
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
                g.status = GpuStatus::Stale;
            }
            frame.sources.insert(
                Source::Nvml,
                SourceStatus::degraded("NVML stopped answering; GPU data is stale"),
            );
        } else {
            frame.sources.insert(Source::Nvml, status.clone());
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
                    Source::Nvml,
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
                r.signals.set(Sig::GpuProcSmUtilPct, *u);
            }
            if let Some((_, used)) = g.processes.iter().find(|(p, _)| *p == r.key.pid) {
                r.signals.set(Sig::GpuMemUsedBytes, *used as f64);
            }
            // The GPU's signals join the rank comparison under gpu_* names.
            for (gs, rs) in GPU_TO_RANK {
                r.signals.set_opt(*rs, g.signals.get(*gs));
            }
            if g.status == GpuStatus::Lost {
                r.signals.set(Sig::GpuLost, 1.0);
            }
        }
        frame.gpus = gpus;
    }
}
