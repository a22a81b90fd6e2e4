//! Writing a recording: one frame appended in place, as the recorder does
//! (its JSON, the columns of its changes against the frame before, zstd),
//! over the frames of a real 3-rank job (`tests/fixtures/recording-v2.kitty`,
//! read back and written again in turn, keyframes included as they fall),
//! and the bytes per minute that gives at 500 ms.
//! `KITTY_BENCH_RECORDING=FILE` takes the frames (and the header: with or
//! without histograms) of another recording instead, e.g. one of the
//! 8-rank ring from `scripts/anchor-compare.sh`.

use criterion::{criterion_group, criterion_main, Criterion};
use kitty_core::sinks::record::{Header, Reader, Sink, Writer, MAJOR};

fn bench(c: &mut Criterion) {
    let fixture = match std::env::var_os("KITTY_BENCH_RECORDING") {
        Some(p) => std::path::PathBuf::from(p),
        None => std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/recording-v2.kitty"),
    };
    let mut r = Reader::open(&fixture).unwrap();
    let (mut frames, _) = r.read_all();
    let header = Header::now("bench", std::time::Duration::from_millis(500))
        .with_histograms(r.header().keeps_histograms());
    let mut w = Writer::new(Sink::Stream(Box::new(std::io::sink())), "sink", &header).unwrap();
    let start = w.bytes();
    for f in &frames {
        w.append(f).unwrap();
    }
    let per_min = (w.bytes() - start) as f64 / frames.len() as f64 * 120.0 / 1024.0;
    eprintln!(
        "{} frames of {}: {per_min:.0} KB per minute at 500 ms in format {MAJOR} (as read: {:.0}); \
         {} deltas written from the frames' types",
        frames.len(),
        fixture.display(),
        std::fs::metadata(&fixture).unwrap().len() as f64 / frames.len() as f64 * 120.0 / 1024.0,
        w.typed_deltas()
    );
    let mut n = 0;
    c.bench_function("append a frame of a 3-rank job", |b| {
        b.iter(|| {
            // The recorder's way: marked in place and put back, no copy.
            let at = n % frames.len();
            w.append_in_place(&mut frames[at]).unwrap();
            n += 1;
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
