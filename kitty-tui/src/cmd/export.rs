//! `export`: a recording to JSON Lines or CSV.

use crate::cli::ExportFormat;
use kitty_core::export::{write, Format};
use std::io::Write;
use std::path::Path;

pub fn run(file: &Path, format: ExportFormat, output: Option<&Path>) -> super::Result<i32> {
    let mut r = super::replay::open(file)?;
    let (frames, skipped) = r.read_all();
    for e in &skipped {
        eprintln!("kitty-tui: warning: {e}; skipped");
    }
    let fmt = match format {
        ExportFormat::Jsonl => Format::Jsonl,
        ExportFormat::Csv => Format::Csv,
    };
    let mut out: Box<dyn Write> = match output {
        Some(p) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(p).map_err(|e| format!("cannot write {}: {e}", p.display()))?,
        )),
        None => Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
    };
    write(&frames, fmt, &mut out)
        .and_then(|_| out.flush())
        .map_err(|e| format!("export: {e}"))?;
    Ok(0)
}
