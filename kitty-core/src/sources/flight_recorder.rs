//! PyTorch's Flight Recorder (ProcessGroupNCCL's ring buffer of
//! collectives): a rank whose environment sets
//! `TORCH_NCCL_DEBUG_INFO_PIPE_FILE` (and `TORCH_NCCL_TRACE_BUFFER_SIZE` > 0)
//! reads the FIFO `<prefix><rank>.pipe`; anything written there makes it
//! dump its buffer to `<TORCH_NCCL_DEBUG_INFO_TEMP_FILE><rank>` (default
//! `/tmp/nccl_trace_rank_<rank>`) as a pickle: `version`, `pg_status` (per
//! process group: last enqueued, started, completed collective) and
//! `entries` (collective sequence id, op, state, duration). kitty triggers
//! the dump, reads the pickle (never importing or calling anything) and says
//! which rank is behind.

use crate::model::{FlightRecorderPaths, Text};
use serde_pickle::{HashableValue, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

/// A dump larger than this is not read.
const MAX_DUMP: u64 = 64 << 20;
/// Collectives kept per rank (the latest).
const KEEP: usize = 16;

/// A rank's pipe and dump, under its root (`/proc/<pid>/root`), when its
/// environment names a pipe and has a rank. `pid_dir` is asked only then
/// (this runs for every rank each tick; most name no pipe).
pub fn paths(
    env: &[(String, String)],
    rank: Option<u32>,
    pid_dir: impl FnOnce() -> PathBuf,
) -> Option<FlightRecorderPaths> {
    let get = |k: &str| env.iter().find(|(key, _)| key == k).map(|(_, v)| v.trim());
    let pipe = get("TORCH_NCCL_DEBUG_INFO_PIPE_FILE").filter(|p| !p.is_empty())?;
    let rank = rank?;
    let pid_dir = pid_dir();
    let dump = get("TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
        .filter(|p| !p.is_empty())
        .unwrap_or("/tmp/nccl_trace_rank_");
    let under_root = |p: &str| {
        Text::new(
            &crate::sources::in_process_fs(&pid_dir, p)
                .display()
                .to_string(),
        )
    };
    Some(FlightRecorderPaths {
        pipe: under_root(&format!("{pipe}{rank}.pipe")),
        dump: under_root(&format!("{dump}{rank}")),
    })
}

/// One collective from a dump.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub pg: String,
    pub seq: u64,
    pub op: String,
    pub state: String,
    pub duration_ms: Option<f64>,
}

/// A process group's progress on one rank.
#[derive(Debug, Clone, PartialEq)]
pub struct PgStatus {
    pub pg: String,
    pub last_enqueued: i64,
    pub last_started: i64,
    pub last_completed: i64,
}

/// What one rank's dump says.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Dump {
    pub version: String,
    pub pg_status: Vec<PgStatus>,
    /// Its latest collectives, newest last.
    pub entries: Vec<Entry>,
}

fn key<'a>(d: &'a BTreeMap<HashableValue, Value>, k: &str) -> Option<&'a Value> {
    d.get(&HashableValue::String(k.to_string()))
}

fn int(v: Option<&Value>) -> Option<i64> {
    match v? {
        Value::I64(n) => Some(*n),
        Value::Bool(b) => Some(*b as i64),
        _ => None,
    }
}

