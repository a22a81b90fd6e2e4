//! NCCL Inspector's output (NCCL's profiler plugin, ext-profiler/inspector):
//! one JSON object per collective per communicator, appended to files in
//! the rank's dump directory — `header` (communicator id, its rank and
//! size), `metadata` (pid, hostname, format version) and `coll_perf`
//! (collective, sequence number, message size, exec time, bus bandwidth).
//! Where the directory is, from the rank's environment, and tailing its
//! files without ever reading a whole history at once.

use serde::Deserialize;
use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// Bytes read per file per tick, at most (the rest waits for the next tick).
const READ_PER_TICK: u64 = 1 << 20;
/// A file seen for the first time is read from this far before its end.
const START_BACK: u64 = 256 << 10;
/// Files followed per directory, at most.
const MAX_FILES: usize = 512;
/// A partial object longer than this is garbage, not a record in progress.
const MAX_PENDING: usize = 1 << 20;

/// One collective of one rank.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub comm: String,
    /// The rank in its communicator.
    pub comm_rank: Option<u32>,
    /// The process's pid as it sees itself (its own pid namespace).
    pub pid: u32,
    pub coll: String,
    pub seq: u64,
    pub msg_bytes: u64,
    pub exec_us: u64,
    pub busbw_gbs: f64,
}

#[derive(Deserialize)]
struct Raw {
    #[serde(default)]
    header: RawHeader,
    #[serde(default)]
    metadata: RawMeta,
    coll_perf: Option<RawPerf>,
}

#[derive(Deserialize, Default)]
struct RawHeader {
    #[serde(default)]
    id: String,
    rank: Option<u32>,
}

#[derive(Deserialize, Default)]
struct RawMeta {
    pid: Option<u32>,
}

#[derive(Deserialize)]
struct RawPerf {
    coll: String,
    coll_sn: u64,
    #[serde(default)]
    coll_msg_size_bytes: u64,
    coll_exec_time_us: u64,
    #[serde(default)]
    coll_busbw_gbs: f64,
}

/// Parses whole objects from `buf`; returns them and how many bytes they
/// took (a trailing partial object is left for the next read). A line that
/// is not a record is skipped.
pub fn parse(buf: &[u8]) -> (Vec<Record>, usize) {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < buf.len() {
        let rest = &buf[pos..];
        let mut stream = serde_json::Deserializer::from_slice(rest).into_iter::<Raw>();
        match stream.next() {
            None => {
                pos = buf.len();
                break;
            }
            Some(Ok(raw)) => {
                pos += stream.byte_offset();
                if let Some(r) = record(raw) {
                    out.push(r);
                }
            }
            Some(Err(e)) if e.is_eof() => break,
            Some(Err(_)) => match rest.iter().position(|b| *b == b'\n') {
                Some(nl) => pos += nl + 1,
                None => break,
            },
        }
    }
    (out, pos)
}

fn record(raw: Raw) -> Option<Record> {
    let perf = raw.coll_perf?;
    let ok = |s: &str| s.len() <= 64 && s.bytes().all(|b| b.is_ascii_graphic());
    if !ok(&raw.header.id) || !ok(&perf.coll) || !perf.coll_busbw_gbs.is_finite() {
        return None;
    }
    Some(Record {
        comm: raw.header.id,
        comm_rank: raw.header.rank,
        pid: raw.metadata.pid?,
        coll: perf.coll,
        seq: perf.coll_sn,
        msg_bytes: perf.coll_msg_size_bytes,
        exec_us: perf.coll_exec_time_us,
        busbw_gbs: perf.coll_busbw_gbs.max(0.0),
    })
}

