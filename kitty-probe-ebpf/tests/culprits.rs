//! The run-queue culprit map taken each tick (read and emptied, by one
//! lookup-and-delete batch or by lookups): the charges of busy threads that
//! wait for each other are there once, add up to no more than their waits,
//! and a second take holds only what was charged since.
mod support;
use kitty_probe_ebpf::runq::{CulpritRead, RunqProbe};
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

/// The waits counted in this process's histogram so far: their sum in ns
/// (each counted in whole us, so up to 1 us short) and how many.
fn waited(probe: &RunqProbe) -> (u64, u64) {
    let (sum_us, n) = probe.waits_of(std::process::id()).unwrap();
    (sum_us * 1000, n)
}

#[test]
fn a_take_holds_the_charges_since_the_last_one() {
    if !support::can_load_bpf() {
        return;
    }
    let me = std::process::id();
    let mut probe = support::runq_watching_this_process();
    let mut compared = 0;
    for way in [CulpritRead::Batch, CulpritRead::Lookups] {
        // Whatever was charged before (the other way's turn) goes first.
        if probe.charges_by(way).is_none() {
            eprintln!("{way:?}: not on this kernel ({})", probe.strategy());
            continue;
        }
        let before = waited(&probe);
        contend(400);
        let taken = probe.charges_by(way).unwrap();
        let after = waited(&probe);
        let (waited, waits) = (after.0 - before.0, after.1 - before.1);
        eprintln!(
            "{way:?}: {} charges, {:?}...; waits {waited} ns",
            taken.len(),
            &taken[..taken.len().min(5)]
        );
        assert!(
            !taken.is_empty(),
            "{way:?}: busy threads waited and were charged"
        );
        assert!(
            taken.iter().all(|c| c.0 == me),
            "{way:?}: only this process is watched"
        );
        let mut pairs: Vec<(u32, u32)> = taken.iter().map(|c| (c.0, c.1)).collect();
        pairs.dedup();
        assert_eq!(
            pairs.len(),
            taken.len(),
            "{way:?}: a (rank, task) pair once"
        );
        // The charges split the waits among who ran meanwhile (a wait
        // longer than a CPU's last 32 switches is charged in part): their
        // sum is at most the waits, and most of them here.
        let charged: u64 = taken.iter().map(|c| c.2).sum();
        assert!(
            charged <= waited + waits * 1000 + 1_000_000 && charged * 2 >= waited,
            "{way:?}: charged {charged} ns of {waited} ns in {waits} waits"
        );
        // Taken means gone: what a second take finds was charged since
        // (this test thread's own rare waits), far less than the first.
        let again: u64 = probe.charges_by(way).unwrap().iter().map(|c| c.2).sum();
        assert!(
            again * 10 < charged,
            "{way:?}: {again} ns again after {charged}"
        );
        compared += 1;
    }
    assert!(
        compared > 0,
        "no way to take the charges: {}",
        probe.strategy()
    );
}
