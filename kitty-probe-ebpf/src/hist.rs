//! The kernel's log-linear latency histogram (see `bpf/kitty.h`; its grid
//! is `kitty_core::model::grid`), read back: per-tick differences of the cumulative counts, merging, and
//! percentiles interpolated inside a bucket (checked against hdrhistogram
//! in the tests).

use kitty_core::model::grid;
pub use kitty_core::model::grid::{bucket_bounds, bucket_of, BUCKETS, SUB_BITS};

/// The map value, laid out as `struct hist` in bpf/kitty.h.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct RawHist {
    pub count: u64,
    pub sum_us: u64,
    pub max_us: u32,
    pub _pad: u32,
    pub last_stamp: u64,
    pub buckets: [u32; BUCKETS],
}

// SAFETY: plain old data, every bit pattern valid, no padding the kernel does
// not also write (the explicit _pad).
unsafe impl aya::Pod for RawHist {}

impl Default for RawHist {
    fn default() -> Self {
        RawHist {
            count: 0,
            sum_us: 0,
            max_us: 0,
            _pad: 0,
            last_stamp: 0,
            buckets: [0; BUCKETS],
        }
    }
}

/// Counts of one interval: what happened between two reads.
#[derive(Clone, Debug, PartialEq)]
pub struct Hist {
    pub count: u64,
    pub sum_us: u64,
    /// The largest sample so far (the kernel keeps a running max, not a
    /// per-interval one: see `max_in_interval`).
    pub max_us: u32,
    pub buckets: Vec<u64>,
}

impl Default for Hist {
    fn default() -> Self {
        Hist {
            count: 0,
            sum_us: 0,
            max_us: 0,
            buckets: vec![0; BUCKETS],
        }
    }
}

impl Hist {
    /// `now - before` for cumulative kernel histograms. A reset (an LRU
    /// eviction and re-creation) reads as the new counts.
    pub fn delta(now: &RawHist, before: Option<&RawHist>) -> Hist {
        let mut h = Hist::default();
        h.set_delta(now, before);
        h
    }

    /// [`Hist::delta`] into this one, its buckets' room kept (a probe
    /// takes the difference of hundreds of sockets a tick).
    pub fn set_delta(&mut self, now: &RawHist, before: Option<&RawHist>) {
        self.count = now.count;
        self.sum_us = now.sum_us;
        self.max_us = now.max_us;
        self.buckets.clear();
        match before.filter(|b| b.count <= now.count) {
            Some(b) => {
                self.count -= b.count;
                self.sum_us = self.sum_us.saturating_sub(b.sum_us);
                self.buckets.extend(
                    now.buckets
                        .iter()
                        .zip(b.buckets.iter())
                        .map(|(&x, &y)| (x as u64).saturating_sub(y as u64)),
                );
            }
            None => self.buckets.extend(now.buckets.iter().map(|&b| b as u64)),
        }
    }

    /// Empty again, its buckets' room kept.
    pub fn clear(&mut self) {
        self.count = 0;
        self.sum_us = 0;
        self.max_us = 0;
        self.buckets.clear();
        self.buckets.resize(BUCKETS, 0);
    }

    pub fn merge(&mut self, other: &Hist) {
        self.count += other.count;
        self.sum_us += other.sum_us;
        self.max_us = self.max_us.max(other.max_us);
        for (x, y) in self.buckets.iter_mut().zip(other.buckets.iter()) {
            *x += y;
        }
    }

    pub fn samples(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// The q-quantile (0..=1), interpolated linearly inside its bucket.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        grid::quantile(self.buckets.iter().copied().enumerate(), q)
    }

    /// The upper bound of the highest non-empty bucket: the interval's max
    /// to within a bucket (the kernel's `max_us` never decays).
    pub fn max_in_interval(&self) -> Option<f64> {
        let last = self.buckets.iter().rposition(|&c| c > 0)?;
        let (_, hi) = bucket_bounds(last);
        Some(if self.max_us as f64 >= bucket_bounds(last).0 {
            (self.max_us as f64).min(hi)
        } else {
            hi
        })
    }

    /// The interval's p50, p99 and max ([`grid::p50_p99`]: the two
    /// quantiles no greater than the max).
    pub fn percentiles(&self) -> Option<[f64; 3]> {
        let max = self.max_in_interval()?;
        let (p50, p99) = grid::p50_p99(self.buckets.iter().copied().enumerate(), max)?;
        Some([p50, p99, max])
    }

