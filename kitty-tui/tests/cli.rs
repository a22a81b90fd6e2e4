//! The command line as scripts use it: output that stops early (a closed
//! pipe), a recorder slower than the interval, exit statuses, output files
//! (private, never through a symlink, checked before sampling) and option
//! bounds.

mod support;
use kitty_core::model::EventKind;
use kitty_core::sinks::record::{Header, Reader, Writer};
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use support::*;

/// A synthetic recording of `n` frames (bigger than any pipe buffer).
fn long_recording(dir: &std::path::Path, n: u64) -> std::path::PathBuf {
    let p = dir.join("long.kitty");
    let mut w =
        Writer::create(&p, &Header::now("n", std::time::Duration::from_millis(500))).unwrap();
    for i in 0..n {
        let mut f = kitty_core::model::Frame {
            seq: i,
            wall_ns: 1_700_000_000_000_000_000 + i * 500_000_000,
            mono_ns: i * 500_000_000,
            ..Default::default()
        };
        let mut r = kitty_core::model::RankFrame::default();
        r.key.pid = 42;
        f.ranks.push(r);
        w.append(&f).unwrap();
    }
    w.finish().unwrap();
    p
}

#[test]
fn output_cut_short_by_its_reader_ends_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let file = long_recording(dir.path(), 3000);
    // replay --dump | head -1
    let mut child = Command::new(kitty_bin())
        .args(["replay", "--dump"])
        .arg(&file)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 64];
    let n = child.stdout.as_mut().unwrap().read(&mut first).unwrap();
    assert!(n > 0);
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(141),
        "the conventional status: {err}"
    );
    assert!(err.is_empty(), "nothing said on a closed pipe: {err}");
    // snapshot --json | head -c 10: the reader is gone before the document.
    let mut child = Command::new(kitty_bin())
        .args([
            "snapshot",
            "--json",
            "--duration",
            "1s",
            "--no-ebpf",
            "--no-gpu",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(141), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn a_recorder_slower_than_the_interval_loses_no_frame() {
    let _g = serial();
    let mut procs = Procs::default();
    start_ring(&mut procs, 3, "slow-reader", &|_| vec![]);
    // record -o - into a pipe nobody reads for a while: the pipe fills and
    // the writer blocks; frames wait in the engine's lossless queue.
    let mut child = Command::new(kitty_bin())
        .args([
            "record",
            "-o",
            "-",
            "--duration",
            "8s",
            "--interval",
            "100ms",
            "--no-ebpf",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    phase(5.0); // the reader is away
    let mut bytes = Vec::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_end(&mut bytes)
        .unwrap();
    assert!(child.wait().unwrap().success());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("piped.kitty");
    std::fs::write(&file, &bytes).unwrap();
    let (frames, skipped) = Reader::open(&file).unwrap().read_all();
    assert!(skipped.is_empty());
    let seqs: Vec<u64> = frames.iter().map(|f| f.seq).collect();
    let want: Vec<u64> = (0..frames.len() as u64).collect();
    assert_eq!(seqs, want, "every sampled frame was written");
    assert!(frames.len() >= 60, "8 s at 100 ms: {}", frames.len());
}

#[test]
fn a_stalled_sampler_skips_ticks_without_a_burst_and_marks_the_gap() {
    let _g = serial();
    let rec = LiveRecord::start(&["--no-ebpf", "--no-gpu"]);
    let first = rec.wait_for(10, |fs| (fs.len() >= 3).then_some(()));
    assert!(first.is_some(), "recording started");
    // Freeze kitty for 5 s, as a paused VM or a blocked disk would.
    let pid = rec.pid() as i32;
    // SAFETY: signalling our own child.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    phase(5.0);
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    let after = rec.wait_for(10, |fs| {
        let gap = fs.iter().position(|f| f.missed_ticks > 0)?;
        (fs.len() >= gap + 4).then_some(())
    });
    assert!(after.is_some(), "sampling resumed after the stall");
    let frames = rec.stop();
    assert!(
        !events_of(&frames, EventKind::SamplingGap).is_empty(),
        "an event marks the gap"
    );
    let gap = frames.iter().find(|f| f.missed_ticks > 0).unwrap();
    assert!(
        (8..=10).contains(&gap.missed_ticks),
        "about 5 s of 500 ms ticks skipped: {}",
        gap.missed_ticks
    );
    // No catch-up burst: consecutive frames are never closer than half an
    // interval; the rates span the real elapsed time.
    for w in frames.windows(2) {
        let dt = w[1].mono_ns - w[0].mono_ns;
        assert!(
            dt >= 250_000_000,
            "frames {} and {} {dt} ns apart",
            w[0].seq,
            w[1].seq
        );
    }
}

#[test]
fn output_files_are_private_never_through_symlinks_and_checked_first() {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("r.kitty");
    record(&rec, "1s");
    let mode = std::fs::metadata(&rec).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "recordings name processes and peers");
    let csv = dir.path().join("r.csv");
    run_ok(
        Command::new(kitty_bin())
            .args(["export", "--format", "csv", "-o"])
            .arg(&csv)
            .arg(&rec),
    );
    let mode = std::fs::metadata(&csv).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);

    // -o onto a symlink: refused, the target untouched.
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "precious").unwrap();
    let link = dir.path().join("link.kitty");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let t = std::time::Instant::now();
    let out = Command::new(kitty_bin())
        .args(["record", "--duration", "10s", "-o"])
        .arg(&link)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("symbolic link"), "{err}");
    assert!(
        t.elapsed() < std::time::Duration::from_secs(5),
        "refused before sampling"
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    // Someone else's file is not replaced without --force.
    let out = Command::new(kitty_bin())
        .args(["record", "--duration", "1s", "-o"])
        .arg(&victim)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--force"));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    // A bad -o fails before the profile samples (not after 30 s).
    let t = std::time::Instant::now();
    let out = Command::new(kitty_bin())
        .args([
            "profile",
            "--pid",
            &std::process::id().to_string(),
            "--duration",
            "30s",
            "-o",
            "/nonexistent/x.svg",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(t.elapsed() < std::time::Duration::from_secs(5));
}

#[test]
fn out_of_range_options_fail_with_one_line_and_status_2() {
    for args in [
        vec![
            "record",
            "-o",
            "/tmp/x.kitty",
            "--interval",
            "18446744073709551615s",
        ],
        vec!["record", "-o", "/tmp/x.kitty", "--interval", "100000h"],
        vec!["snapshot", "--interval", "30s", "--duration", "1s"],
        vec!["serve", "--grace", "1000d"],
        vec!["profile", "--pid", "1", "--frequency", "5000"],
        vec!["replay", "--interval", "1s", "x"],
    ] {
        let t = std::time::Instant::now();
        let out = Command::new(kitty_bin()).args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        let said: Vec<&str> = err
            .lines()
            .filter(|l| l.starts_with("error:") || l.starts_with("kitty-tui:"))
            .collect();
        assert_eq!(said.len(), 1, "{args:?}: {err}");
        assert!(
            t.elapsed() < std::time::Duration::from_secs(5),
            "{args:?} waited"
        );
    }
}

#[test]
fn without_root_the_snapshot_says_other_users_processes_are_hidden() {
    if !is_root() {
        return skip("needs root to run a command as another user");
    }
    // A copy of the binary nobody can run (the checkout may be under /root).
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let bin = dir.path().join("kitty-tui");
    std::fs::copy(kitty_bin(), &bin).unwrap();
    let mut procs = Procs::default();
    // root's watched process: hidden from nobody.
    procs.push(
        Command::new("sleep")
            .arg("60")
            .env("KITTY_WATCH", "1")
            .spawn()
            .unwrap(),
    );
    use std::os::unix::process::CommandExt;
    let out = Command::new(&bin)
        .args([
            "snapshot",
            "--json",
            "--duration",
            "1s",
            "--no-ebpf",
            "--no-gpu",
        ])
        .current_dir(dir.path())
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let procfs = &v["sources"]["procfs"];
    assert_eq!(procfs["status"], "degraded", "{procfs}");
    assert!(
        procfs["reason"]
            .as_str()
            .unwrap()
            .contains("other users are hidden"),
        "{procfs}"
    );
}

#[test]
fn completions_and_the_man_page_build() {
    let out = run_ok(Command::new(kitty_bin()).args(["completions", "bash"]));
    let script = String::from_utf8(out.stdout).unwrap();
    assert!(
        script.contains("cluster") && script.contains("--prometheus"),
        "{script}"
    );
    // bash parses it (`-n`: read, do not run).
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("kitty-tui.bash");
    std::fs::write(&f, &script).unwrap();
    let st = Command::new("bash").arg("-n").arg(&f).status().unwrap();
    assert!(st.success(), "bash -n on the completion script");
    for shell in ["zsh", "fish"] {
        let out = run_ok(Command::new(kitty_bin()).args(["completions", shell]));
        assert!(!out.stdout.is_empty(), "{shell}");
    }
    let out = run_ok(Command::new(kitty_bin()).arg("man"));
    let page = String::from_utf8(out.stdout).unwrap();
    assert!(
        page.starts_with(".ie") || page.contains(".TH kitty-tui 1"),
        "{page}"
    );
    assert!(
        page.contains("cluster") && page.contains("replay"),
        "{page}"
    );
}

#[test]
fn record_stops_on_sigint_sigterm_and_sighup_with_every_frame_kept() {
    let _g = serial();
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        let mut rec = LiveRecord::start(&["--no-ebpf", "--no-gpu", "--interval", "5s"]);
        let first = rec.wait_for(10, |fs| (!fs.is_empty()).then_some(()));
        assert!(first.is_some(), "recording started");
        let t = std::time::Instant::now();
        // SAFETY: signalling our own child.
        unsafe { libc::kill(rec.pid() as i32, sig) };
        let st = rec.wait();
        // The signal wakes the writer's wait for the next frame (5 s away);
        // it does not poll for it (its backstop is 60 s).
        assert!(
            t.elapsed() < std::time::Duration::from_secs(4),
            "signal {sig}: stopped after {:?}",
            t.elapsed()
        );
        assert!(st.success(), "signal {sig}: record exited with {st}");
        let (frames, skipped) = Reader::open(&rec.path).unwrap().read_all();
        assert!(skipped.is_empty() && !frames.is_empty(), "signal {sig}");
    }
}
