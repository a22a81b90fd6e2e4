//! What each part of a recording costs: the recording written again (the
//! current format, in memory of a temporary file) as it is, then without
//! one part at a time, or with its latency histograms coarser, in KB per
//! minute: `cargo run --release -p kitty-core --example recording_parts --
//! FILE [PART...]` (parts: as-is, rtt, runq, histograms, coarse, culprits,
//! threads, sockets, flows; all by default; also windowN: each rank's
//! histograms summed over N ticks, kept only at the end of each window).
#![allow(clippy::print_stdout)]
use kitty_core::model::{grid, Frame, HistKind};
use kitty_core::sinks::record::{Reader, Writer};
use std::collections::BTreeMap;

const PARTS: [&str; 9] = [
    "as-is",
    "rtt",
    "runq",
    "histograms",
    "coarse",
    "culprits",
    "threads",
    "sockets",
    "flows",
];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let path = args.first().expect("usage: recording_parts FILE [PART...]");
    let mut r = Reader::open(std::path::Path::new(path)).expect("open");
    let frames: Vec<Frame> = (0..r.len()).map(|i| r.frame(i).expect("a frame")).collect();
    let minutes = (frames.last().unwrap().wall_ns - frames[0].wall_ns) as f64 / 60e9;
    let parts: Vec<&str> = match args.len() {
        1 => PARTS.to_vec(),
        _ => args[1..].iter().map(String::as_str).collect(),
    };
    let out = std::env::temp_dir().join(format!("recording-parts-{}.kitty", std::process::id()));
    for part in parts {
        let mut w = Writer::create(&out, r.header()).expect("a temporary file");
        let mut window = Window::default();
        for (i, f) in frames.iter().enumerate() {
            let mut f = f.clone();
            if let Some(n) = part.strip_prefix("window").and_then(|n| n.parse().ok()) {
                window.apply(&mut f, i, n);
            }
            without(&mut f, part);
            w.append(&f).expect("written");
        }
        w.finish().expect("written");
        let bytes = std::fs::metadata(&out).unwrap().len();
        println!("{part:<11} {:6.1} KB/min", bytes as f64 / 1024.0 / minutes);
    }
    let _ = std::fs::remove_file(&out);
}

/// The frame without `part` (its latency percentiles stay as recorded).
fn without(f: &mut Frame, part: &str) {
    if part == "flows" {
        f.flows.clear();
    }
    for r in &mut f.ranks {
        match part {
            "rtt" => drop(r.histograms.remove(HistKind::RttUs)),
            "runq" => drop(r.histograms.remove(HistKind::RunqUs)),
            "histograms" => r.histograms = Default::default(),
            "culprits" => r.ran_instead.clear(),
            "threads" => r.threads.clear(),
            "sockets" => r.sockets.clear(),
            "coarse" => {
                for kind in [HistKind::RttUs, HistKind::RunqUs] {
                    if let Some(h) = r.histograms.get_mut(kind) {
                        *h = coarser(h);
                    }
                }
            }
            _ => {}
        }
    }
}

/// Histograms summed per rank (by index in the frame) over a window.
#[derive(Default)]
struct Window(BTreeMap<(usize, usize), BTreeMap<u64, u64>>);

impl Window {
    /// Takes frame `i`'s histograms into the window; puts the sums back
    /// into the frame that ends a window of `n`.
    fn apply(&mut self, f: &mut Frame, i: usize, n: usize) {
        let kinds = [HistKind::RttUs, HistKind::RunqUs];
        for (ri, r) in f.ranks.iter_mut().enumerate() {
            for (ki, kind) in kinds.into_iter().enumerate() {
                let sum = self.0.entry((ri, ki)).or_default();
                for (upper, count) in r.histograms.remove(kind).unwrap_or_default() {
                    *sum.entry(upper as u64).or_default() += count;
                }
                if i % n == n - 1 && !sum.is_empty() {
                    let pairs = sum.iter().map(|(&u, &c)| (u as f64, c)).collect();
                    r.histograms.insert(kind, pairs);
                    sum.clear();
                }
            }
        }
    }
}

/// Two buckets an octave instead of eight: each four buckets of the grid
/// summed into the last of them.
fn coarser(h: &[(f64, u64)]) -> Vec<(f64, u64)> {
    let sub = 1usize << grid::SUB_BITS;
    let mut merged = BTreeMap::<usize, u64>::new();
    for &(upper, count) in h {
        let Some(i) = grid::bucket_with_upper(upper as u64) else {
            continue;
        };
        let j = if i < sub { i } else { i / 4 * 4 + 3 };
        *merged.entry(j).or_default() += count;
    }
    merged
        .into_iter()
        .map(|(j, c)| (grid::bucket_bounds(j).1, c))
        .collect()
}
