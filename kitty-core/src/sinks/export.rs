//! `export`: a recording as tidy rows for pandas, polars, DuckDB or jq,
//! streamed one frame at a time (constant memory, whatever the length).
//!
//! Tables: `ranks` (one row per rank per frame), `host`, `gpus`, `nics`
//! (RDMA ports), `verdicts`, `findings` and `events`. Columns are fixed by this kitty version: identity columns,
//! then every catalog signal of the table's scope, in catalog order, so two
//! recordings export to the same columns. Times are `time_ns` (epoch
//! nanoseconds, an integer) and `time` (RFC 3339 with nanoseconds). Counts
//! are integers. JSON Lines puts every table in one stream, each row with a
//! `kind`; CSV writes one table.

use crate::model::time::rfc3339_ns;
use crate::model::{scope, Frame, Sig, Signals, Unit};
use crate::named_enum;
use serde_json::{Map, Value};
use std::io::Write;

named_enum! {
    /// An export table.
    pub enum Table {
        Ranks = "ranks",
        Host = "host",
        Gpus = "gpus",
        Nics = "nics",
        Verdicts = "verdicts",
        Findings = "findings",
        Events = "events",
    }
}

impl Table {
    /// The `kind` of a JSON Lines row of this table.
    fn kind(self) -> &'static str {
        match self {
            Table::Ranks => "rank",
            Table::Host => "host",
            Table::Gpus => "gpu",
            Table::Nics => "nic",
            Table::Verdicts => "verdict",
            Table::Findings => "finding",
            Table::Events => "event",
        }
    }

    /// Identity columns (before the signals).
    fn id_columns(self) -> &'static [&'static str] {
        match self {
            Table::Ranks => &[
                "time_ns",
                "time",
                "node",
                "job",
                "job_id",
                "rank",
                "local_rank",
                "pid",
                "start_time",
                "comm",
                "pod_uid",
                "container_id",
                "gpu",
                "state",
            ],
            Table::Host => &["time_ns", "time", "node"],
            Table::Gpus => &["time_ns", "time", "node", "gpu", "name", "status"],
            Table::Nics => &[
                "time_ns",
                "time",
                "node",
                "device",
                "port",
                "link_layer",
                "state",
                "pids",
                "problem",
            ],
            Table::Verdicts => &[
                "time_ns",
                "time",
                "node",
                "job",
                "rank",
                "pid",
                "signal",
                "value",
                "peak",
                "peer_median",
                "ratio",
                "score",
                "for_s",
                "severity",
                "consequence_of_rank",
                "consequence_of_signal",
                "culprit_pid",
                "culprit_comm",
                "culprit_share_pct",
                "message",
            ],
            Table::Findings => &[
                "time_ns", "time", "node", "job", "kind", "ranks", "pids", "for_s", "message",
                "remedy",
            ],
            Table::Events => &["time_ns", "time", "node", "kind", "message"],
        }
    }

    fn signals(self) -> Vec<Sig> {
        match self {
            Table::Ranks => Sig::in_scope(scope::RANK).collect(),
            Table::Host => Sig::in_scope(scope::HOST).collect(),
            Table::Gpus => Sig::in_scope(scope::GPU).collect(),
            Table::Nics => Sig::in_scope(scope::NIC).collect(),
            Table::Verdicts | Table::Findings | Table::Events => Vec::new(),
        }
    }

    /// Every column, in order.
    pub fn columns(self) -> Vec<&'static str> {
        let mut c = self.id_columns().to_vec();
        c.extend(self.signals().into_iter().map(|s| s.name()));
        c
    }
}

/// Every CSV export starts like this (how `-o` recognises kitty's own).
pub const CSV_SIGNATURE: &str = "time_ns,time,node";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Every table in one stream, a `kind` per row.
    Jsonl,
    /// One table.
    Csv(Table),
}

/// A number as an integer when its unit counts things and it is whole.
fn number(unit: Unit, v: f64) -> Value {
    let countlike = matches!(unit, Unit::Count | Unit::Flag | Unit::Cpus);
    if countlike && v.fract() == 0.0 && v.abs() < 9.0e15 {
        Value::from(v as i64)
    } else {
        Value::from(v)
    }
}

fn opt<T: Into<Value>>(v: Option<T>) -> Value {
    v.map_or(Value::Null, Into::into)
}

