//! The tick schedule: one tick per interval on a fixed grid. After a stall
//! (a paused VM, a blocked disk, a slow source) the missed ticks are
//! skipped, never replayed as a burst, and counted so the frame can say so.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub(super) struct Ticker {
    interval: Duration,
    next: Instant,
}

impl Ticker {
    pub fn new(interval: Duration) -> Self {
        Ticker {
            interval,
            next: Instant::now() + interval,
        }
    }

    /// A tick taken at `now` (at or after the due one): how many whole
    /// intervals late it is (those ticks are skipped), and the next due tick
    /// on the grid after `now`.
    fn take(&mut self, now: Instant) -> u64 {
        let late = now.saturating_duration_since(self.next);
        let missed = (late.as_nanos() / self.interval.as_nanos().max(1)) as u64;
        self.next += self.interval * (missed as u32 + 1);
        missed
    }

    /// Parks until the next tick is due (or `stop`: whoever sets it
    /// unparks this thread); returns the ticks missed. One wakeup per tick,
    /// not a poll: each wakeup of an idle sampler is a context switch.
    /// Lateness is measured when the tick is taken, so a stall during the
    /// wait (a stopped process, a paused VM) counts too.
    pub fn wait(&mut self, stop: &AtomicBool) -> u64 {
        while !stop.load(Ordering::SeqCst) {
            let now = Instant::now();
            if now >= self.next {
                break;
            }
            // Returns early on an unpark (or spuriously): the loop checks.
            std::thread::park_timeout(self.next - now);
        }
        self.take(Instant::now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stall_is_counted_not_replayed() {
        let ms = Duration::from_millis;
        let t0 = Instant::now();
        let mut t = Ticker {
            interval: ms(500),
            next: t0 + ms(500),
        };
        // On time: nothing missed, the next one interval on.
        assert_eq!(t.take(t0 + ms(501)), 0);
        assert_eq!(t.next, t0 + ms(1000));
        // Due at 1.0 s, taken at 5.2 s (stalled): the ticks of 1.0..4.5 s
        // are skipped, this one is taken now...
        assert_eq!(t.take(t0 + ms(5200)), 8);
        // ...and the next is back on the grid, not at once.
        assert_eq!(t.next, t0 + ms(5500));
        assert_eq!(t.take(t0 + ms(5500)), 0);
    }
}
