//! GPM (Hopper and newer): SM activity, occupancy, tensor and DRAM
//! utilization, and PCIe rates, between the last poll's sample and this one,
//! without DCGM. The metrics cover the whole interval and the poll never
//! sleeps for them (a 100 ms wait per GPU would make an 8-GPU node's poll
//! outlast a 500 ms interval).

use crate::model::{Sig, Signals};
use nvml_wrapper::enums::gpm::GpmMetricId;
use nvml_wrapper::gpm::GpmSample;
use nvml_wrapper::{Device, Nvml};
use std::collections::HashMap;

/// GPM reports PCIe traffic in MiB/s.
const MIB: f64 = 1024.0 * 1024.0;

/// The metrics asked for, and the signal each becomes (with its scale).
const METRICS: [(GpmMetricId, Sig, f64); 6] = [
    (GpmMetricId::SmUtil, Sig::SmActivePct, 1.0),
    (GpmMetricId::SmOccupancy, Sig::SmOccupancyPct, 1.0),
    (GpmMetricId::AnyTensorUtil, Sig::TensorActivePct, 1.0),
    (GpmMetricId::DramBwUtil, Sig::DramBwUtilPct, 1.0),
    (GpmMetricId::PcieTxPerSec, Sig::PcieTxBytesPerS, MIB),
    (GpmMetricId::PcieRxPerSec, Sig::PcieRxBytesPerS, MIB),
];

/// Takes GPU `i`'s sample, and sets the metrics since the last one (kept in
/// `prev`). PCIe rates that the counters already gave are left as they are.
/// The first poll of a GPU only takes its sample: then it answers true (the
/// metrics are pending, so the slow PCIe call is not worth making).
pub(super) fn read<'n>(
    nvml: &'n Nvml,
    dev: &Device<'n>,
    i: u32,
    prev: &mut HashMap<u32, GpmSample<'n>>,
    sig: &mut Signals,
) -> bool {
    if !dev.gpm_support().unwrap_or(false) {
        return false;
    }
    let Ok(now) = dev.gpm_sample() else {
        prev.remove(&i);
        return false;
    };
    let Some(before) = prev.insert(i, now) else {
        return true;
    };
    let ids = METRICS.map(|m| m.0);
    let Ok(results) = nvml_wrapper::gpm::gpm_metrics_get(nvml, &before, &prev[&i], &ids) else {
        return false;
    };
    for (r, (_, s, scale)) in results.into_iter().zip(METRICS) {
        if let Ok(r) = r {
            if sig.get(s).is_none() {
                sig.set(s, r.value * scale);
            }
        }
    }
    false
}
