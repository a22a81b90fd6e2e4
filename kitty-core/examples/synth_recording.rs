//! Writes a synthetic recording shaped like a real one (ranks with their
//! signals, sockets and threads; host; events now and then), for the export
//! memory benchmark and the recording size and seek benchmarks:
//!
//! `cargo run --release -p kitty-core --example synth_recording -- OUT HOURS [RANKS]`

#[path = "../benches/support/synth.rs"]
mod synth;

use kitty_core::sinks::record::{Header, Writer};
use std::time::Duration;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: synth_recording OUT HOURS [RANKS]");
        std::process::exit(2);
    }
    let hours: f64 = args[2].parse().expect("hours");
    let ranks: u32 = args.get(3).map_or(8, |r| r.parse().expect("ranks"));
    let interval = Duration::from_millis(500);
    let frames = (hours * 3600.0 / interval.as_secs_f64()) as u64;
    let mut w = Writer::create(
        std::path::Path::new(&args[1]),
        &Header::now("synth", interval),
    )
    .expect("create the recording");
    let t0 = kitty_core::model::time::wall_ns();
    for i in 0..frames {
        w.append(&synth::frame(i, t0, ranks)).expect("append");
    }
    w.finish().expect("finish");
    eprintln!("{frames} frames of {ranks} ranks to {}", args[1]);
}