/// Is Inspector on in this environment, and where does it write? The
/// directory as the rank names it: NCCL_INSPECTOR_DUMP_DIR, else
/// `nccl-inspector-<SLURM_JOB_ID>` or `nccl-inspector-unknown-jobid` in
/// its working directory. Err says why kitty cannot follow it.
pub fn dump_dir(
    env: &[(String, String)],
    slurm_job: Option<&str>,
) -> Option<Result<String, String>> {
    let get = |k: &str| {
        env.iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
    };
    let on =
        get("NCCL_INSPECTOR_ENABLE").is_some_and(|v| v.trim().parse::<i64>().is_ok_and(|n| n != 0));
    if !on {
        return None;
    }
    if get("NCCL_INSPECTOR_PROM_DUMP").is_some_and(|v| v.trim() != "0") {
        return Some(Err(
            "NCCL_INSPECTOR_PROM_DUMP=1 writes Prometheus text for node_exporter, not JSON lines"
                .into(),
        ));
    }
    Some(Ok(match get("NCCL_INSPECTOR_DUMP_DIR") {
        Some(d) if !d.trim().is_empty() => d.trim().to_string(),
        _ => format!("nccl-inspector-{}", slurm_job.unwrap_or("unknown-jobid")),
    }))
}

/// Follows every file of some dump directories.
#[derive(Default)]
pub struct Tailer {
    files: HashMap<PathBuf, Tail>,
}

struct Tail {
    offset: u64,
    pending: Vec<u8>,
    seen: bool,
}

impl Tailer {
    /// New records in `dir` since the last call. Files are read from near
    /// their end when first seen (the past is not a live signal).
    pub fn poll(&mut self, dir: &Path) -> std::io::Result<Vec<Record>> {
        let mut names: Vec<PathBuf> = std::fs::read_dir(dir)?
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .map(|e| e.path())
            .collect();
        names.sort();
        names.truncate(MAX_FILES);
        let mut out = Vec::new();
        for path in names {
            let t = self.files.entry(path.clone()).or_insert(Tail {
                offset: 0,
                pending: Vec::new(),
                seen: false,
            });
            t.seen = true;
            let _ = read_new(&path, t, &mut out);
        }
        Ok(out)
    }

    /// Forgets files not polled since the last `sweep`.
    pub fn sweep(&mut self) {
        self.files.retain(|_, t| std::mem::take(&mut t.seen));
    }
}

