//! The run-queue culprit map read through its map iterator (one read) holds
//! the same charges as read entry by entry with bpf() calls.
mod support;
use kitty_core::model::{Frame, ProcKey, RankFrame};
use kitty_probe_ebpf::runq::RunqProbe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[test]
fn the_map_iterator_reads_what_lookups_read() {
    if !support::can_load_bpf() {
        return;
    }
    let mut probe = RunqProbe::start().expect("the run-queue probe attaches here");
    let mut frame = Frame {
        interval_ms: 500,
        ranks: vec![RankFrame {
            key: ProcKey {
                pid: std::process::id(),
                start_time: 0,
            },
            ..Default::default()
        }],
        ..Default::default()
    };
    // A kernel whose policy refuses map iterator programs outright (EPERM
    // before the verifier runs, as one 6.18 VM's did) has nothing to
    // compare: the probe reads entry by entry there and says so.
    if let Some(kitty_probe_ebpf::load::ProbeError::Refused) = probe.one_pass_refused() {
        eprintln!("skipped: this kernel refuses iter/bpf_map_elem programs (EPERM before verification); culprits are read by lookups here");
        return;
    }
    probe.enrich(&mut frame); // watch this process
                              // More busy threads than CPUs: they wait for each other, and are charged.
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
    let (via_iter, via_calls) = probe
        .culprits_both_ways()
        .expect("map iterators link on this kernel");
    eprintln!(
        "{} charges: {:?}",
        via_iter.len(),
        &via_iter[..via_iter.len().min(5)]
    );
    assert!(!via_iter.is_empty(), "busy threads waited and were charged");
    let keys = |v: &[(u32, u32, u64)]| v.iter().map(|c| (c.0, c.1)).collect::<Vec<_>>();
    assert_eq!(
        keys(&via_iter),
        keys(&via_calls),
        "the same (rank, task) charges"
    );
    // Read one after the other while this test thread may still wait now
    // and then: the later read may only have grown, and barely.
    for (a, b) in via_iter.iter().zip(&via_calls) {
        assert!(b.2 >= a.2 && b.2 - a.2 < 50_000_000, "{a:?} then {b:?}");
    }
    assert!(via_iter.iter().all(|c| c.0 == std::process::id()));
}
