//! The process's allocator: mimalloc, set to give memory it frees back to
//! the kernel at once.
//!
//! `record` builds and drops a frame's worth of small vectors and strings
//! every tick; glibc's allocator spent ~14 % of its CPU on them (mostly
//! merging freed chunks before a larger request). mimalloc's per-thread
//! free lists by size took 5-7 % off a sample (`scripts/record-pair.sh`).
//! At its defaults it kept what the probes' start-up freed (its arena is
//! committed up front, and a purge does not give committed arena pages
//! back): 26 MB resident in steady state against glibc's 14. Committed as
//! used and purged at once, it holds 15-16 MB, and its peak is 27 MB
//! against glibc's 34.

use libmimalloc_sys::{mi_option_set, mi_option_t};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_arena_eager_commit` and `mi_option_purge_delay` in mimalloc's
/// `mi_option_e` (the crate names neither).
const ARENA_EAGER_COMMIT: mi_option_t = 4;
const PURGE_DELAY: mi_option_t = 15;

/// Run by the loader before `main`: mimalloc reserves its arena at the
/// first allocation, which the Rust runtime makes before `main`, and reads
/// whether to commit it then. mimalloc's own set-up runs earlier still (a
/// constructor of priority 101; this entry has the default priority).
#[used]
#[unsafe(link_section = ".init_array")]
static CONFIGURE: extern "C" fn() = configure;

extern "C" fn configure() {
    // SAFETY: mi_option_set stores an integer in mimalloc's option table;
    // no pointer is passed and nothing else runs yet.
    unsafe {
        mi_option_set(ARENA_EAGER_COMMIT, 0);
        mi_option_set(PURGE_DELAY, 0);
    }
}
