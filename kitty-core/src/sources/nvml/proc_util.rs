//! Each GPU process's SM utilization from NVML's process samples, read
//! every [`PROC_UTIL_EVERY`] (the call took 1.8 ms of CPU on an H200, as much
//! as all the GPU's other readings together): the mean of the samples since
//! the last read, and 0 for a process on the GPU that had none (NVML samples
//! only processes that ran), so an idle rank never keeps an old value.

use super::held::Held;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::Device;
use std::collections::HashMap;
use std::time::Duration;

/// How often the process samples are read.
pub const PROC_UTIL_EVERY: Duration = Duration::from_secs(2);

/// One GPU's last read.
struct Read {
    /// The newest sample's timestamp (NVML's), to ask only for newer ones.
    seen: Option<u64>,
    /// pid -> mean SM utilization (%).
    util: HashMap<u32, f64>,
}

#[derive(Default)]
pub(super) struct ProcUtil(Held<Read>);

impl ProcUtil {
    /// Reads GPU `i`'s samples when due. `on_gpu`: the pids NVML lists as
    /// running on it. Err(GpuLost) when the GPU fell off the bus.
    pub(super) fn read(&mut self, dev: &Device, i: u32, on_gpu: &[u32]) -> Result<(), NvmlError> {
        let mut lost = false;
        self.0.get(i, PROC_UTIL_EVERY, |last| {
            let seen = last.and_then(|r| r.seen);
            let samples = match dev.process_utilization_stats(seen) {
                Ok(s) => s,
                // No process ran since the last read.
                Err(NvmlError::NotFound) => Vec::new(),
                Err(NvmlError::GpuLost) => {
                    lost = true;
                    return None;
                }
                // Not supported here: absent, not zero (and not asked again
                // before the period is up).
                Err(_) => {
                    return Some(Read {
                        seen,
                        util: HashMap::new(),
                    })
                }
            };
            let mut sums: HashMap<u32, (f64, u32)> =
                on_gpu.iter().map(|p| (*p, (0.0, 0))).collect();
            let mut newest = seen;
            for s in &samples {
                let e = sums.entry(s.pid).or_default();
                e.0 += s.sm_util as f64;
                e.1 += 1;
                newest = newest.max(Some(s.timestamp));
            }
            let util = sums
                .into_iter()
                .map(|(pid, (sum, n))| (pid, if n == 0 { 0.0 } else { sum / n as f64 }))
                .collect();
            Some(Read { seen: newest, util })
        });
        if lost {
            Err(NvmlError::GpuLost)
        } else {
            Ok(())
        }
    }

    /// pid -> SM utilization, over every GPU's last read.
    pub(super) fn all(&self) -> HashMap<u32, f64> {
        self.0
            .values()
            .flat_map(|r| r.util.iter().map(|(p, u)| (*p, *u)))
            .collect()
    }
}
