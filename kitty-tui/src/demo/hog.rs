//! The demo's CPU hog: busy threads that spin forever, pinned if asked (a
//! noisy neighbour such as a data loader or a co-located service).

use super::ring;

pub fn hog(cpu: Option<usize>, threads: usize) -> std::io::Result<i32> {
    // Named as what it is, so a verdict names it so (threads inherit it).
    // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes.
    unsafe { libc::prctl(libc::PR_SET_NAME, c"demo-hog".as_ptr()) };
    if let Some(c) = cpu {
        ring::pin_to_cpus(&[c])?;
    }
    // A neighbour at nice -5 (as root; else it stays at 0), set before its
    // threads start so they inherit it: at nice 0 the pinned rank's
    // lateness sat near the late-arrival rule's 5 ms floor on a 2-CPU VM
    // (4.9 ms in some runs, 8 in others); at -5 it is 8-12 ms, and its
    // peers, on the other CPUs, are untouched.
    // SAFETY: setpriority takes plain integers; a refusal changes nothing.
    unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, -5) };
    for _ in 1..threads.max(1) {
        std::thread::spawn(|| loop {
            std::hint::black_box(ring::compute_phase(1000));
        });
    }
    loop {
        std::hint::black_box(ring::compute_phase(1000));
    }
}
