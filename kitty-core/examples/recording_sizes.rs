//! Sizes in a recording: keyframes and deltas, bytes per minute, and the
//! frame JSON's size by part (what a recording spends its bytes on):
//! `cargo run -p kitty-core --example recording_sizes -- FILE`.
#![allow(clippy::print_stdout)]
use kitty_core::sinks::record::Reader;

fn main() {
    let path = std::env::args()
        .nth(1)
        .expect("usage: recording_sizes FILE");
    let mut r = Reader::open(std::path::Path::new(&path)).expect("open");
    let idx = r.index().to_vec();
    let (keys, deltas): (Vec<_>, Vec<_>) = idx.iter().partition(|e| e.key);
    let avg = |v: &[&kitty_core::sinks::record::IndexEntry]| {
        v.iter().map(|e| e.len as u64).sum::<u64>() / v.len().max(1) as u64
    };
    let span_s = (idx.last().unwrap().wall_ns - idx[0].wall_ns) as f64 / 1e9;
    let bytes = std::fs::metadata(&path).unwrap().len();
    println!(
        "{} frames over {span_s:.0} s: {} keyframes of {} B, {} deltas of {} B; {:.0} KB per minute",
        idx.len(),
        keys.len(),
        avg(&keys),
        deltas.len(),
        avg(&deltas),
        bytes as f64 / 1024.0 / (span_s / 60.0)
    );
    let f = r.frame(idx.len() / 2).expect("a frame");
    let part = |name: &str, v: serde_json::Value| {
        println!("  {name:<12} {:>8} B of JSON", v.to_string().len());
    };
    let v = serde_json::to_value(&f).unwrap();
    if let Some(o) = v.as_object() {
        let mut parts: Vec<_> = o.iter().collect();
        parts.sort_by_key(|(_, v)| std::cmp::Reverse(v.to_string().len()));
        for (k, v) in parts.into_iter().take(6) {
            part(k, v.clone());
        }
    }
    if let Some(r0) = v["ranks"].get(0).and_then(|r| r.as_object()) {
        let mut parts: Vec<_> = r0.iter().collect();
        parts.sort_by_key(|(_, v)| std::cmp::Reverse(v.to_string().len()));
        println!("  one rank:");
        for (k, v) in parts.into_iter().take(6) {
            part(k, v.clone());
        }
    }
}
