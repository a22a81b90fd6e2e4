//! `replay`: the TUI over a recording, or `--dump`: the recording as plain
//! text, one block per frame.

use crate::cli::ReplayArgs;
use color_eyre::eyre::Result;
use kitty_core::model::format::value;
use kitty_core::model::Sig;
use kitty_core::sinks::record::Reader;
use std::io::Write;
use std::path::Path;

/// Opens a recording, with its warnings (truncation, damage) on stderr.
pub fn open(file: &Path) -> Result<Reader> {
    let r = Reader::open(file)?;
    for w in r.warnings() {
        crate::say::warn(w);
    }
    Ok(r)
}

pub fn run(a: ReplayArgs) -> Result<i32> {
    let r = open(&a.file)?;
    if a.dump {
        dump(r)
    } else {
        crate::tui::run_replay(r, &a.file.display().to_string(), a.at.as_deref(), a.utc).map_err(
            |e| match e {
                e @ crate::tui::TuiError::At(_) => crate::error::UsageError::new(e).into(),
                e => color_eyre::eyre::Report::from(e),
            },
        )
    }
}

/// The signals `--dump` shows per rank.
const DUMPED: [Sig; 4] = [
    Sig::CpuPct,
    Sig::RunDelayMsPerS,
    Sig::RetransPerS,
    Sig::TxQueueBytes,
];

fn dump(mut r: Reader) -> Result<i32> {
    let h = r.header().clone();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    writeln!(
        out,
        "# {} recorded by kitty {} every {} ms, {} frames",
        h.host,
        h.kitty_version,
        h.interval_ms,
        r.len()
    )?;
    let mut skipped = crate::say::Skipped::default();
    for i in 0..r.len() {
        match r.frame(i) {
            Ok(f) => {
                skipped.warn_end();
                writeln!(
                    out,
                    "frame {} at {}",
                    f.seq,
                    kitty_core::model::time::rfc3339(f.wall_ns)
                )?;
                for rank in &f.ranks {
                    let sig: Vec<String> = DUMPED
                        .iter()
                        .filter_map(|s| rank.signal(*s).map(|v| format!("{s}={}", value(*s, v))))
                        .collect();
                    // A cluster recording names the node instead of a pid.
                    let whose = match rank.node.as_deref() {
                        Some(n) => format!("on {n}{}", if rank.stale { " (stale)" } else { "" }),
                        None => format!("pid {} {}", rank.key.pid, rank.comm),
                    };
                    writeln!(out, "  {} {whose} {}", rank.display_name(), sig.join(" "))?;
                }
                for v in &f.verdicts {
                    writeln!(out, "  VERDICT {}", v.message)?;
                }
                for v in &f.node_verdicts {
                    writeln!(out, "  NODE VERDICT {}", v.message)?;
                }
                for e in &f.events {
                    writeln!(out, "  EVENT {}", e.message)?;
                }
            }
            Err(e) => skipped.warn(e),
        }
    }
    skipped.warn_end();
    out.flush()?;
    Ok(crate::error::OK)
}
