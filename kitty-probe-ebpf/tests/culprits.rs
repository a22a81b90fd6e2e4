//! The run-queue culprit map read in one pass (its map iterator, or one
//! batch lookup) holds the same charges as read entry by entry with bpf()
//! calls.
mod support;
use kitty_probe_ebpf::runq::CulpritRead;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[test]
fn one_pass_reads_what_lookups_read() {
    if !support::can_load_bpf() {
        return;
    }
    let mut probe = support::runq_watching_this_process();
    // More busy threads than CPUs in this watched process wait for each
    // other, and are charged.
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
    std::thread::sleep(std::time::Duration::from_millis(400));
    stop.store(true, Ordering::Relaxed);
    for b in busy {
        b.join().unwrap();
    }
    // Each one-pass way this kernel has against the per-entry walk: a
    // kernel whose policy refuses map iterator programs outright (EPERM
    // before the verifier runs, as one 6.18 VM's did) still has batch
    // lookups (5.6 and later).
    let mut compared = 0;
    for way in [CulpritRead::Iterator, CulpritRead::Batch] {
        let Some(one_pass) = probe.charges_by(way) else {
            eprintln!("{way:?}: not on this kernel ({})", probe.strategy());
            continue;
        };
        let by_calls = probe.charges_by(CulpritRead::Lookups).unwrap();
        eprintln!(
            "{way:?}: {} charges: {:?}",
            one_pass.len(),
            &one_pass[..one_pass.len().min(5)]
        );
        assert!(!one_pass.is_empty(), "busy threads waited and were charged");
        let keys = |v: &[(u32, u32, u64)]| v.iter().map(|c| (c.0, c.1)).collect::<Vec<_>>();
        assert_eq!(
            keys(&one_pass),
            keys(&by_calls),
            "{way:?}: the same (rank, task) charges"
        );
        // Read one after the other while this test thread may still wait
        // now and then: the later read may only have grown, and barely.
        for (a, b) in one_pass.iter().zip(&by_calls) {
            assert!(b.2 >= a.2 && b.2 - a.2 < 50_000_000, "{a:?} then {b:?}");
        }
        assert!(one_pass.iter().all(|c| c.0 == std::process::id()));
        compared += 1;
    }
    assert!(compared > 0, "neither one-pass way: {}", probe.strategy());
}
