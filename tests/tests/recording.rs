//! Recording end to end: record a live ring job, then replay --dump and
//! export give back the same frames; a cut file still replays.

use kitty_tests::*;
use std::process::Command;

#[test]
fn record_then_replay_and_export_match() {
    let _g = serial();
    let mut procs = Procs::default();
    start_ring(&mut procs, 3, "rec", &|_| vec![]);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("run.kitty");
    record(&file, "10s");
    drop(procs);

    let mut r = kitty_core::record::Reader::open(&file).unwrap();
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

    let csv = dir.path().join("run.csv");
    let st = Command::new(kitty_bin())
        .args(["export"])
        .arg(&file)
        .args(["--format", "csv", "-o"])
        .arg(&csv)
        .status()
        .unwrap();
    assert!(st.success());
    let text = std::fs::read_to_string(&csv).unwrap();
    let rows = frames.iter().map(|f| 1 + f.ranks.len()).sum::<usize>();
    assert_eq!(
        text.lines().count(),
        rows + 1,
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
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), rows);
    // Values survive the round trip exactly.
    let last = frames.last().unwrap();
    let r0 = &last.ranks[0];
    let row = lines
        .iter()
        .rev()
        .find(|l| l["pid"] == r0.key.pid && l["wall_ns"] == last.wall_ns)
        .unwrap();
    assert_eq!(
        row["run_delay_ms_per_s"].as_f64(),
        r0.signal("run_delay_ms_per_s")
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
