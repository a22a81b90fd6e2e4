//! Loads every probe on this kernel and prints what attached; the parsed
//! kernel BTF is let go once they run, and parsed again for a later load.
mod support;
use kitty_core::model::Frame;
use kitty_core::sources::Enricher;
use kitty_probe_ebpf::load;

fn rss_anon_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("RssAnon:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

// One test in this binary: the BTF cache is process-wide.
#[test]
fn probes_attach_here_and_let_the_btf_go_once_running() {
    if !support::can_load_bpf() {
        return;
    }
    let mut p = kitty_probe_ebpf::Probes::start(Default::default());
    for (name, st) in p.statuses() {
        eprintln!("{name}: {st:?}");
        assert!(st.is_ok(), "{name}: {st:?}");
    }
    eprintln!("rtt tried: {:?}", p.rtt_tried());
    assert!(load::kernel_btf_kept(), "kept while probes start");
    let before = rss_anon_kb();
    let mut frame = Frame::default();
    p.enrich(&mut frame);
    assert!(!load::kernel_btf_kept(), "let go at the first enrich");
    eprintln!("anonymous RSS {before} kB -> {} kB", rss_anon_kb());
    // The probes go on without it.
    let mut frame = Frame::default();
    p.enrich(&mut frame);
    assert_eq!(frame.sources.len(), p.statuses().len());
    for (name, st) in frame.sources.iter() {
        assert!(st.is_ok(), "{name}: {st:?}");
    }
    // A later load parses it again.
    let it = kitty_probe_ebpf::tasks::TaskIter::start().expect("the task iterator loads");
    assert!(load::kernel_btf_kept());
    load::release_kernel_btf();
    assert!(!load::kernel_btf_kept());
    drop(it);
}
