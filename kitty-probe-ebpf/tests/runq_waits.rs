//! The run-queue probe times a wait by the scheduler's own clock and mark
//! (`sched_info.last_queued`), so its waits add up to the kernel's run
//! delay of the same threads (a process of its own: no other test's
//! threads in it).
mod support;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// This thread's run delay so far, ns (`/proc/thread-self/schedstat`).
fn run_delay_ns() -> u64 {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap();
    s.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn pin_to_cpu0() {
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET writes inside it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(0, &mut set);
        assert_eq!(
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set),
            0
        );
    }
}

#[test]
fn the_probes_waits_add_up_to_the_kernels_run_delay() {
    if !support::can_load_bpf() {
        return;
    }
    let probe = support::runq_watching_this_process();
    let pid = std::process::id();
    let (sum0, n0) = probe.waits_of(pid).expect("this process is watched");
    let main0 = run_delay_ns();
    // Three spinning threads on one CPU (no migration splits a wait) that
    // sleep now and then: waits both after a wakeup and after a preemption.
    let stop = Arc::new(AtomicBool::new(false));
    let delays = Arc::new(Mutex::new(0u64));
    let threads: Vec<_> = (0..3)
        .map(|_| {
            let (stop, delays) = (stop.clone(), delays.clone());
            std::thread::spawn(move || {
                pin_to_cpu0();
                let start = run_delay_ns();
                while !stop.load(Ordering::Relaxed) {
                    let t = std::time::Instant::now();
                    while t.elapsed() < std::time::Duration::from_millis(3) {
                        std::hint::spin_loop();
                    }
                    std::thread::sleep(std::time::Duration::from_micros(500));
                }
                *delays.lock().unwrap() += run_delay_ns() - start;
            })
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(600));
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    let kernel_us = (*delays.lock().unwrap() + run_delay_ns() - main0) / 1000;
    let (sum1, n1) = probe.waits_of(pid).unwrap();
    let probe_us = sum1 - sum0;
    eprintln!(
        "kernel run delay {kernel_us} us; probe {probe_us} us over {} waits",
        n1 - n0
    );
    assert!(kernel_us > 50_000, "the threads waited for each other");
    // Each wait is counted in whole us (up to 1 us lost per wait), and the
    // thread spawns' and joins' waits fall just outside the window on one
    // side or the other.
    let slack = (n1 - n0) + kernel_us / 20;
    assert!(
        probe_us.abs_diff(kernel_us) <= slack,
        "probe {probe_us} us against the kernel's {kernel_us} us (slack {slack})"
    );
}
