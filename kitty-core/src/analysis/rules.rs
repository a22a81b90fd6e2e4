//! The rules: which signals the detector compares, which way is bad, the
//! absolute floor under which a difference never alarms, and what must
//! confirm a verdict.

use crate::model::Sig;

/// A signal the detector compares, with the floor below which a difference
/// never alarms (tiny numbers are noise, not stragglers).
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    pub signal: Sig,
    pub abs_floor: f64,
    pub kind: Kind,
    /// Critical whatever the ratio (a lost GPU, an XID): otherwise a verdict
    /// is critical from 10x its peers.
    pub always_critical: bool,
    /// A signal (and its absolute floor) that must also single the rank
    /// out, when the ranks have it. RTT and queue rules use `link_rtt_us`: a
    /// rank whose connection to a slow peer is slow, but whose own link
    /// carries fast connections, is not the cause.
    pub confirm_by: Option<(Sig, f64)>,
}

/// Which way is bad.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    /// Higher than the peers is bad (delay, retransmits, RTT).
    High,
    /// Lower than the peers by this factor is bad (clocks, SM activity).
    Low(f64),
    /// A 0/1 condition the rank has and its peers do not (throttled, lost GPU).
    Flag,
}

const fn rule(signal: Sig, abs_floor: f64, kind: Kind, always_critical: bool) -> Rule {
    Rule {
        signal,
        abs_floor,
        kind,
        always_critical,
        confirm_by: None,
    }
}

const fn confirmed(signal: Sig, abs_floor: f64, by: (Sig, f64)) -> Rule {
    Rule {
        confirm_by: Some(by),
        ..high(signal, abs_floor)
    }
}

const fn high(signal: Sig, abs_floor: f64) -> Rule {
    rule(signal, abs_floor, Kind::High, false)
}

/// A queue or RTT verdict needs the rank's own link to be slow (a full
/// queue means a slow path; RTT says whose link the path is slow on).
const LINK_RTT: (Sig, f64) = (Sig::LinkRttUs, 2_000.0);

pub const RULES: &[Rule] = &[
    high(Sig::RunDelayMsPerS, 25.0),
    high(Sig::RunqP99Us, 2_000.0),
    high(Sig::CfsThrottledMsPerS, 20.0),
    high(Sig::MigrationsPerS, 100.0),
    high(Sig::RetransPerS, 5.0),
    confirmed(Sig::RttP50Us, 2_000.0, LINK_RTT),
    confirmed(Sig::RttP99Us, 5_000.0, LINK_RTT),
    confirmed(Sig::SrttMaxUs, 5_000.0, LINK_RTT),
    confirmed(Sig::TxQueueBytes, 256_000.0, LINK_RTT),
    // GPU signals join through rank -> GPU.
    rule(Sig::GpuLost, 0.5, Kind::Flag, true),
    rule(Sig::GpuThrottleSlowing, 0.5, Kind::Flag, true),
    rule(Sig::GpuXidRecent, 1.0, Kind::High, true),
    rule(Sig::GpuSmClockMhz, 150.0, Kind::Low(1.2), false),
    rule(Sig::GpuSmActivePct, 15.0, Kind::Low(1.5), false),
    // RDMA signals join through rank -> its ports: congestion and errors
    // out of line with the ports the peers use, or a degraded port.
    high(Sig::RdmaXmitWaitPerS, 100_000.0),
    high(Sig::RdmaCnpPerS, 100.0),
    high(Sig::RdmaEcnMarkedPerS, 100.0),
    high(Sig::RdmaPausePerS, 10.0),
    high(Sig::RdmaRetransPerS, 5.0),
    high(Sig::RdmaErrorsPerS, 1.0),
    high(Sig::RdmaOutOfBufferPerS, 100.0),
    rule(Sig::RdmaPortDegraded, 0.5, Kind::Flag, true),
    // NCCL's own view: the effect (who arrives late) and RAS's health.
    high(Sig::NcclLateMs, 5.0),
    rule(Sig::NcclRasMissing, 0.5, Kind::Flag, true),
    high(Sig::NcclCollsBehind, 5.0),
];

/// The rule of a signal, when it has one.
pub fn rule_for(sig: Sig) -> Option<&'static Rule> {
    RULES.iter().find(|r| r.signal == sig)
}
