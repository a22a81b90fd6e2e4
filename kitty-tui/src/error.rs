//! Exit codes, and the one error kind that picks a different one: a usage
//! error (a bad option or argument the user can fix) exits 2 like clap's
//! own; any other failure exits 1; output that stopped because its reader
//! went away (`| head`) ends quietly with 141, as a process killed by
//! SIGPIPE would.

use color_eyre::eyre::Report;

pub const OK: i32 = 0;
pub const FAILURE: i32 = 1;
pub const USAGE: i32 = 2;
pub const CLOSED_PIPE: i32 = 128 + libc::SIGPIPE;

/// A request the user can fix; exits [`USAGE`].
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

impl UsageError {
    pub fn new(s: impl std::fmt::Display) -> Self {
        UsageError(s.to_string())
    }
}

/// Did the error come from writing to a closed pipe?
pub fn is_closed_pipe(r: &Report) -> bool {
    r.chain().any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// The exit status of a failed command.
pub fn code_of(r: &Report) -> i32 {
    if is_closed_pipe(r) {
        CLOSED_PIPE
    } else if r.chain().any(|e| e.is::<UsageError>()) {
        USAGE
    } else {
        FAILURE
    }
}
