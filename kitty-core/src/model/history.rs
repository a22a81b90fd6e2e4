//! History: bounded rings of recent values per series, for sparklines, the
//! detail view's charts and peer bands. Default: 15 minutes at 500 ms.

use super::frame::{Frame, ProcKey};
use super::signal::Sig;
use std::collections::{HashMap, VecDeque};

/// One series of (monotonic ns, value).
#[derive(Debug, Clone, Default)]
pub struct Ring {
    cap: usize,
    points: VecDeque<(u64, f64)>,
}

impl Ring {
    pub fn new(cap: usize) -> Self {
        Ring {
            cap: cap.max(1),
            points: VecDeque::new(),
        }
    }
    pub fn push(&mut self, t: u64, v: f64) {
        if self.points.len() == self.cap {
            self.points.pop_front();
        }
        self.points.push_back((t, v));
    }
    pub fn len(&self) -> usize {
        self.points.len()
    }
    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }
    pub fn last(&self) -> Option<f64> {
        self.points.back().map(|p| p.1)
    }
    /// The most recent `n` values, oldest first.
    pub fn tail(&self, n: usize) -> impl Iterator<Item = f64> + '_ {
        self.points
            .iter()
            .skip(self.points.len().saturating_sub(n))
            .map(|p| p.1)
    }
    pub fn points(&self) -> impl Iterator<Item = &(u64, f64)> {
        self.points.iter()
    }
}

#[derive(Debug, Clone)]
pub struct History {
    cap: usize,
    ranks: HashMap<(ProcKey, Sig), Ring>,
    host: HashMap<Sig, Ring>,
    gpus: HashMap<(u32, Sig), Ring>,
    /// Frames pushed so far.
    pub frames_seen: u64,
}

impl History {
    /// A history holding `window` of frames taken every `interval`.
    pub fn new(window: std::time::Duration, interval: std::time::Duration) -> Self {
        let cap = (window.as_millis() / interval.as_millis().max(1)).max(2) as usize;
        History {
            cap,
            ranks: HashMap::new(),
            host: HashMap::new(),
            gpus: HashMap::new(),
            frames_seen: 0,
        }
    }

    pub fn capacity(&self) -> usize {
        self.cap
    }

    pub fn push(&mut self, f: &Frame) {
        let t = f.mono_ns;
        for r in &f.ranks {
            for (k, v) in r.signals.iter() {
                self.ranks
                    .entry((r.key, k))
                    .or_insert_with(|| Ring::new(self.cap))
                    .push(t, v);
            }
        }
        for (k, v) in f.host.signals.iter() {
            self.host
                .entry(k)
                .or_insert_with(|| Ring::new(self.cap))
                .push(t, v);
        }
        for g in &f.gpus {
            for (k, v) in g.signals.iter() {
                self.gpus
                    .entry((g.index, k))
                    .or_insert_with(|| Ring::new(self.cap))
                    .push(t, v);
            }
        }
        // Exited ranks keep their rings until they age out of the window.
        let oldest = t.saturating_sub(self.cap as u64 * f.interval_ms.max(1) * 1_000_000);
        self.ranks
            .retain(|_, ring| ring.points.back().is_some_and(|p| p.0 >= oldest));
        self.frames_seen += 1;
    }

    pub fn rank(&self, key: ProcKey, signal: Sig) -> Option<&Ring> {
        self.ranks.get(&(key, signal))
    }

    pub fn host(&self, signal: Sig) -> Option<&Ring> {
        self.host.get(&signal)
    }

    pub fn gpu(&self, index: u32, signal: Sig) -> Option<&Ring> {
        self.gpus.get(&(index, signal))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_is_bounded() {
        let mut r = Ring::new(3);
        for i in 0..10 {
            r.push(i, i as f64);
        }
        assert_eq!(r.len(), 3);
        assert_eq!(r.tail(2).collect::<Vec<_>>(), vec![8.0, 9.0]);
    }

    #[test]
    fn default_window_is_15_minutes_at_500ms() {
        let h = History::new(
            std::time::Duration::from_secs(900),
            std::time::Duration::from_millis(500),
        );
        assert_eq!(h.capacity(), 1800);
    }
}
