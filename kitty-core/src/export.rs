//! `export`: a recording as tidy rows (one per rank or host per frame) in
//! JSON Lines or CSV, for pandas, jq or a spreadsheet.

use crate::frame::{Frame, Signals};
use std::collections::BTreeSet;
use std::io::Write;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Jsonl,
    Csv,
}

struct Row<'a> {
    frame: &'a Frame,
    entity: &'static str,
    pid: Option<u32>,
    rank: Option<u32>,
    job: Option<&'a str>,
    signals: &'a Signals,
}

fn rows(frames: &[Frame]) -> impl Iterator<Item = Row<'_>> {
    frames.iter().flat_map(|f| {
        std::iter::once(Row {
            frame: f,
            entity: "host",
            pid: None,
            rank: None,
            job: None,
            signals: &f.host.signals,
        })
        .chain(f.ranks.iter().map(move |r| Row {
            frame: f,
            entity: "rank",
            pid: Some(r.key.pid),
            rank: r.labels.rank,
            job: r.labels.job.as_deref(),
            signals: &r.signals,
        }))
    })
}

pub fn write(frames: &[Frame], format: Format, out: &mut dyn Write) -> std::io::Result<()> {
    match format {
        Format::Jsonl => {
            for r in rows(frames) {
                let mut obj = serde_json::Map::new();
                obj.insert(
                    "time".into(),
                    crate::timefmt::rfc3339(r.frame.wall_ns).into(),
                );
                obj.insert("wall_ns".into(), r.frame.wall_ns.into());
                obj.insert("entity".into(), r.entity.into());
                obj.insert("pid".into(), r.pid.into());
                obj.insert("rank".into(), r.rank.into());
                obj.insert("job".into(), r.job.into());
                for (k, v) in r.signals {
                    obj.insert(k.clone(), (*v).into());
                }
                serde_json::to_writer(&mut *out, &obj)?;
                out.write_all(b"\n")?;
            }
        }
        Format::Csv => {
            let names: BTreeSet<&String> = rows(frames).flat_map(|r| r.signals.keys()).collect();
            write!(out, "time,wall_ns,entity,pid,rank,job")?;
            for n in &names {
                write!(out, ",{n}")?;
            }
            writeln!(out)?;
            let opt = |v: Option<u32>| v.map(|v| v.to_string()).unwrap_or_default();
            for r in rows(frames) {
                write!(
                    out,
                    "{},{},{},{},{},{}",
                    crate::timefmt::rfc3339(r.frame.wall_ns),
                    r.frame.wall_ns,
                    r.entity,
                    opt(r.pid),
                    opt(r.rank),
                    csv_field(r.job.unwrap_or(""))
                )?;
                for n in &names {
                    match r.signals.get(*n) {
                        Some(v) => write!(out, ",{v}")?,
                        None => write!(out, ",")?,
                    }
                }
                writeln!(out)?;
            }
        }
    }
    Ok(())
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_has_union_of_columns_and_blank_for_absent() {
        let mut f = Frame {
            wall_ns: 1_000_000_000,
            ..Default::default()
        };
        f.host.signals.insert("cpu_util_pct".into(), 5.0);
        let mut out = Vec::new();
        write(&[f.clone()], Format::Csv, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text.lines().next().unwrap(),
            "time,wall_ns,entity,pid,rank,job,cpu_util_pct"
        );
        assert_eq!(
            text.lines().nth(1).unwrap(),
            "1970-01-01T00:00:01Z,1000000000,host,,,,5"
        );
        let mut out = Vec::new();
        write(&[f], Format::Jsonl, &mut out).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["cpu_util_pct"], 5.0);
        assert_eq!(csv_field("a,b"), "\"a,b\"");
    }
}
