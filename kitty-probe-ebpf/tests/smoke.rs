//! Loads every probe on this kernel and prints what attached.
#[test]
fn probes_attach_here() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        assert!(std::env::var_os("CI").is_none(), "CI runs as root");
        eprintln!("skipped: loading BPF needs root");
        return;
    }
    let p = kitty_probe_ebpf::Probes::start(Default::default());
    for (name, st) in p.statuses() {
        eprintln!("{name}: {st:?}");
        assert!(st.is_ok(), "{name}: {st:?}");
    }
    eprintln!("rtt tried: {:?}", p.rtt_tried());
}
