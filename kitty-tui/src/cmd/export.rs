//! `export`: a recording to JSON Lines or CSV, streamed frame by frame
//! (constant memory), to standard output or a file written atomically.

use super::check_output;
use crate::cli::{ExportArgs, ExportFormat};
use color_eyre::eyre::{Result, WrapErr};
use kitty_core::sinks::export::{Exporter, Format};
use kitty_core::sinks::files::{AtomicFile, Kind, Target};
use kitty_core::sinks::record::Reader;
use std::io::{BufWriter, Write};

pub fn run(a: ExportArgs) -> Result<i32> {
    let (format, kind) = match a.format {
        ExportFormat::Jsonl => (Format::Jsonl, Kind::ExportJsonl),
        ExportFormat::Csv => (Format::Csv(a.table.table()), Kind::ExportCsv),
    };
    let target = match &a.output {
        Some(p) => check_output(p, kind, a.force)?,
        None => Target::Stdout,
    };
    let reader = super::replay::open(&a.file)?;
    match target {
        Target::Stdout => {
            stream(reader, format, BufWriter::new(std::io::stdout().lock()))?;
        }
        Target::File(p) => {
            let out = stream(reader, format, BufWriter::new(AtomicFile::create(&p)?))?;
            out.into_inner().map_err(|e| e.into_error())?.commit()?;
        }
    }
    Ok(crate::error::OK)
}

/// Every readable frame into the exporter, one at a time.
fn stream<W: Write>(mut reader: Reader, format: Format, out: W) -> Result<W> {
    let mut e = Exporter::new(out, format);
    let mut skipped = crate::say::Skipped::default();
    for i in 0..reader.len() {
        match reader.frame(i) {
            Ok(f) => {
                skipped.warn_end();
                e.frame(&f).wrap_err("export")?
            }
            Err(err) => skipped.warn(err),
        }
    }
    skipped.warn_end();
    e.finish().wrap_err("export")
}
