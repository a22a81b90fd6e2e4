//! The run-queue probe's culprit slots read each tick (in place, as the
//! charges since the last read): the charges of busy threads that wait for
//! each other are there once, add up to no more than their waits, and a
//! second read holds only what was charged since.
mod support;
use kitty_core::model::time::mono_ns;
use kitty_probe_ebpf::runq::RunqProbe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// More busy threads than CPUs in this watched process, for `ms`: they wait
/// for each other, and are charged to this process.
fn contend(ms: u64) {
    let stop = Arc::new(AtomicBool::new(false));
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let busy: Vec<_> = (0..cpus * 3)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(ms));
    stop.store(true, Ordering::Relaxed);
    for b in busy {
        b.join().unwrap();
    }
}

/// One test at a time: each one's busy threads are charged in the other's
/// probe too (both watch this process).
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The run-queue probe watching this process, whatever it charged before
/// taken, while no other test here runs; None where BPF cannot load.
fn probe_of_this_process() -> Option<(std::sync::MutexGuard<'static, ()>, RunqProbe)> {
    if !support::can_load_bpf() {
        return None;
    }
    let one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut probe = support::runq_watching_this_process();
    probe.charges(mono_ns());
    Some((one, probe))
}

/// The waits counted in this process's histogram so far: their sum in ns
/// (each counted in whole us, so up to 1 us short) and how many.
fn waited(probe: &RunqProbe) -> (u64, u64) {
    let (sum_us, n) = probe.waits_of(std::process::id()).unwrap();
    (sum_us * 1000, n)
}

#[test]
fn a_read_holds_the_charges_since_the_last_one() {
    let Some((_one, mut probe)) = probe_of_this_process() else {
        return;
    };
    let me = std::process::id();
    let before = waited(&probe);
    contend(400);
    let taken = probe.charges(mono_ns());
    let after = waited(&probe);
    let (waited, waits) = (after.0 - before.0, after.1 - before.1);
    eprintln!(
        "{} charges, {:?}...; waits {waited} ns",
        taken.len(),
        &taken[..taken.len().min(5)]
    );
    assert!(!taken.is_empty(), "busy threads waited and were charged");
    assert!(
        taken.iter().all(|c| c.0 == me),
        "only this process is watched"
    );
    let mut pairs: Vec<(u32, u32)> = taken.iter().map(|c| (c.0, c.1)).collect();
    pairs.dedup();
    assert_eq!(pairs.len(), taken.len(), "a (rank, task) pair once");
    assert!(
        taken.iter().any(|c| c.1 == me),
        "its own busy threads were charged: {taken:?}"
    );
    // The charges split the waits among who ran meanwhile (a wait longer
    // than a CPU's last 32 switches is charged in part): their sum is at
    // most the waits, and most of them here.
    let charged: u64 = taken.iter().map(|c| c.2).sum();
    assert!(
        charged <= waited + waits * 1000 + 1_000_000 && charged * 2 >= waited,
        "charged {charged} ns of {waited} ns in {waits} waits"
    );
    // Read means counted: what a second read finds was charged since
    // (this test thread's own rare waits), far less than the first.
    let again: u64 = probe.charges(mono_ns()).iter().map(|c| c.2).sum();
    assert!(again * 10 < charged, "{again} ns again after {charged}");
    eprintln!("strategy: {}", probe.strategy());
}

#[test]
fn slots_of_tasks_not_charged_for_a_while_are_freed_and_claimed_again() {
    let Some((_one, mut probe)) = probe_of_this_process() else {
        return;
    };
    let me = std::process::id();
    contend(300);
    let first = probe.charges(mono_ns());
    let used = probe.culprit_slots_used(me).unwrap();
    assert!(used > 0, "charged tasks hold slots: {first:?}");
    // A read 20 s on, with nothing charged since, frees them all (a read
    // in between takes what this thread's own waits charged).
    probe.charges(mono_ns());
    probe.charges(mono_ns() + 20_000_000_000);
    let left = probe.culprit_slots_used(me).unwrap();
    assert!(left < used, "{left} of {used} slots still held");
    // The kernel claims the freed slots again: new waits are charged as
    // before.
    contend(300);
    let again = probe.charges(mono_ns() + 20_000_000_000);
    assert!(
        again.iter().any(|c| c.1 == me),
        "its busy threads charged again: {again:?}"
    );
    assert!(probe.culprit_slots_used(me).unwrap() > left);
}
