//! Recording end to end: record a live ring job, then replay --dump and
//! export give back the same frames; a cut file still replays.

mod support;
use std::process::Command;
use support::*;

#[test]
fn record_then_replay_and_export_match() {
    let _g = serial();
    let mut procs = Procs::default();
    start_ring(&mut procs, 3, "rec", &|_| vec![]);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("run.kitty");
    record(&file, "10s");
    drop(procs);

    let mut r = kitty_core::sinks::record::Reader::open(&file).unwrap();
    let (frames, skipped) = r.read_all();
    assert!(skipped.is_empty() && r.warnings().is_empty());
    assert!(
        frames.len() >= 18,
        "10 s at 500 ms: {} frames",
        frames.len()
    );
    assert!(frames.iter().skip(2).all(|f| f
        .ranks
        .iter()
        .filter(|x| x.labels.job.as_deref() == Some("rec"))
        .count()
        == 3));

    // CSV: one table per file; the host and rank tables together have one
    // row per host and rank per frame, each file plus its header.
    let mut lines = 0;
    for table in ["host", "ranks"] {
        let csv = dir.path().join(format!("run-{table}.csv"));
        let st = Command::new(kitty_bin())
            .args(["export"])
            .arg(&file)
            .args(["--format", "csv", "--table", table, "-o"])
            .arg(&csv)
            .status()
            .unwrap();
        assert!(st.success());
        lines += std::fs::read_to_string(&csv).unwrap().lines().count() - 1;
    }
    let rows = frames.iter().map(|f| 1 + f.ranks.len()).sum::<usize>();
    assert_eq!(
        lines, rows,
        "one row per host and rank per frame, plus the header"
    );

    let jsonl = Command::new(kitty_bin())
        .args(["export"])
        .arg(&file)
        .output()
        .unwrap();
    let lines: Vec<serde_json::Value> = String::from_utf8(jsonl.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|l| l["kind"] == "host" || l["kind"] == "rank")
        .collect();
    assert_eq!(lines.len(), rows);
    // Values survive the round trip exactly.
    let last = frames.last().unwrap();
    let r0 = &last.ranks[0];
    let row = lines
        .iter()
        .rev()
        .find(|l| l["pid"] == r0.key.pid && l["time_ns"] == last.wall_ns)
        .unwrap();
    assert_eq!(
        row["run_delay_ms_per_s"].as_f64(),
        r0.signal(kitty_core::model::Sig::RunDelayMsPerS)
    );

    let dump = Command::new(kitty_bin())
        .args(["replay", "--dump"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(dump.status.success());
    let text = String::from_utf8(dump.stdout).unwrap();
    assert_eq!(
        text.lines().filter(|l| l.starts_with("frame ")).count(),
        frames.len()
    );

    // Cut mid-frame: replays up to the last whole frame with a warning.
    let bytes = std::fs::read(&file).unwrap();
    let cut = dir.path().join("cut.kitty");
    std::fs::write(&cut, &bytes[..bytes.len() - 7]).unwrap();
    let dump = Command::new(kitty_bin())
        .args(["replay", "--dump"])
        .arg(&cut)
        .output()
        .unwrap();
    assert!(dump.status.success());
    let err = String::from_utf8_lossy(&dump.stderr);
    assert!(
        err.contains("incomplete") || err.contains("ends inside"),
        "{err}"
    );
    let n = String::from_utf8(dump.stdout)
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("frame "))
        .count();
    assert_eq!(n, frames.len() - 1);
}

/// The export's header row of one table of a recording, via `-o -`.
fn csv_of(file: &std::path::Path, table: &str) -> String {
    let out = run_ok(
        Command::new(kitty_bin())
            .arg("export")
            .arg(file)
            .args(["--format", "csv", "--table", table, "-o", "-"]),
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn export_columns_are_stable_and_pandas_reads_integers_as_integers() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    // Two different recordings: 2 ranks without sock_diag, 3 ranks with it.
    let mut procs = Procs::default();
    start_ring(&mut procs, 2, "exp-a", &|_| vec![]);
    let a = dir.path().join("a.kitty");
    run_ok(
        Command::new(kitty_bin())
            .args(["record", "--no-sock-diag", "--no-ebpf", "-o"])
            .arg(&a)
            .args(["--duration", "2s"]),
    );
    drop(procs);
    let mut procs = Procs::default();
    start_ring(&mut procs, 3, "exp-b", &|_| vec![]);
    let b = dir.path().join("b.kitty");
    record(&b, "2s");
    drop(procs);
    for table in [
        "ranks", "host", "gpus", "nics", "verdicts", "findings", "events",
    ] {
        let (ha, hb) = (csv_of(&a, table), csv_of(&b, table));
        assert_eq!(
            ha.lines().next(),
            hb.lines().next(),
            "{table}: the same columns for both recordings"
        );
    }
    // pandas (Debian's python3-pandas; .ci/run installs it).
    let py = "/usr/bin/python3";
    let has_pandas = Command::new(py)
        .args(["-c", "import pandas"])
        .status()
        .is_ok_and(|s| s.success());
    if !has_pandas {
        skip("pandas: /usr/bin/python3 has no pandas (apt install python3-pandas; .ci/run does)");
        return;
    }
    for table in ["ranks", "host", "events"] {
        let csv = dir.path().join(format!("{table}.csv"));
        std::fs::write(&csv, csv_of(&b, table)).unwrap();
        let check = format!(
            r#"
import pandas as pd, sys
df = pd.read_csv({path:?})
assert len(df) > 0, "no rows"
ints = {{"ranks": ["time_ns", "pid", "rank"], "host": ["time_ns"], "events": ["time_ns"]}}[{table:?}]
for c in ints:
    assert c in df.columns, (c, list(df.columns))
    assert pd.api.types.is_integer_dtype(df[c]), (c, df[c].dtype)
print(len(df), "rows")
"#,
            path = csv.display().to_string(),
        );
        let out = Command::new(py).args(["-c", &check]).output().unwrap();
        assert!(
            out.status.success(),
            "{table}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // JSON Lines, one stream of every table: split by `kind`, each table is
    // a DataFrame with its integers as integers (the README's recipe).
    let jsonl = dir.path().join("b.jsonl");
    let out = run_ok(
        Command::new(kitty_bin())
            .arg("export")
            .arg(&b)
            .args(["-o", "-"]),
    );
    std::fs::write(&jsonl, out.stdout).unwrap();
    let check = format!(
        r#"
import json, pandas as pd
rows = [json.loads(l) for l in open({path:?})]
ranks = pd.DataFrame([r for r in rows if r["kind"] == "rank"])
assert len(ranks) > 0
assert pd.api.types.is_integer_dtype(ranks["pid"]), ranks["pid"].dtype
assert pd.api.types.is_integer_dtype(ranks["time_ns"]), ranks["time_ns"].dtype
"#,
        path = jsonl.display().to_string()
    );
    let out = Command::new(py).args(["-c", &check]).output().unwrap();
    assert!(
        out.status.success(),
        "jsonl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A damaged recording exported while stderr is a pipe nobody reads any
/// more (`2>&1 | head`): the warnings cannot be written, the export still
/// goes to its end and succeeds.
#[test]
fn export_goes_on_when_its_warnings_cannot_be_written() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../kitty-core/tests/fixtures/recording-v2.kitty");
    let mut bytes = std::fs::read(&fixture).unwrap();
    let at = bytes.len() / 2;
    bytes[at..at + 8].copy_from_slice(&[0xff; 8]);
    let bad = dir.path().join("bad.kitty");
    std::fs::write(&bad, &bytes).unwrap();
    let out = dir.path().join("out.jsonl");
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let status = Command::new(kitty_bin())
        .arg("export")
        .arg(&bad)
        .arg("-o")
        .arg(&out)
        .stderr(writer)
        .status()
        .unwrap();
    assert!(status.success(), "{status}");
    let frames = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .filter(|l| l.contains("\"kind\":\"host\""))
        .count();
    assert!(frames > 0 && frames < 20, "{frames} of 20 frames");
}

#[test]
fn an_error_that_cannot_be_written_still_exits_with_its_code() {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let status = Command::new(kitty_bin())
        .args(["replay", "/nonexistent/kitty/recording.kitty"])
        .stderr(writer)
        .status()
        .unwrap();
    // A missing file is 1; a panic writing the error was 101.
    assert_eq!(status.code(), Some(1), "{status}");
}

/// `record -o -` writes standard output from a thread of its own: a reader
/// that stalls (its pipe full) holds no tick. Written on the sampling
/// thread instead, an 8 s stall of a 4 KB pipe skipped ~40 ticks at 100 ms.
#[test]
fn a_stalled_reader_of_standard_output_holds_no_tick() {
    use std::io::Read;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    let _g = serial();
    let mut fds = [0; 2];
    // SAFETY: pipe fills the two-int array it is given.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: two new fds that nothing else owns.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // The smallest pipe: ~45 records fill it.
    // SAFETY: fcntl on an fd we own, with an integer argument.
    unsafe { libc::fcntl(w.as_raw_fd(), libc::F_SETPIPE_SZ, 4096) };
    let mut kid = Command::new(kitty_bin())
        .args([
            "record",
            "-o",
            "-",
            "--interval",
            "100ms",
            "--duration",
            "12s",
        ])
        .arg("--no-ebpf")
        .stdout(std::process::Stdio::from(w))
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_secs(8));
    let mut data = Vec::new();
    std::fs::File::from(r).read_to_end(&mut data).unwrap();
    assert!(kid.wait().unwrap().success());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("piped.kitty");
    std::fs::write(&file, &data).unwrap();
    let (frames, skipped) = kitty_core::sinks::record::Reader::open(&file)
        .unwrap()
        .read_all();
    assert!(skipped.is_empty());
    assert!(frames.len() > 60, "{} frames", frames.len());
    let most = frames.iter().map(|f| f.missed_ticks).max().unwrap_or(0);
    assert!(
        most < 10,
        "a gap of {most} ticks: the stalled pipe held the sampler"
    );
}