fn read_new(path: &Path, t: &mut Tail, out: &mut Vec<Record>) -> std::io::Result<()> {
    let mut f = std::fs::File::open(path)?;
    let len = f.metadata()?.len();
    let fresh = t.offset == 0 && t.pending.is_empty();
    if len < t.offset {
        // Truncated or replaced: start again at its beginning.
        t.offset = 0;
        t.pending.clear();
    } else if fresh && len > START_BACK {
        t.offset = len - START_BACK;
    }
    let resync = fresh && t.offset > 0;
    f.seek(SeekFrom::Start(t.offset))?;
    let mut buf = Vec::new();
    f.take(READ_PER_TICK).read_to_end(&mut buf)?;
    t.offset += buf.len() as u64;
    if resync {
        // Mid-file: the first whole object starts after a newline.
        match buf.iter().position(|b| *b == b'\n') {
            Some(nl) => {
                buf.drain(..=nl);
            }
            None => buf.clear(),
        }
    }
    t.pending.extend_from_slice(&buf);
    let (recs, used) = parse(&t.pending);
    t.pending.drain(..used);
    if t.pending.len() > MAX_PENDING {
        t.pending.clear();
    }
    out.extend(recs);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    pub const LINE: &str = r#"{"header":{"id":"0x7f8c496ae9f661","rank":2,"n_ranks":8,"nnodes":1},"metadata":{"inspector_output_format_version":"v4.0","git_rev":"","rec_mechanism":"profiler_plugin","dump_timestamp_us":1748030377748202,"hostname":"example-hostname","pid":1639453},"coll_perf":{"coll":"AllReduce","coll_sn":1407,"coll_msg_size_bytes":17179869184,"coll_exec_time_us":61974,"coll_timing_source":"kernel_gpu","coll_algobw_gbs":277.210914,"coll_busbw_gbs":485.119099}}"#;

    #[test]
    fn parses_the_documented_record_and_keeps_a_partial_one() {
        let mut buf = format!("{LINE}\n{LINE}\n").into_bytes();
        buf.extend_from_slice(&LINE.as_bytes()[..40]);
        let (recs, used) = parse(&buf);
        assert_eq!(recs.len(), 2);
        let rest = std::str::from_utf8(&buf[used..]).unwrap();
        assert_eq!(rest.trim_start(), &LINE[..40], "the partial record waits");
        let r = &recs[0];
        assert_eq!(
            (
                r.comm.as_str(),
                r.comm_rank,
                r.pid,
                r.coll.as_str(),
                r.seq,
                r.exec_us
            ),
            (
                "0x7f8c496ae9f661",
                Some(2),
                1639453,
                "AllReduce",
                1407,
                61974
            )
        );
        assert!((r.busbw_gbs - 485.119099).abs() < 1e-9);
    }

    #[test]
    fn pretty_printed_and_garbage_lines() {
        let pretty =
            serde_json::to_string_pretty(&serde_json::from_str::<serde_json::Value>(LINE).unwrap())
                .unwrap();
        let buf = format!("not json at all\n{pretty}\n{{\"header\":{{}}}}\n{LINE}\n");
        let (recs, used) = parse(buf.as_bytes());
        assert_eq!(
            recs.len(),
            2,
            "the garbage line and the record without coll_perf are skipped"
        );
        assert_eq!(used, buf.len());
    }

    #[test]
    fn dump_dir_follows_the_environment() {
        let env = |kv: &[(&str, &str)]| -> Vec<(String, String)> {
            kv.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(dump_dir(&env(&[]), None), None);
        assert_eq!(
            dump_dir(&env(&[("NCCL_INSPECTOR_ENABLE", "0")]), None),
            None
        );
        assert_eq!(
            dump_dir(&env(&[("NCCL_INSPECTOR_ENABLE", "1")]), Some("77")),
            Some(Ok("nccl-inspector-77".into()))
        );
        assert_eq!(
            dump_dir(
                &env(&[
                    ("NCCL_INSPECTOR_ENABLE", "1"),
                    ("NCCL_INSPECTOR_DUMP_DIR", "/logs/x/")
                ]),
                None
            ),
            Some(Ok("/logs/x/".into()))
        );
        assert!(matches!(
            dump_dir(
                &env(&[
                    ("NCCL_INSPECTOR_ENABLE", "1"),
                    ("NCCL_INSPECTOR_PROM_DUMP", "1")
                ]),
                None
            ),
            Some(Err(_))
        ));
        let p = crate::sources::in_process_fs(Path::new("/proc/42"), "/logs/x");
        assert_eq!(p, Path::new("/proc/42/root/logs/x"));
        assert_eq!(
            crate::sources::in_process_fs(Path::new("/proc/42"), "d"),
            Path::new("/proc/42/cwd/d")
        );
    }

    #[test]
    fn tails_appends_and_starts_over_after_truncation() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("host-pid1.log");
        std::fs::write(&f, format!("{LINE}\n")).unwrap();
        let mut t = Tailer::default();
        assert_eq!(t.poll(d.path()).unwrap().len(), 1);
        assert_eq!(t.poll(d.path()).unwrap().len(), 0, "nothing new");
        use std::io::Write;
        let mut h = std::fs::OpenOptions::new().append(true).open(&f).unwrap();
        h.write_all(&LINE.as_bytes()[..50]).unwrap();
        assert_eq!(t.poll(d.path()).unwrap().len(), 0, "half a record waits");
        h.write_all(format!("{}\n", &LINE[50..]).as_bytes())
            .unwrap();
        assert_eq!(t.poll(d.path()).unwrap().len(), 1);
        std::fs::write(&f, format!("{LINE}\n")).unwrap();
        assert_eq!(
            t.poll(d.path()).unwrap().len(),
            1,
            "a truncated file is read again"
        );
    }
}
