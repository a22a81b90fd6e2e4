//! The node-wide counters the probes read in place each tick (mapped
//! arrays, no `bpf()` call) count what the kernel did: TCP connections
//! closed (the flow probe), execs (the events probe).
mod support;
use kitty_core::model::{Frame, Sig};
use kitty_core::sampler::WatchHints;
use kitty_probe_ebpf::events::EventsProbe;
use kitty_probe_ebpf::flow::FlowProbe;
use std::process::Command;

/// A frame a second long: a per-second signal is then the tick's count.
fn second() -> Frame {
    Frame {
        interval_ms: 1000,
        ..Default::default()
    }
}

#[test]
fn closed_connections_are_counted() {
    if !support::can_load_bpf() {
        return;
    }
    let mut probe = FlowProbe::start().expect("the flow probe attaches here");
    probe.enrich(&mut second());
    const PAIRS: usize = 20;
    for _ in 0..PAIRS {
        let (c, s) = support::loopback_pair();
        drop((c, s));
    }
    // Each pair's sockets reach TCP_CLOSE once both FINs are through.
    std::thread::sleep(std::time::Duration::from_millis(200));
    let mut frame = second();
    probe.enrich(&mut frame);
    let closed = frame.host.signals.get(Sig::TcpClosedPerS).unwrap_or(0.0);
    // Other closes on the node can only add to it.
    assert!(
        closed >= PAIRS as f64,
        "{closed} closes counted for {PAIRS} connections closed"
    );
}

#[test]
fn execs_are_counted() {
    if !support::can_load_bpf() {
        return;
    }
    let mut probe = EventsProbe::start(WatchHints::default()).expect("the events probe attaches");
    let run = |n: usize| {
        for _ in 0..n {
            let ok = Command::new("/bin/true").status().expect("runs /bin/true");
            assert!(ok.success());
        }
    };
    // The first read is the baseline (what came before kitty looked).
    probe.enrich(&mut second());
    const EXECS: usize = 10;
    run(EXECS);
    let mut frame = second();
    probe.enrich(&mut frame);
    let execs = frame.host.signals.get(Sig::ExecsPerS).unwrap_or(0.0);
    assert!(
        execs >= EXECS as f64,
        "{execs} execs counted for {EXECS} run"
    );
}
