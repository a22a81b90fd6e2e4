//! What the probe tests share.

/// Whether this test can load BPF (root); says why it skips otherwise, and
/// fails on CI, which runs as root.
pub fn can_load_bpf() -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    assert!(std::env::var_os("CI").is_none(), "CI runs as root");
    eprintln!("skipped: loading BPF needs root");
    false
}
