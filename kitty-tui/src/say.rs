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