fn text(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) => Some(crate::model::text::sanitize(s, 64)),
        Value::I64(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Reads a dump (a pickle of built-in types only).
pub fn parse(bytes: &[u8]) -> Result<Dump, String> {
    // A value the pickle shares (CPython memoizes a tuple used twice) is
    // read once; its later uses come back empty, and the process group's
    // name is then taken from the entries that kept it, by pg_id.
    let opts = serde_pickle::DeOptions::new().replace_recursive_structures();
    let v = serde_pickle::value_from_slice(bytes, opts)
        .map_err(|e| format!("not a Flight Recorder dump: {e}"))?;
    let Value::Dict(top) = v else {
        return Err("not a Flight Recorder dump: not a dictionary".into());
    };
    let mut d = Dump {
        version: text(key(&top, "version")).unwrap_or_default(),
        ..Default::default()
    };
    if let Some(Value::Dict(pgs)) = key(&top, "pg_status") {
        for (name, st) in pgs {
            let Value::Dict(st) = st else { continue };
            let pg = match name {
                HashableValue::String(s) => crate::model::text::sanitize(s, 64),
                HashableValue::I64(n) => n.to_string(),
                _ => continue,
            };
            d.pg_status.push(PgStatus {
                pg,
                last_enqueued: int(key(st, "last_enqueued_collective")).unwrap_or(-1),
                last_started: int(key(st, "last_started_collective")).unwrap_or(-1),
                last_completed: int(key(st, "last_completed_collective")).unwrap_or(-1),
            });
        }
    }
    if let Some(Value::List(entries)) = key(&top, "entries") {
        let named = |e: &BTreeMap<HashableValue, Value>| match key(e, "process_group") {
            Some(Value::Tuple(t) | Value::List(t)) => text(t.first()),
            _ => None,
        };
        let mut names: BTreeMap<i64, String> = BTreeMap::new();
        for e in entries {
            if let Value::Dict(e) = e {
                if let (Some(id), Some(n)) = (int(key(e, "pg_id")), named(e)) {
                    names.entry(id).or_insert(n);
                }
            }
        }
        for e in entries {
            let Value::Dict(e) = e else { continue };
            let id = int(key(e, "pg_id"));
            let pg = named(e)
                .or_else(|| id.and_then(|i| names.get(&i).cloned()))
                .or_else(|| id.map(|i| i.to_string()))
                .unwrap_or_default();
            let duration_ms = match key(e, "duration_ms") {
                Some(Value::F64(x)) if x.is_finite() => Some(*x),
                Some(Value::I64(n)) => Some(*n as f64),
                _ => None,
            };
            d.entries.push(Entry {
                pg,
                seq: int(key(e, "collective_seq_id")).unwrap_or(0).max(0) as u64,
                op: text(key(e, "profiling_name")).unwrap_or_default(),
                state: text(key(e, "state")).unwrap_or_default(),
                duration_ms,
            });
        }
    }
    let n = d.entries.len();
    d.entries.drain(..n.saturating_sub(KEEP));
    Ok(d)
}

/// Asks one rank for a dump and reads it: writes to its pipe, then waits
/// (up to `timeout`) for the dump file to be rewritten.
pub fn dump(p: &FlightRecorderPaths, timeout: Duration) -> Result<Dump, String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let before = modified(Path::new(p.dump.as_str()));
    // Non-blocking: a rank that does not read its pipe must not hang kitty.
    let mut pipe = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(p.pipe.as_str())
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ENXIO) => format!(
                "nothing reads {} (Flight Recorder off: TORCH_NCCL_TRACE_BUFFER_SIZE unset?)",
                p.pipe
            ),
            _ => format!("cannot open {}: {e}", p.pipe),
        })?;
    pipe.write_all(b"1\n")
        .map_err(|e| format!("cannot write {}: {e}", p.pipe))?;
    drop(pipe);
    let start = Instant::now();
    let path = Path::new(p.dump.as_str());
    loop {
        let now = modified(path);
        if now.is_some() && now != before {
            // Let the writer finish: the size holds for a moment.
            let len = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
            std::thread::sleep(Duration::from_millis(100));
            if std::fs::metadata(path).map(|m| m.len()).unwrap_or(0) == len {
                if len > MAX_DUMP {
                    return Err(format!("{} is larger than {MAX_DUMP} bytes", p.dump));
                }
                let bytes =
                    std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", p.dump))?;
                return parse(&bytes);
            }
        }
        if start.elapsed() > timeout {
            return Err(format!("no dump in {} after {timeout:?}", p.dump));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn modified(p: &Path) -> Option<SystemTime> {
    std::fs::metadata(p).and_then(|m| m.modified()).ok()
}

/// Which ranks are behind: per process group, a rank whose last completed
/// collective is below the most advanced rank's ("rank 3 is behind in pg 0:
/// completed 1200, its peers up to 1204; waits in nccl:all_reduce 1201").
pub fn behind(dumps: &[(Option<u32>, &Dump)]) -> Vec<String> {
    // Process group -> (rank, its status there, its dump).
    type Members<'a> = Vec<(Option<u32>, &'a PgStatus, &'a Dump)>;
    let mut by_pg: BTreeMap<&str, Members> = BTreeMap::new();
    for (rank, d) in dumps {
        for s in &d.pg_status {
            by_pg.entry(&s.pg).or_default().push((*rank, s, d));
        }
    }
    let mut out = Vec::new();
    for (pg, ranks) in by_pg {
        if ranks.len() < 2 {
            continue;
        }
        let most = ranks.iter().map(|r| r.1.last_completed).max().unwrap_or(-1);
        for (rank, s, d) in &ranks {
            if s.last_completed >= most {
                continue;
            }
            let who = rank.map_or("a rank".to_string(), |r| format!("rank {r}"));
            let waiting = d
                .entries
                .iter()
                .rev()
                .find(|e| e.pg == pg && e.state != "completed")
                .map_or(String::new(), |e| {
                    format!("; {} {} {}", e.op, e.seq, e.state)
                });
            out.push(format!(
                "{who} is behind in process group {pg}: completed {}, its peers up to {most}{waiting}",
                s.last_completed
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A dump as the tutorial shows it, pickled by CPython (protocol 2,
    /// what torch's pickler writes):
    /// `pickle.dumps({"version": "2.4", "pg_status": {"0": {...}}, "entries": [...]}, 2)`.
    fn sample() -> Vec<u8> {
        let out = std::process::Command::new("python3")
            .args([
                "-c",
                r#"
import pickle, sys
d = {"version": "2.4",
     "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}},
     "pg_status": {"0": {"last_enqueued_collective": 3, "last_started_collective": 3, "last_completed_collective": 2}},
     "entries": [{"record_id": i, "pg_id": 0, "process_group": ("dp0", "default_pg"),
                  "collective_seq_id": i + 1, "p2p_seq_id": 0, "op_id": i + 1,
                  "profiling_name": "nccl:all_reduce", "time_created_ns": 1724779239936775119,
                  "input_sizes": [[3, 4]], "output_sizes": [[3, 4]],
                  "state": "completed" if i < 2 else "started",
                  "duration_ms": 1.5 if i < 2 else None, "is_p2p": False, "retired": i < 2,
                  "timeout_ms": 600000, "frames": [{"name": "f", "filename": "x.py", "line": 1}]}
                 for i in range(3)]}
sys.stdout.buffer.write(pickle.dumps(d, 2))"#,
            ])
            .output();
        match out {
            Ok(o) if o.status.success() => o.stdout,
            _ => Vec::new(),
        }
    }

    #[test]
    fn reads_a_cpython_pickle_of_the_documented_layout() {
        let bytes = sample();
        if bytes.is_empty() {
            eprintln!("skipped: no python3 to pickle a sample dump");
            return;
        }
        let d = parse(&bytes).unwrap();
        assert_eq!(d.version, "2.4");
        assert_eq!(d.pg_status[0].last_completed, 2);
        assert_eq!(d.entries.len(), 3);
        assert_eq!(d.entries[2].op, "nccl:all_reduce");
        assert_eq!(
            (d.entries[2].seq, d.entries[2].state.as_str()),
            (3, "started")
        );
        assert_eq!(d.entries[0].duration_ms, Some(1.5));
        assert_eq!(d.entries[0].pg, "dp0");
        assert_eq!(
            d.entries[2].pg, "dp0",
            "a shared tuple's later uses get the name by pg_id"
        );
        assert!(parse(b"not a pickle").is_err());
    }

    #[test]
    fn the_rank_that_completed_fewest_is_behind() {
        let mk = |done: i64| Dump {
            pg_status: vec![PgStatus {
                pg: "0".into(),
                last_enqueued: 1205,
                last_started: done + 1,
                last_completed: done,
            }],
            entries: vec![Entry {
                pg: "0".into(),
                seq: done as u64 + 1,
                op: "nccl:all_reduce".into(),
                state: "started".into(),
                duration_ms: None,
            }],
            ..Default::default()
        };
        let (a, b, c) = (mk(1204), mk(1200), mk(1204));
        let said = behind(&[(Some(0), &a), (Some(3), &b), (Some(1), &c)]);
        assert_eq!(
            said,
            ["rank 3 is behind in process group 0: completed 1200, its peers up to 1204; nccl:all_reduce 1201 started"]
        );
    }

    #[test]
    fn paths_come_from_the_environment_under_the_ranks_root() {
        let env = vec![(
            "TORCH_NCCL_DEBUG_INFO_PIPE_FILE".to_string(),
            "/tmp/fr_pipe_".to_string(),
        )];
        let p = paths(&env, Some(3), || PathBuf::from("/proc/42")).unwrap();
        assert_eq!(p.pipe.as_str(), "/proc/42/root/tmp/fr_pipe_3.pipe");
        assert_eq!(p.dump.as_str(), "/proc/42/root/tmp/nccl_trace_rank_3");
        assert!(paths(&env, None, || PathBuf::from("/proc/42")).is_none());
        assert!(paths(&[], Some(3), || PathBuf::from("/proc/42")).is_none());
    }
}
