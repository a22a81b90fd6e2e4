//! A slow per-GPU reading made at most once per period and held in between
//! (energy, process samples, the PCIe throughput call): one rule for all,
//! so no signal flickers out between reads.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Per GPU index: the last reading and when it was made.
pub(super) struct Held<T>(HashMap<u32, (Instant, T)>);

impl<T> Default for Held<T> {
    fn default() -> Self {
        Held(HashMap::new())
    }
}

impl<T> Held<T> {
    /// GPU `i`'s reading: `read(the last one)` when none is held or it is
    /// `every` old, else the held one. A read that gives None drops it.
    pub(super) fn get(
        &mut self,
        i: u32,
        every: Duration,
        read: impl FnOnce(Option<&T>) -> Option<T>,
    ) -> Option<&T> {
        let due = self.0.get(&i).is_none_or(|(t, _)| t.elapsed() >= every);
        if due {
            match read(self.0.get(&i).map(|(_, v)| v)) {
                Some(v) => {
                    self.0.insert(i, (Instant::now(), v));
                }
                None => {
                    self.0.remove(&i);
                }
            }
        }
        self.0.get(&i).map(|(_, v)| v)
    }

    /// Every GPU's held reading.
    pub(super) fn values(&self) -> impl Iterator<Item = &T> {
        self.0.values().map(|(_, v)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reading_is_made_when_due_held_between_and_dropped_on_none() {
        let mut h: Held<u32> = Held::default();
        let hour = Duration::from_secs(3600);
        assert_eq!(
            h.get(0, hour, |prev| prev.map_or(Some(1), |_| None)),
            Some(&1)
        );
        // Not due: held, the reader not called.
        assert_eq!(h.get(0, hour, |_| panic!("not due")), Some(&1));
        // Due: the reader sees the last reading.
        assert_eq!(
            h.get(0, Duration::ZERO, |prev| prev.map(|p| p + 1)),
            Some(&2)
        );
        // A failed read drops it; each GPU is its own.
        assert_eq!(h.get(0, Duration::ZERO, |_| None), None);
        assert_eq!(h.get(1, hour, |_| Some(7)), Some(&7));
        assert_eq!(h.values().copied().collect::<Vec<_>>(), vec![7]);
    }
}