    /// Non-empty buckets as (upper bound, count), for the frame.
    pub fn nonzero(&self) -> Vec<(f64, u64)> {
        // Counted first: collected from a filter, the vector grew by
        // doubling, and its reallocations showed in `record`'s profile.
        let mut out = Vec::with_capacity(self.buckets.iter().filter(|&&c| c > 0).count());
        out.extend(
            self.buckets
                .iter()
                .enumerate()
                .filter(|(_, &c)| c > 0)
                .map(|(i, &c)| (bucket_bounds(i).1, c)),
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every sample into an hdrhistogram, at its bucket's midpoint: an
    /// independent quantile implementation to check ours against.
    fn to_hdr(h: &Hist) -> hdrhistogram::Histogram<u64> {
        let mut out = hdrhistogram::Histogram::<u64>::new(3).expect("3 significant figures");
        for (i, &c) in h.buckets.iter().enumerate() {
            if c > 0 {
                let (lo, hi) = bucket_bounds(i);
                let _ = out.record_n(((lo + hi) / 2.0) as u64, c);
            }
        }
        out
    }

    #[test]
    fn a_cleared_histogram_is_an_empty_one_of_the_whole_grid() {
        let mut raw = RawHist {
            count: 3,
            sum_us: 30,
            max_us: 20,
            ..Default::default()
        };
        raw.buckets[5] = 2;
        raw.buckets[9] = 1;
        let mut h = Hist::delta(&raw, None);
        assert!(h.percentiles().is_some());
        h.clear();
        assert_eq!(h, Hist::default());
        assert_eq!(h.percentiles(), None);
        // Still the whole grid: another's counts add in place.
        h.merge(&Hist::delta(&raw, None));
        assert_eq!(h.samples(), 3);
    }

    #[test]
    fn every_value_falls_inside_its_bucket() {
        for v in (0u32..5000).chain([49_999, 50_000, 65_535, 65_536, 1 << 30, u32::MAX]) {
            let b = bucket_of(v);
            let (lo, hi) = bucket_bounds(b);
            if b < BUCKETS - 1 {
                assert!(
                    lo <= v as f64 && (v as f64) < hi,
                    "{v} in {b}: [{lo}, {hi})"
                );
            }
        }
    }

    #[test]
    fn buckets_are_contiguous_and_about_nine_percent_wide() {
        for i in 1..BUCKETS - 1 {
            assert_eq!(bucket_bounds(i - 1).1, bucket_bounds(i).0, "gap at {i}");
        }
        let (lo, hi) = bucket_bounds(bucket_of(50_000));
        assert!((hi - lo) / lo < 0.13, "{lo}..{hi}");
    }

    #[test]
    fn quantiles_come_from_the_interval_not_the_total() {
        let mut before = RawHist {
            count: 100,
            ..Default::default()
        };
        before.buckets[bucket_of(20)] = 100;
        let mut now = before;
        now.count = 110;
        now.buckets[bucket_of(50_000)] += 10;
        let d = Hist::delta(&now, Some(&before));
        assert_eq!(d.samples(), 10);
        let p50 = d.quantile(0.5).unwrap();
        assert!((45_000.0..60_000.0).contains(&p50), "{p50}");
    }

    /// Interpolating inside the top bucket would put the p99 past the
    /// interval's largest sample; it is held to it.
    #[test]
    fn percentiles_are_no_greater_than_the_max() {
        let mut raw = RawHist {
            count: 41,
            max_us: 41_000,
            ..Default::default()
        };
        raw.buckets[bucket_of(3)] = 40;
        raw.buckets[bucket_of(41_000)] = 1;
        let d = Hist::delta(&raw, None);
        assert!(d.quantile(0.99).unwrap() > 41_000.0);
        let [p50, p99, max] = d.percentiles().unwrap();
        assert_eq!(
            (p50, p99, max),
            (d.quantile(0.5).unwrap(), 41_000.0, 41_000.0)
        );
        assert_eq!(Hist::delta(&RawHist::default(), None).percentiles(), None);
    }

    #[test]
    fn a_reset_counts_as_new() {
        let before = RawHist {
            count: 100,
            ..Default::default()
        };
        let mut now = RawHist {
            count: 3,
            ..Default::default()
        };
        now.buckets[5] = 3;
        assert_eq!(Hist::delta(&now, Some(&before)).samples(), 3);
    }

    #[test]
    fn hdr_and_bucket_quantiles_agree() {
        let mut h = Hist::default();
        for v in [10u32, 100, 1000, 10_000, 100_000] {
            h.buckets[bucket_of(v)] += 20;
        }
        let hdr = to_hdr(&h);
        let ours = h.quantile(0.99).unwrap();
        let theirs = hdr.value_at_quantile(0.99) as f64;
        assert!((ours - theirs).abs() / theirs < 0.1, "{ours} vs {theirs}");
    }
}