/// The rows one frame gives a table, as (column, value) maps.
fn rows(f: &Frame, table: Table) -> Vec<Map<String, Value>> {
    let base = |m: &mut Map<String, Value>, wall_ns: u64| {
        m.insert("time_ns".into(), Value::from(wall_ns));
        m.insert("time".into(), Value::from(rfc3339_ns(wall_ns)));
        m.insert("node".into(), Value::from(f.node.as_str()));
    };
    let put_signals = |m: &mut Map<String, Value>, s: &Signals| {
        for (k, v) in s.iter() {
            m.insert(k.name().into(), number(k.unit(), v));
        }
    };
    let mut out = Vec::new();
    match table {
        Table::Ranks => {
            for r in &f.ranks {
                let mut m = Map::new();
                base(&mut m, f.wall_ns);
                m.insert("job".into(), opt(r.labels.job.as_deref()));
                m.insert("job_id".into(), opt(r.labels.job_id.as_deref()));
                m.insert("rank".into(), opt(r.labels.rank));
                m.insert("local_rank".into(), opt(r.labels.local_rank));
                m.insert("pid".into(), Value::from(r.key.pid));
                m.insert("start_time".into(), Value::from(r.key.start_time));
                m.insert("comm".into(), Value::from(r.comm.as_str()));
                m.insert("pod_uid".into(), opt(r.labels.pod_uid.as_deref()));
                m.insert("container_id".into(), opt(r.labels.container_id.as_deref()));
                m.insert("gpu".into(), opt(r.gpu));
                m.insert("state".into(), Value::from(r.state.as_str()));
                put_signals(&mut m, &r.signals);
                out.push(m);
            }
        }
        Table::Host => {
            let mut m = Map::new();
            base(&mut m, f.wall_ns);
            put_signals(&mut m, &f.host.signals);
            out.push(m);
        }
        Table::Gpus => {
            for g in &f.gpus {
                let mut m = Map::new();
                base(&mut m, f.wall_ns);
                m.insert("gpu".into(), Value::from(g.index));
                m.insert("name".into(), Value::from(g.name.as_str()));
                m.insert("status".into(), Value::from(g.status.name()));
                put_signals(&mut m, &g.signals);
                out.push(m);
            }
        }
        Table::Nics => {
            for n in &f.nics {
                let mut m = Map::new();
                base(&mut m, f.wall_ns);
                m.insert("device".into(), Value::from(n.device.as_str()));
                m.insert("port".into(), Value::from(n.port));
                m.insert("link_layer".into(), opt(n.link_layer.as_deref()));
                m.insert("state".into(), opt(n.state.as_deref()));
                let pids: Vec<String> = n.pids.iter().map(u32::to_string).collect();
                m.insert("pids".into(), Value::from(pids.join(" ")));
                m.insert("problem".into(), opt(n.problem.as_deref()));
                put_signals(&mut m, &n.signals);
                out.push(m);
            }
        }
        Table::Verdicts => {
            for v in &f.verdicts {
                let mut m = Map::new();
                base(&mut m, f.wall_ns);
                m.insert("job".into(), opt(v.job.as_deref()));
                m.insert("rank".into(), opt(v.rank));
                m.insert("pid".into(), Value::from(v.pid));
                m.insert("signal".into(), Value::from(v.signal.name()));
                m.insert("value".into(), Value::from(v.value));
                m.insert("peak".into(), Value::from(v.peak));
                m.insert("peer_median".into(), Value::from(v.peer_median));
                m.insert("ratio".into(), Value::from(v.ratio));
                m.insert("score".into(), Value::from(v.score));
                m.insert("for_s".into(), Value::from(v.for_s));
                m.insert(
                    "severity".into(),
                    serde_json::to_value(v.severity).unwrap_or(Value::Null),
                );
                let cause = v.consequence_of.as_ref();
                m.insert(
                    "consequence_of_rank".into(),
                    opt(cause.and_then(|c| c.rank)),
                );
                m.insert(
                    "consequence_of_signal".into(),
                    opt(cause.map(|c| c.signal.name())),
                );
                let top = v.culprits.first();
                m.insert("culprit_pid".into(), opt(top.map(|c| c.pid)));
                m.insert("culprit_comm".into(), opt(top.map(|c| c.comm.as_str())));
                m.insert("culprit_share_pct".into(), opt(top.map(|c| c.share_pct)));
                m.insert("message".into(), Value::from(v.message.as_str()));
                out.push(m);
            }
        }
        Table::Findings => {
            for x in &f.findings {
                let mut m = Map::new();
                base(&mut m, f.wall_ns);
                m.insert("job".into(), opt(x.job.as_deref()));
                m.insert("kind".into(), Value::from(x.kind.name()));
                let list = |v: Vec<String>| Value::from(v.join(" "));
                m.insert(
                    "ranks".into(),
                    list(
                        x.ranks
                            .iter()
                            .map(|r| r.map_or("-".into(), |r| r.to_string()))
                            .collect(),
                    ),
                );
                m.insert(
                    "pids".into(),
                    list(x.pids.iter().map(|p| p.to_string()).collect()),
                );
                m.insert("for_s".into(), Value::from(x.for_s));
                m.insert("message".into(), Value::from(x.message.as_str()));
                m.insert("remedy".into(), Value::from(x.remedy.as_str()));
                out.push(m);
            }
        }
        Table::Events => {
            for e in &f.events {
                let mut m = Map::new();
                base(&mut m, e.wall_ns);
                m.insert(
                    "kind".into(),
                    serde_json::to_value(e.kind).unwrap_or(Value::Null),
                );
                m.insert("message".into(), Value::from(e.message.as_str()));
                out.push(m);
            }
        }
    }
    out
}

/// Writes rows as frames come; call [`Exporter::frame`] per frame, then
/// [`Exporter::finish`].
pub struct Exporter<W: Write> {
    out: W,
    format: Format,
    columns: Vec<&'static str>,
    started: bool,
}

