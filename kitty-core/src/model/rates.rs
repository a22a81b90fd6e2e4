//! Rates from two samples: counter differences per second that never go
//! negative, a rank's rates from its counters, and per-socket tcp_info
//! deltas.

use super::{RankCounters, Sig, Signals, TcpInfo};

/// `v` to two decimals: the per-thread and per-culprit rates, which the
/// views show to one decimal or none (their noise digits cost a recording
/// of the 8-rank ring ~20 KB a minute).
pub fn hundredths(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

/// A counter difference per second that never goes negative: a counter that
/// went backwards (pid reuse, reset, namespace change) yields None.
pub fn rate(prev: u64, cur: u64, dt_s: f64) -> Option<f64> {
    (cur >= prev && dt_s > 0.0).then(|| (cur - prev) as f64 / dt_s)
}

/// [`rate`] for readings that may be missing on either side.
pub fn rate_opt(prev: Option<u64>, cur: Option<u64>, dt_s: f64) -> Option<f64> {
    rate(prev?, cur?, dt_s)
}

/// The rates a rank's cumulative counters give between two ticks: the
/// sampler's, and what a recording leaves out of a frame because the
/// replay gives them back from the counters (one function for both, so
/// both do the same arithmetic).
pub fn counter_rates(prev: &RankCounters, cur: &RankCounters, dt_s: f64, sig: &mut Signals) {
    for (id, counter, per) in COUNTER_RATES {
        sig.set_opt(
            id,
            rate_opt(counter(prev), counter(cur), dt_s).map(|r| r / per),
        );
    }
}

/// How many rates [`counter_rates`] gives at most.
pub const COUNTER_RATE_SIGNALS: usize = COUNTER_RATES.len();

/// Each rate [`counter_rates`] gives: its signal, its counter, and what one
/// unit of the signal is in counts per second (ns/s per CPU percent, per
/// ms/s; dividing by 1 is exact).
type CounterRate = (Sig, fn(&RankCounters) -> Option<u64>, f64);
const COUNTER_RATES: [CounterRate; 7] = [
    (Sig::CpuPct, |c| Some(c.exec_ns), 1e7),
    (Sig::RunDelayMsPerS, |c| Some(c.run_delay_ns), 1e6),
    (Sig::CtxVoluntaryPerS, |c| Some(c.ctx_voluntary), 1.0),
    (Sig::CtxInvoluntaryPerS, |c| Some(c.ctx_involuntary), 1.0),
    (Sig::IoReadBytesPerS, |c| c.io_read_bytes, 1.0),
    (Sig::IoWriteBytesPerS, |c| c.io_write_bytes, 1.0),
    (Sig::CfsThrottledMsPerS, |c| c.cfs_throttled_ns, 1e6),
];

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

    /// How many signals [`TcpDeltas::write`] sets.
    pub const SIGNALS: usize = 9;

    pub fn write(&self, dt_s: f64, out: &mut Signals) {
        let mut put = |k: Sig, v: f64| {
            out.set(k, v / dt_s);
        };
        put(Sig::RetransPerS, self.retrans as f64);
        put(Sig::OutSegsPerS, self.segs_out as f64);
        put(Sig::InSegsPerS, self.segs_in as f64);
        put(Sig::BytesSentPerS, self.bytes_acked as f64);
        put(Sig::BytesRecvPerS, self.bytes_received as f64);
        put(Sig::BytesRetransPerS, self.bytes_retrans as f64);
        put(Sig::RwndLimitedMsPerS, self.rwnd_limited_us as f64 / 1000.0);
        put(
            Sig::SndbufLimitedMsPerS,
            self.sndbuf_limited_us as f64 / 1000.0,
        );
        put(Sig::BusyMsPerS, self.busy_us as f64 / 1000.0);
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
        assert_eq!(rate_opt(None, Some(2), 1.0), None);
    }

    #[test]
    fn the_deltas_set_as_many_signals_as_they_say() {
        let mut out = Signals::new();
        TcpDeltas::default().write(1.0, &mut out);
        assert_eq!(out.iter().count(), TcpDeltas::SIGNALS);
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
}
