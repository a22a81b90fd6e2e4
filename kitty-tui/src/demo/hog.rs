//! The demo's CPU hog: busy threads that spin forever, pinned if asked (a
//! noisy neighbour such as a data loader or a co-located service).

use super::ring;

pub fn hog(cpu: Option<usize>, threads: usize, nice: Option<i32>) -> std::io::Result<i32> {
    // Named as what it is, so a verdict names it so (threads inherit it).
    // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes.
    unsafe { libc::prctl(libc::PR_SET_NAME, c"demo-hog".as_ptr()) };
    if let Some(c) = cpu {
        ring::pin_to_cpus(&[c])?;
    }
    // A nice level, when asked, is set before the threads start so they
    // inherit it. Without one the hog keeps the level it was started at
    // (the tests start a low-priority neighbour with `nice -n 19`).
    if let Some(n) = nice {
        // SAFETY: setpriority takes plain integers; a refusal (not root,
        // asking for less than 0) leaves the level as it was.
        unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, n) };
    }
    for _ in 1..threads.max(1) {
        std::thread::spawn(|| loop {
            std::hint::black_box(ring::compute_phase(1000));
        });
    }
    loop {
        std::hint::black_box(ring::compute_phase(1000));
    }
}
