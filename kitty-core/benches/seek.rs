//! Seeking in a one-hour recording (8 ranks at 500 ms, 7,200 frames in
//! the current format): opening it (reading the 28-byte record heads into the index)
//! and decoding the frame at a time (its keyframe and each frame after it
//! up to that one), as `replay --at` and `:seek` do. Issue 12's bar: under
//! 1 s.

#[path = "support/synth.rs"]
mod synth;

use criterion::{criterion_group, criterion_main, Criterion};
use kitty_core::sinks::record::{Header, Reader, Writer, KEY_EVERY};
use std::time::Duration;

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hour.kitty");
    let interval = Duration::from_millis(500);
    let mut w = Writer::create(&path, &Header::now("synth", interval)).unwrap();
    let t0 = 1_764_403_200_000_000_000u64;
    let frames = 3600 * 2;
    for i in 0..frames {
        w.append(&synth::frame(i, t0, 8)).unwrap();
    }
    w.finish().unwrap();
    let size = std::fs::metadata(&path).unwrap().len();
    eprintln!("one hour, 8 ranks: {frames} frames, {} KB", size / 1000);
    let mut g = c.benchmark_group("seek");
    g.sample_size(20);
    // A time 37 minutes and a bit in: never a keyframe's own slot.
    let at = t0 + (37 * 60 + 13) * 1_000_000_000 + 500_000_000;
    g.bench_function(
        "open a one-hour recording and decode the frame at 37:13",
        |b| {
            b.iter(|| {
                let mut r = Reader::open(&path).unwrap();
                let i = r.seek_wall(at);
                let f = r.frame(i).unwrap();
                assert_eq!(f.wall_ns, at);
                f
            })
        },
    );
    let mut r = Reader::open(&path).unwrap();
    // The last frames of two keyframe groups in turn: each read decodes a
    // keyframe and the KEY_EVERY - 1 frames after it (the most a seek
    // decodes).
    let last_of_group = |k: u64| t0 + (k * KEY_EVERY + KEY_EVERY - 1) * 500_000_000;
    let (a, b) = (last_of_group(139), last_of_group(140));
    let mut turn = false;
    g.bench_function(
        "decode the last frame of a keyframe group, recording open",
        |bench| {
            bench.iter(|| {
                turn = !turn;
                let i = r.seek_wall(if turn { a } else { b });
                assert_eq!(i as u64 % KEY_EVERY, KEY_EVERY - 1);
                r.frame(i).unwrap()
            })
        },
    );
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
