//! A GPU's cumulative counters (energy, PCIe bytes) read the cheap way.
//!
//! Measured on an H200 (driver 580, `scripts/gpu-check.sh`): the PCIe
//! throughput call takes ~21 ms of wall time (it samples the link for 20 ms,
//! 0.65 ms of CPU), the energy counter ~3.7 ms of CPU whether asked by its
//! own call or as a field value, against a few microseconds for most other
//! readings. So the PCIe byte counters are read as field values every poll
//! (their rate from the last poll's reading), PCIe rates otherwise come from
//! GPM (Hopper and newer, see `gpm`) and only then from the throughput call,
//! made at most every [`LEGACY_PCIE_EVERY`]; the energy counter is read every
//! [`ENERGY_EVERY`]. A slow reading is held in between, so its signal never
//! goes absent.

use super::held::Held;
use super::poll::{rate_since, Reading};
use crate::model::{Sig, Signals};
use nvml_wrapper::enum_wrappers::device::PcieUtilCounter;
use nvml_wrapper::enums::device::SampleValue;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::structs::device::FieldId;
use nvml_wrapper::Device;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// nvml.h: NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION (mJ since the driver loaded).
const FI_TOTAL_ENERGY: u32 = 83;
/// nvml.h: NVML_FI_DEV_PCIE_COUNT_TX_BYTES / _RX_BYTES (bytes, may wrap).
const FI_PCIE_TX_BYTES: u32 = 197;
const FI_PCIE_RX_BYTES: u32 = 198;

/// The slow PCIe throughput call is made at most this often.
pub const LEGACY_PCIE_EVERY: Duration = Duration::from_secs(5);
/// The energy counter is read this often; its rate is the mean power over it.
pub const ENERGY_EVERY: Duration = Duration::from_secs(5);

/// A field value as an unsigned counter.
pub(super) fn as_u64(v: &Result<SampleValue, NvmlError>) -> Option<u64> {
    match v {
        Ok(SampleValue::U64(x)) => Some(*x),
        Ok(SampleValue::U32(x)) => Some(*x as u64),
        Ok(SampleValue::I64(x)) => u64::try_from(*x).ok(),
        _ => None,
    }
}

/// What the counters keep between polls, per GPU index.
#[derive(Default)]
pub(super) struct CounterState {
    /// The last energy reading (mJ), and the mean power (W) since the one before.
    energy: Held<(Reading, Option<f64>)>,
    /// PCIe byte counters: tx, rx.
    pcie_prev: HashMap<u32, (Reading, Reading)>,
    /// The last throughput call: rx and tx bytes per second.
    legacy_pcie: Held<(Option<f64>, Option<f64>)>,
}

/// Energy (J and W) and, where the counters exist, PCIe rates of GPU `i`.
/// True when the PCIe counters answered (their first reading has no rate yet).
pub(super) fn read(dev: &Device, i: u32, st: &mut CounterState, sig: &mut Signals) -> bool {
    energy(dev, i, st, sig);
    let fields = dev.field_values_for(&[FieldId(FI_PCIE_TX_BYTES), FieldId(FI_PCIE_RX_BYTES)]);
    let field = |k: usize| {
        let v = fields.as_ref().ok()?.get(k)?.as_ref().ok()?;
        as_u64(&v.value)
    };
    let (Some(tx), Some(rx)) = (field(0), field(1)) else {
        return false;
    };
    let now = Instant::now();
    let (tx, rx) = ((now, tx), (now, rx));
    let before = st.pcie_prev.insert(i, (tx, rx));
    // A counter that wrapped gives no rate for one poll.
    sig.set_opt(Sig::PcieTxBytesPerS, rate_since(before.map(|b| b.0), tx));
    sig.set_opt(Sig::PcieRxBytesPerS, rate_since(before.map(|b| b.1), rx));
    true
}

/// The energy counter (its field value, else its own call) every
/// [`ENERGY_EVERY`], and the mean power since its last reading.
fn energy(dev: &Device, i: u32, st: &mut CounterState, sig: &mut Signals) {
    let held = st.energy.get(i, ENERGY_EVERY, |last| {
        let field = dev
            .field_values_for(&[FieldId(FI_TOTAL_ENERGY)])
            .ok()
            .and_then(|v| v.into_iter().next()?.ok())
            .and_then(|v| as_u64(&v.value));
        // A counter that stopped answering is absent, not held.
        let mj = field.or_else(|| dev.total_energy_consumption().ok())?;
        let reading = (Instant::now(), mj);
        let watts = rate_since(last.map(|(r, _)| *r), reading).map(|mj_s| mj_s / 1000.0);
        Some((reading, watts))
    });
    if let Some(((_, mj), watts)) = held {
        sig.set(Sig::EnergyJ, *mj as f64 / 1000.0);
        sig.set_opt(Sig::EnergyW, *watts);
    }
}

/// PCIe rates from the throughput call, where neither the counters nor GPM
/// gave them: read at most every [`LEGACY_PCIE_EVERY`], held in between.
pub(super) fn legacy_pcie(dev: &Device, i: u32, st: &mut CounterState, sig: &mut Signals) {
    if sig.get(Sig::PcieRxBytesPerS).is_some() || sig.get(Sig::PcieTxBytesPerS).is_some() {
        return;
    }
    let held = st.legacy_pcie.get(i, LEGACY_PCIE_EVERY, |_| {
        let kib = |c| dev.pcie_throughput(c).ok().map(|kb| kb as f64 * 1024.0);
        Some((kib(PcieUtilCounter::Receive), kib(PcieUtilCounter::Send)))
    });
    if let Some((rx, tx)) = held {
        sig.set_opt(Sig::PcieRxBytesPerS, *rx);
        sig.set_opt(Sig::PcieTxBytesPerS, *tx);
    }
}