impl<W: Write> Exporter<W> {
    pub fn new(out: W, format: Format) -> Self {
        let columns = match format {
            Format::Csv(t) => t.columns(),
            Format::Jsonl => Vec::new(),
        };
        Exporter {
            out,
            format,
            columns,
            started: false,
        }
    }

    pub fn frame(&mut self, f: &Frame) -> std::io::Result<()> {
        match self.format {
            Format::Jsonl => {
                for t in Table::ALL {
                    for m in rows(f, *t) {
                        let mut row = Map::new();
                        row.insert("kind".into(), Value::from(t.kind()));
                        // A table's own `kind` column (an event's, a
                        // finding's) must not hide the row's table.
                        row.extend(m.into_iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| {
                            match k.as_str() {
                                "kind" => (format!("{}_kind", t.kind()), v),
                                _ => (k, v),
                            }
                        }));
                        serde_json::to_writer(&mut self.out, &row)?;
                        self.out.write_all(b"\n")?;
                    }
                }
            }
            Format::Csv(t) => {
                if !self.started {
                    writeln!(self.out, "{}", self.columns.join(","))?;
                    self.started = true;
                }
                for m in rows(f, t) {
                    let cells: Vec<String> = self
                        .columns
                        .iter()
                        .map(|c| csv_cell(m.get(*c).unwrap_or(&Value::Null)))
                        .collect();
                    writeln!(self.out, "{}", cells.join(","))?;
                }
            }
        }
        Ok(())
    }

    /// Writes what an empty export still needs (the CSV header) and flushes.
    pub fn finish(mut self) -> std::io::Result<W> {
        if let (Format::Csv(_), false) = (self.format, self.started) {
            writeln!(self.out, "{}", self.columns.join(","))?;
        }
        self.out.flush()?;
        Ok(self.out)
    }
}

fn csv_cell(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => csv_field(s),
        Value::Number(n) => n.to_string(),
        other => csv_field(&other.to_string()),
    }
}

fn csv_field(s: &str) -> String {
    // A leading = + - @ would be a formula to a spreadsheet: quote it as text.
    let formula = s.starts_with(['=', '+', '-', '@']);
    if formula || s.contains([',', '"', '\n', '\r']) {
        let body = if formula {
            format!("'{s}")
        } else {
            s.to_string()
        };
        format!("\"{}\"", body.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{RankFrame, Text};

    fn frame(t: u64) -> Frame {
        let mut f = Frame {
            wall_ns: 1_000_000_000 + t,
            node: Text::new("n1"),
            ..Default::default()
        };
        f.host.signals.set(Sig::CpuUtilPct, 5.5);
        let mut r = RankFrame::default();
        r.key.pid = 7;
        r.labels.job = Some(Text::new("a,b"));
        r.signals.set(Sig::Fds, 7.0);
        r.signals.set(Sig::CpuPct, 1.0);
        f.ranks.push(r);
        f
    }

    #[test]
    fn csv_columns_come_from_the_catalog_not_the_file() {
        let mut out = Vec::new();
        let mut e = Exporter::new(&mut out, Format::Csv(Table::Ranks));
        e.frame(&frame(0)).unwrap();
        e.finish().unwrap();
        let text = String::from_utf8(out).unwrap();
        let header = text.lines().next().unwrap();
        assert!(header.starts_with(CSV_SIGNATURE));
        assert_eq!(header.split(',').count(), Table::Ranks.columns().len());
        let mut empty = Vec::new();
        Exporter::new(&mut empty, Format::Csv(Table::Ranks))
            .finish()
            .unwrap();
        assert_eq!(String::from_utf8(empty).unwrap().trim(), header);
        let row = text.lines().nth(1).unwrap();
        assert!(row.starts_with("1000000000,1970-01-01T00:00:01.000000000Z,n1,\"a,b\","));
    }

    #[test]
    fn jsonl_has_kinds_and_integers() {
        let mut out = Vec::new();
        let mut e = Exporter::new(&mut out, Format::Jsonl);
        let mut f = frame(0);
        f.events.push(crate::model::Event::new(
            f.wall_ns,
            crate::model::EventKind::RankAppeared,
            "rank 0 appeared",
        ));
        e.frame(&f).unwrap();
        e.finish().unwrap();
        let rows: Vec<Value> = String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let rank = rows.iter().find(|r| r["kind"] == "rank").unwrap();
        assert!(rank["fds"].is_i64(), "{rank}");
        assert!(rank["cpu_pct"].is_f64() || rank["cpu_pct"].is_u64());
        assert!(rank["time_ns"].is_u64());
        assert!(rows.iter().any(|r| r["kind"] == "host"));
        // An event keeps its own kind beside the row's.
        assert!(
            rows.iter()
                .any(|r| r["kind"] == "event" && r["event_kind"] == "rank_appeared"),
            "{rows:?}"
        );
    }

    #[test]
    fn spreadsheet_formulas_are_quoted_as_text() {
        assert_eq!(csv_field("=cmd()"), "\"'=cmd()\"");
        assert_eq!(csv_field("plain"), "plain");
    }
}
