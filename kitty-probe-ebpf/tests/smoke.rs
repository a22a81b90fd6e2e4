//! Loads every probe on this kernel and prints what attached.
mod support;
#[test]
fn probes_attach_here() {
    if !support::can_load_bpf() {
        return;
    }
    let p = kitty_probe_ebpf::Probes::start(Default::default());
    for (name, st) in p.statuses() {
        eprintln!("{name}: {st:?}");
        assert!(st.is_ok(), "{name}: {st:?}");
    }
    eprintln!("rtt tried: {:?}", p.rtt_tried());
}
