//! kitty runs as root and shows names any local user chooses. Watched
//! processes here carry hostile names (escape sequences, OSC title and
//! clipboard writes, CR, quotes and newlines, 100 KB strings) in JOB_NAME,
//! comm and thread names, and a profiled binary's frame names: the TUI (in
//! tmux), `replay --dump`, CSV and JSONL exports, the snapshot and
//! `/metrics` stay intact and carry no raw control character.

mod support;
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use support::*;

const TITLE: &str = "\x1b]0;PWNED\x07";
const CLEAR: &str = "evil\r\x1b[2J\x1b[H";
const CLIPBOARD: &str = "\x1b]52;c;cHduZWQ=\x07";
const INJECT: &str = "inj\"} 1\nkitty_fake_metric{x=\"1";

/// Bytes a terminal or a parser could act on: C0 (but newline), DEL, C1.
fn raw_controls(bytes: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(bytes);
    text.char_indices()
        .filter(|(_, c)| (c.is_control() && *c != '\n') || ('\u{80}'..='\u{9f}').contains(c))
        .map(|(i, c)| format!("{:?} at {i}", c))
        .take(5)
        .collect()
}

/// A copy of a system binary under a hostile file name (its comm).
fn hostile_copy(dir: &std::path::Path, bin: &str, name: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::copy(bin, &p).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

/// Watched processes with hostile names; returns their pids.
fn hostile_job(procs: &mut Procs, dir: &std::path::Path) -> Vec<u32> {
    let mut pids = Vec::new();
    let jobs = [
        TITLE.to_string(),
        CLEAR.to_string(),
        CLIPBOARD.to_string(),
        INJECT.to_string(),
        "x".repeat(100_000),
    ];
    let sleeper = hostile_copy(dir, "/bin/sleep", "\x1b]2;PWNED\x07");
    for (i, job) in jobs.iter().enumerate() {
        let pid = procs.push(
            Command::new(&sleeper)
                .arg("600")
                .env("KITTY_WATCH", "1")
                .env("RANK", i.to_string())
                .env("JOB_NAME", job)
                .spawn()
                .unwrap(),
        );
        pids.push(pid);
    }
    // A ring whose threads get hostile names.
    let ring = start_ring(procs, 3, "ring\u{9b}31m", &|_| vec![]);
    for pid in &ring {
        for t in std::fs::read_dir(format!("/proc/{pid}/task"))
            .unwrap()
            .flatten()
        {
            let _ = std::fs::write(t.path().join("comm"), "\x1b]0;THREAD\x07");
        }
    }
    wait_exec(&pids, "600");
    pids.extend(ring);
    pids
}

#[test]
fn hostile_names_reach_no_output_raw() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let mut procs = Procs::default();
    hostile_job(&mut procs, dir.path());

    // The snapshot: valid JSON whose strings hold no control character.
    let snap = snapshot("2s", &["--no-ebpf"]);
    let text = serde_json::to_string(&snap).unwrap();
    let parsed_strings = {
        fn walk(v: &serde_json::Value, out: &mut Vec<String>) {
            match v {
                serde_json::Value::String(s) => out.push(s.clone()),
                serde_json::Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
                serde_json::Value::Object(o) => o.values().for_each(|x| walk(x, out)),
                _ => {}
            }
        }
        let mut out = Vec::new();
        walk(&snap, &mut out);
        out
    };
    for s in &parsed_strings {
        assert!(
            raw_controls(s.as_bytes()).is_empty(),
            "in the snapshot: {s:?}"
        );
    }
    assert!(
        text.contains("\\\\e]0;PWNED\\\\x07"),
        "shown as visible escapes"
    );
    let long = parsed_strings
        .iter()
        .filter(|s| s.starts_with("xxxx"))
        .map(|s| s.len())
        .max()
        .unwrap();
    assert!(long < 400, "a 100 KB name is capped: {long}");
    assert!(
        parsed_strings.iter().any(|s| s.contains("…[+")),
        "with a marker"
    );

    // A recording: replay --dump, CSV and JSONL exports.
    let rec = dir.path().join("hostile.kitty");
    run_ok(
        Command::new(kitty_bin())
            .args(["record", "--no-ebpf", "--duration", "2s", "-o"])
            .arg(&rec),
    );
    let dump = run_ok(
        Command::new(kitty_bin())
            .args(["replay", "--dump"])
            .arg(&rec),
    );
    assert!(
        raw_controls(&dump.stdout).is_empty(),
        "{:?}",
        raw_controls(&dump.stdout)
    );
    assert!(String::from_utf8_lossy(&dump.stdout).contains("\\e]2;PWNED\\x07"));
    for (fmt, table) in [("csv", "ranks"), ("csv", "events"), ("jsonl", "ranks")] {
        let out = run_ok(
            Command::new(kitty_bin())
                .args(["export", "--format", fmt, "--table", table])
                .arg(&rec),
        );
        assert!(
            raw_controls(&out.stdout).is_empty(),
            "{fmt} {table}: {:?}",
            raw_controls(&out.stdout)
        );
        if fmt == "jsonl" {
            for line in String::from_utf8_lossy(&out.stdout).lines() {
                let v: serde_json::Value = serde_json::from_str(line).unwrap();
                let s = v.to_string();
                assert!(
                    !s.contains("\\u001b"),
                    "an escaped ESC is still an ESC: {s}"
                );
            }
        }
    }
}

