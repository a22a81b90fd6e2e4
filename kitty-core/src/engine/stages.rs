//! Each tick's stages timed by the sampling thread's own CPU clock, for
//! measuring kitty itself (`KITTY_STAGE_TIMES=FILE`; off unless asked).
//!
//! A profile samples where the CPU is; this says what each stage of a
//! tick costs, kernel time included, one line a tick. It is how
//! docs/PERFORMANCE.md splits a tick (`scripts/stage-times.sh`). Four
//! clock reads a tick when on; a branch when off.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

/// The header line: the stages in the order a line gives them, in ns.
pub const HEADER: &str = "sampler_ns enrich_ns analysis_ns deliver_ns";

/// Stage times of one tick, written as a line when it ends.
pub struct StageTimes {
    out: BufWriter<File>,
    at: u64,
    laps: [u64; 4],
    done: usize,
}

impl StageTimes {
    /// Times into `path` (created or replaced, private to its owner, never
    /// through a symlink).
    pub fn to_file(path: &Path) -> Result<StageTimes, String> {
        let file = crate::sinks::files::create_in_place(path).map_err(|e| e.to_string())?;
        let mut out = BufWriter::new(file);
        writeln!(out, "{HEADER}").map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(StageTimes {
            out,
            at: 0,
            laps: [0; 4],
            done: 0,
        })
    }

    /// A tick starts.
    pub fn start(&mut self) {
        self.done = 0;
        self.at = thread_cpu_ns();
    }

    /// The next stage of the tick ended.
    pub fn lap(&mut self) {
        let now = thread_cpu_ns();
        if let Some(l) = self.laps.get_mut(self.done) {
            *l = now.saturating_sub(self.at);
            self.done += 1;
        }
        self.at = now;
    }

    /// The tick ended: its line is written (flushed, so a line is whole
    /// whenever the recording stops). A failed write stops the timing,
    /// never the tick.
    pub fn end(&mut self) -> Result<(), std::io::Error> {
        let [s, e, a, d] = self.laps;
        writeln!(self.out, "{s} {e} {a} {d}")?;
        self.out.flush()
    }
}

/// The engine's loop's view: stage times when asked, nothing when not. A
/// timing that cannot be written stops; sampling goes on.
pub(super) struct TickClock(Option<StageTimes>);

impl TickClock {
    pub fn new(times: Option<StageTimes>) -> Self {
        TickClock(times)
    }

    pub fn start(&mut self) {
        if let Some(t) = &mut self.0 {
            t.start();
        }
    }

    pub fn lap(&mut self) {
        if let Some(t) = &mut self.0 {
            t.lap();
        }
    }

    pub fn end(&mut self) {
        if self.0.as_mut().is_some_and(|t| t.end().is_err()) {
            self.0 = None;
        }
    }
}

/// CPU time the calling thread has used, ns (kernel time included).
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a pointer to a
    // live local; the clock id is a constant the kernel knows.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if r != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_tick_is_a_line_of_its_stages_cpu_time() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("stages");
        let mut t = StageTimes::to_file(&path).unwrap();
        for _ in 0..3 {
            t.start();
            // Work enough to show on the thread's clock in the first stage.
            let mut x = 0u64;
            for i in 0..2_000_000u64 {
                x = x.wrapping_mul(31).wrapping_add(i);
            }
            std::hint::black_box(x);
            t.lap();
            t.lap();
            t.lap();
            t.lap();
            t.end().unwrap();
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let mut lines = text.lines();
        assert_eq!(lines.next(), Some(HEADER));
        let ticks: Vec<Vec<u64>> = lines
            .map(|l| l.split(' ').map(|n| n.parse().unwrap()).collect())
            .collect();
        assert_eq!(ticks.len(), 3);
        for t in &ticks {
            assert_eq!(t.len(), 4);
            assert!(t[0] > 0, "the busy stage took CPU: {t:?}");
        }
    }

    #[test]
    fn a_path_through_a_symlink_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("target");
        std::fs::write(&target, "kept").unwrap();
        std::os::unix::fs::symlink(&target, d.path().join("link")).unwrap();
        assert!(StageTimes::to_file(&d.path().join("link")).is_err());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "kept");
    }
}
