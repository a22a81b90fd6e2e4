//! A cumulative Prometheus histogram that takes a bucket's worth of
//! samples at once.
//!
//! The probes hand over each tick's samples already bucketed (thousands of
//! run-queue waits a tick on a busy rank). prometheus-client's `Histogram`
//! observes one value at a time under its lock; this one adds a count to
//! the bucket the value falls in, and encodes through prometheus-client's
//! own encoder, so the exposition is the same.

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::{MetricType, TypedMetric};
use std::sync::{Arc, Mutex};

#[derive(Debug, Clone)]
pub struct BulkHistogram {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Debug)]
struct Inner {
    sum: f64,
    count: u64,
    /// (upper bound, samples in this bucket alone); the last is +Inf.
    buckets: Vec<(f64, u64)>,
}

impl BulkHistogram {
    pub fn new(bounds: &[f64]) -> Self {
        let buckets = bounds
            .iter()
            .copied()
            .chain(std::iter::once(f64::MAX))
            .map(|ub| (ub, 0))
            .collect();
        BulkHistogram {
            inner: Arc::new(Mutex::new(Inner {
                sum: 0.0,
                count: 0,
                buckets,
            })),
        }
    }

    /// `n` samples of value `v`.
    pub fn observe_n(&self, v: f64, n: u64) {
        if n == 0 {
            return;
        }
        let mut i = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        i.sum += v * n as f64;
        i.count += n;
        if let Some(b) = i.buckets.iter_mut().find(|(ub, _)| *ub >= v) {
            b.1 += n;
        }
    }
}

impl TypedMetric for BulkHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for BulkHistogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let i = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        encoder.encode_histogram::<NoLabelSet>(i.sum, i.count, &i.buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text::encode;
    use prometheus_client::metrics::histogram::Histogram;
    use prometheus_client::registry::Registry;

    /// The same samples give the same exposition as prometheus-client's
    /// own histogram fed one at a time.
    #[test]
    fn counts_at_once_encode_as_the_crates_histogram_does() {
        let bounds = [1e-5, 1e-4, 1e-3];
        let ours = BulkHistogram::new(&bounds);
        let theirs = Histogram::new(bounds);
        for (v, n) in [(5e-6, 3), (1e-4, 2), (0.5, 4), (2e-4, 0)] {
            ours.observe_n(v, n);
            for _ in 0..n {
                theirs.observe(v);
            }
        }
        let text = |m: Box<dyn FnOnce(&mut Registry)>| {
            let mut reg = Registry::default();
            m(&mut reg);
            let mut out = String::new();
            encode(&mut out, &reg).unwrap();
            out
        };
        let a = text(Box::new(move |r| r.register("h", "x", ours)));
        let b = text(Box::new(move |r| r.register("h", "x", theirs)));
        assert_eq!(a, b);
        assert!(a.contains("h_count 9"), "{a}");
        assert!(a.contains("h_bucket{le=\"0.0001\"} 5"), "{a}");
    }
}