#[test]
fn hostile_names_do_not_forge_or_break_metrics() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let mut procs = Procs::default();
    hostile_job(&mut procs, dir.path());
    let port = free_ports(1)[0];
    let addr = format!("127.0.0.1:{port}");
    procs.push(
        Command::new(kitty_bin())
            .args(["serve", "--no-ebpf", "--listen", &addr])
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // Wait until every hostile rank is in the exposition.
    let body = wait_until(20, || {
        let (st, b) = http_get(&addr, "/metrics", &[]).ok()?;
        (st == 200 && b.matches("kitty_rank_threads{").count() >= 8).then_some(b)
    })
    .expect("serve shows the ranks");
    assert!(raw_controls(body.as_bytes()).is_empty());
    assert!(
        !body.lines().any(|l| l.starts_with("kitty_fake_metric")),
        "no forged series"
    );
    assert!(
        body.len() < 2_000_000,
        "100 KB names stay capped: {} bytes",
        body.len()
    );
    if Command::new("promtool").arg("--version").output().is_ok() {
        let out = promtool_check_metrics(&body);
        let said = String::from_utf8_lossy(&out.stderr).to_string()
            + &String::from_utf8_lossy(&out.stdout);
        assert!(
            !said.contains("error while linting") && !said.contains("parse error"),
            "promtool cannot parse it: {said}"
        );
    } else {
        skip("promtool is not installed (.ci/run installs it)");
    }
}

#[test]
fn a_hostile_terminal_title_never_reaches_the_operator() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let mut procs = Procs::default();
    hostile_job(&mut procs, dir.path());
    let cmd = format!("sh -c '{} --no-ebpf; sleep 60'", kitty_bin().display());
    let Some(t) = Tmux::start(&cmd, 160, 45) else {
        return;
    };
    // Had an escape reached tmux it would have been acted on, not shown.
    let screen = t.wait_for(&|s| s.contains("]2;PWNED") || s.contains("]0;PWNED"), 20);
    assert!(
        screen.contains("\\e]2;PWNED") || screen.contains("\\e]0;PWNED"),
        "visible escapes:\n{screen}"
    );
    assert!(
        !t.query("#{pane_title}").contains("PWNED"),
        "the title was changed by a watched process"
    );
    // The screen is intact: the header and the table frame are where they were.
    assert!(
        screen.lines().next().unwrap_or("").contains(" kitty "),
        "{screen}"
    );
    assert!(screen.contains("┌ ranks ("), "{screen}");
    t.keys(&["q"]);
}

#[test]
fn a_hostile_binary_s_frame_names_reach_the_profile_escaped() {
    let _g = serial();
    if !is_root() {
        return skip("profiling needs root");
    }
    let dir = tempfile::tempdir().unwrap();
    let yes = hostile_copy(dir.path(), "/usr/bin/yes", "\x1b]0;SYM\x07yes");
    let mut procs = Procs::default();
    let pid = procs.push(Command::new(&yes).stdout(Stdio::null()).spawn().unwrap());
    let out = run_ok(Command::new(kitty_bin()).args([
        "profile",
        "--pid",
        &pid.to_string(),
        "--duration",
        "1s",
    ]));
    assert!(
        raw_controls(&out.stdout).is_empty(),
        "{:?}",
        raw_controls(&out.stdout)
    );
    let folded = String::from_utf8_lossy(&out.stdout);
    assert!(folded.contains("\\e]0:SYM\\x07yes"), "{folded}");
}
