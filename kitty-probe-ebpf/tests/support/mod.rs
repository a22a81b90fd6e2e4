//! What the probe tests share.
// Each test binary uses a part of it.
#![allow(dead_code)]

/// Whether this test can load BPF (root); says why it skips otherwise, and
/// fails on CI, which runs as root.
pub fn can_load_bpf() -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    assert!(std::env::var_os("CI").is_none(), "CI runs as root");
    eprintln!("skipped: loading BPF needs root");
    false
}

/// The run-queue probe, started, watching this test's own process (its
/// first enrich has run).
pub fn runq_watching_this_process() -> kitty_probe_ebpf::runq::RunqProbe {
    use kitty_core::model::{Frame, ProcKey, RankFrame};
    let mut probe =
        kitty_probe_ebpf::runq::RunqProbe::start().expect("the run-queue probe attaches here");
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
    probe.enrich(&mut frame);
    probe
}

/// A connected loopback TCP pair: (client, server).
pub fn loopback_pair() -> (std::net::TcpStream, std::net::TcpStream) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (s, _) = l.accept().unwrap();
    (c, s)
}
