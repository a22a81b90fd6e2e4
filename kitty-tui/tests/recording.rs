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
