//! The latency histograms' log-linear grid (the probes' `bpf/kitty.h`):
//! buckets 0..8 one unit wide, then eight per octave. The probes fill it;
//! a frame's histograms name their buckets by upper bound; the recording
//! writes them densely by index.

/// Must match HIST_SUB_BITS / HIST_BUCKETS in the probes' bpf/kitty.h.
pub const SUB_BITS: u32 = 3;
pub const BUCKETS: usize = 256;

/// The bucket a value falls in: the same arithmetic as `hist_bucket` in C.
pub fn bucket_of(v: u32) -> usize {
    index(v as u64).min(BUCKETS - 1)
}

fn index(v: u64) -> usize {
    let sub = 1u64 << SUB_BITS;
    if v < sub {
        return v as usize;
    }
    let msb = 63 - v.leading_zeros();
    ((msb - SUB_BITS + 1) as u64 * sub + ((v >> (msb - SUB_BITS)) & (sub - 1))) as usize
}

/// [low, high) bounds of a bucket, in the histogram's unit (microseconds).
pub fn bucket_bounds(i: usize) -> (f64, f64) {
    let sub = 1usize << SUB_BITS;
    if i < sub {
        return (i as f64, i as f64 + 1.0);
    }
    let octave = (i / sub) as u32 + SUB_BITS - 1;
    let step = 1u64 << (octave - SUB_BITS);
    let low = (1u64 << octave) + (i % sub) as u64 * step;
    (low as f64, (low + step) as f64)
}

/// The bucket whose upper bound is `upper`, if that is one's.
pub fn bucket_with_upper(upper: u64) -> Option<usize> {
    let i = index(upper.checked_sub(1)?);
    (i < BUCKETS && bucket_bounds(i).1 == upper as f64).then_some(i)
}

/// The q-quantile (0..=1) of a histogram given as (bucket, count) in
/// bucket order, interpolated linearly inside its bucket: the probes'
/// percentiles, and what a recording recomputes them by (one function, so
/// the two agree bit for bit).
pub fn quantile<I>(counts: I, q: f64) -> Option<f64>
where
    I: Iterator<Item = (usize, u64)> + Clone,
{
    let total: u64 = counts.clone().map(|(_, c)| c).sum();
    if total == 0 {
        return None;
    }
    let rank = q.clamp(0.0, 1.0) * total as f64;
    let mut seen = 0.0;
    let mut last = None;
    for (i, c) in counts.filter(|&(_, c)| c > 0) {
        let c = c as f64;
        if seen + c >= rank {
            let (lo, hi) = bucket_bounds(i);
            let frac = ((rank - seen) / c).clamp(0.0, 1.0);
            return Some(lo + (hi - lo) * frac);
        }
        seen += c;
        last = Some(i);
    }
    last.map(|i| bucket_bounds(i).1)
}

/// A histogram's p50 and p99 ([`quantile`]), neither above `max` (the
/// largest sample where it is known: interpolating inside the top bucket
/// can pass it, a p99 of 18.0 ms beside a max of 17.1): the probes'
/// percentiles, and what a recording recomputes them by.
pub fn p50_p99<I>(counts: I, max: f64) -> Option<(f64, f64)>
where
    I: Iterator<Item = (usize, u64)> + Clone,
{
    let p50 = quantile(counts.clone(), 0.5)?;
    let p99 = quantile(counts, 0.99).unwrap_or(p50);
    Some((p50.min(max), p99.min(max)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upper_bounds_lead_back_to_their_buckets() {
        let bounds: Vec<u64> = (0..20).map(|i| bucket_bounds(i).1 as u64).collect();
        assert_eq!(
            bounds,
            [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 20, 22, 24]
        );
        assert_eq!(bucket_bounds(8 * 10 - 1).1 as u64, 1 << 12);
        for i in 0..BUCKETS {
            assert_eq!(
                bucket_with_upper(bucket_bounds(i).1 as u64),
                Some(i),
                "bucket {i}"
            );
        }
        assert_eq!(bucket_with_upper(17), None);
        assert_eq!(bucket_with_upper(0), None);
    }

    #[test]
    fn a_quantile_interpolates_inside_its_bucket() {
        // 10 samples in [16, 18), 10 in [40, 44): the median is the top of
        // the first bucket, p75 halfway through the second.
        let counts = [(bucket_of(17), 10u64), (bucket_of(41), 10)];
        assert_eq!(quantile(counts.iter().copied(), 0.5), Some(18.0));
        assert_eq!(quantile(counts.iter().copied(), 0.75), Some(42.0));
        assert_eq!(quantile(counts.iter().copied(), 1.0), Some(44.0));
        assert_eq!(quantile([(3usize, 0u64)].into_iter(), 0.5), None);
    }
}
