//! Lines for the user on stderr, written so that a closed stderr never
//! panics (`eprintln!` does: `kitty-tui export bad.kitty -o out.jsonl 2>&1 |
//! head` would stop an export half way, and an error would exit 101 instead
//! of its code).

use std::fmt::Display;
use std::io::Write;

/// `kitty-tui: {what}`.
pub fn line(what: impl Display) {
    let _ = writeln!(std::io::stderr(), "kitty-tui: {what}");
}

/// `kitty-tui: warning: {what}`.
pub fn warn(what: impl Display) {
    line(format_args!("warning: {what}"));
}

/// Frames a reader could not read, said a run at a time: a damaged
/// keyframe takes its whole group (up to 32 frames) for one cause, which is
/// one line, not one per frame.
#[derive(Default)]
pub struct Skipped {
    run: Option<Run>,
}

/// Consecutive frames skipped for the same cause.
struct Run {
    first: usize,
    last: usize,
    offset: u64,
    why: String,
}

impl Skipped {
    /// A frame skipped for `e`; the line to say now, if any (the run
    /// before it, when this one does not continue it, or `e` itself when
    /// it is not about one frame).
    pub fn take(&mut self, e: kitty_core::sinks::record::RecordError) -> Option<String> {
        use kitty_core::sinks::record::RecordError;
        let RecordError::Corrupt { index, offset, why } = e else {
            return Some(match self.end() {
                Some(before) => format!("{before}\n{e}; skipped"),
                None => format!("{e}; skipped"),
            });
        };
        if let Some(r) = self.run.as_mut() {
            if r.last + 1 == index && r.why == why {
                r.last = index;
                return None;
            }
        }
        let before = self.end();
        self.run = Some(Run {
            first: index,
            last: index,
            offset,
            why,
        });
        before
    }

    /// The run so far, ended (for a frame that reads, and at the end).
    pub fn end(&mut self) -> Option<String> {
        let r = self.run.take()?;
        Some(match r.first == r.last {
            true => {
                let e = kitty_core::sinks::record::RecordError::Corrupt {
                    index: r.first,
                    offset: r.offset,
                    why: r.why,
                };
                format!("{e}; skipped")
            }
            false => format!(
                "frames {}-{} (from byte {}): {}; skipped",
                r.first, r.last, r.offset, r.why
            ),
        })
    }

    /// [`Skipped::take`], said as a warning.
    pub fn warn(&mut self, e: kitty_core::sinks::record::RecordError) {
        if let Some(l) = self.take(e) {
            l.lines().for_each(warn);
        }
    }

    /// [`Skipped::end`], said as a warning.
    pub fn warn_end(&mut self) {
        if let Some(l) = self.end() {
            warn(l);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kitty_core::sinks::record::RecordError;

    fn corrupt(index: usize, why: &str) -> RecordError {
        RecordError::Corrupt {
            index,
            offset: 100 * index as u64,
            why: why.into(),
        }
    }

    #[test]
    fn a_damaged_group_is_one_line_and_other_damage_its_own() {
        let mut s = Skipped::default();
        // A keyframe's damage takes its group: one line when it ends.
        for i in 0..32 {
            assert_eq!(
                s.take(corrupt(i, "its keyframe 0: checksum mismatch")),
                None
            );
        }
        assert_eq!(
            s.end().as_deref(),
            Some("frames 0-31 (from byte 0): its keyframe 0: checksum mismatch; skipped")
        );
        assert_eq!(s.end(), None);
        // Another cause, or a gap, starts another line.
        assert_eq!(s.take(corrupt(40, "a")), None);
        assert_eq!(
            s.take(corrupt(41, "b")).as_deref(),
            Some("frame 40 at byte 4000: a; skipped")
        );
        assert_eq!(
            s.take(corrupt(43, "b")).as_deref(),
            Some("frame 41 at byte 4100: b; skipped")
        );
        // An error about no one frame is said at once, after the run.
        let io = RecordError::BadHeader("f.kitty".into());
        assert_eq!(
            s.take(io).as_deref(),
            Some(
                "frame 43 at byte 4300: b; skipped\nf.kitty: recording header is damaged; skipped"
            )
        );
        assert_eq!(s.end(), None);
    }
}
