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

/// The count `enrich` gives the host's `sig` in a second-long frame (0
/// when it set none).
fn counted(enrich: impl FnOnce(&mut Frame), sig: Sig) -> f64 {
    let mut frame = second();
    enrich(&mut frame);
    frame.host.signals.get(sig).unwrap_or(0.0)
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
    let closed = counted(|f| probe.enrich(f), Sig::TcpClosedPerS);
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
    // The first read is the baseline (what came before kitty looked).
    probe.enrich(&mut second());
    const EXECS: usize = 10;
    for _ in 0..EXECS {
        let ok = Command::new("/bin/true").status().expect("runs /bin/true");
        assert!(ok.success());
    }
    let execs = counted(|f| probe.enrich(f), Sig::ExecsPerS);
    assert!(
        execs >= EXECS as f64,
        "{execs} execs counted for {EXECS} run"
    );
}
