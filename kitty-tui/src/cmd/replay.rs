//! `replay --dump`: a recording as plain text, one block per frame.

use kitty_core::record::Reader;
use kitty_core::signals::format_value;
use std::path::Path;

pub fn open(file: &Path) -> super::Result<Reader> {
    let r = Reader::open(file).map_err(|e| e.to_string())?;
    for w in r.warnings() {
        eprintln!("kitty-tui: warning: {w}");
    }
    Ok(r)
}

pub fn dump(file: &Path) -> super::Result<i32> {
    let mut r = open(file)?;
    let h = r.header().clone();
    println!(
        "# {} recorded by kitty {} every {} ms, {} frames",
        h.host,
        h.kitty_version,
        h.interval_ms,
        r.len()
    );
    for i in 0..r.len() {
        match r.frame(i) {
            Ok(f) => {
                println!(
                    "frame {} at {}",
                    f.seq,
                    kitty_core::timefmt::rfc3339(f.wall_ns)
                );
                for rank in &f.ranks {
                    let sig: Vec<String> = [
                        "cpu_pct",
                        "run_delay_ms_per_s",
                        "retrans_per_s",
                        "tx_queue_bytes",
                    ]
                    .iter()
                    .filter_map(|s| {
                        rank.signal(s)
                            .map(|v| format!("{s}={}", format_value(s, v)))
                    })
                    .collect();
                    println!(
                        "  {} pid {} {}",
                        rank.display_name(),
                        rank.key.pid,
                        sig.join(" ")
                    );
                }
                for v in &f.verdicts {
                    println!("  VERDICT {}", v.message);
                }
            }
            Err(e) => eprintln!("kitty-tui: warning: {e}; skipped"),
        }
    }
    Ok(0)
}
