//! `kitty-tui profile` against a real busy process: folded stacks that name
//! its hot function, an SVG that inferno made, and the node-wide limit of two
//! profiles at once. Needs root (perf_event BPF); prints why it skips otherwise.

mod support;
use std::process::{Command, Stdio};
use support::*;

fn hog(procs: &mut Procs) -> u32 {
    procs.push(
        Command::new(kitty_bin())
            .args(["demo-hog", "--threads", "1"])
            .spawn()
            .unwrap(),
    )
}

#[test]
fn folded_and_svg_profiles_of_a_busy_process_name_its_hot_function() {
    let _g = serial();
    if !is_root() {
        return skip("perf_event BPF needs root");
    }
    let mut procs = Procs::default();
    let pid = hog(&mut procs);
    let out = run_ok(Command::new(kitty_bin()).args([
        "profile",
        "--pid",
        &pid.to_string(),
        "--duration",
        "2s",
        "--frequency",
        "199",
    ]));
    let folded = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stderr}");
    // Every line is `frame;frame;... count`, as inferno and speedscope read it.
    let mut total = 0;
    for line in folded.lines() {
        let (stack, n) = line.rsplit_once(' ').expect("stack and count");
        assert!(!stack.is_empty());
        total += n.parse::<u64>().expect("a count");
    }
    assert!(
        total >= 100,
        "2 s at 199 Hz of a busy thread: {total} samples"
    );
    let hot: u64 = folded
        .lines()
        .filter(|l| l.contains("compute_phase"))
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum();
    assert!(
        hot * 10 >= total * 8,
        "compute_phase in {hot} of {total}:\n{folded}"
    );
    assert!(
        stderr.contains("lost stacks:"),
        "losses are reported: {stderr}"
    );

    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("p.svg");
    run_ok(
        Command::new(kitty_bin())
            .args([
                "profile",
                "--pid",
                &pid.to_string(),
                "--duration",
                "1s",
                "--format",
                "svg",
                "-o",
            ])
            .arg(&svg),
    );
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<?xml") && text.contains("compute_phase"));
}

#[test]
fn a_third_profile_at_once_is_refused_and_bad_requests_say_why() {
    let _g = serial();
    if !is_root() {
        return skip("perf_event BPF needs root");
    }
    let mut procs = Procs::default();
    let pid = hog(&mut procs).to_string();
    let long = |procs: &mut Procs| {
        procs.push(
            Command::new(kitty_bin())
                .args(["profile", "--pid", &pid, "--duration", "8s"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        )
    };
    long(&mut procs);
    long(&mut procs);
    // Both hold a slot once their samplers are attached.
    let both = wait_until(15, || (profile_programs() >= 2).then_some(()));
    assert!(both.is_some(), "the two profiles never started");
    let third = Command::new(kitty_bin())
        .args(["profile", "--pid", &pid, "--duration", "1s"])
        .output()
        .unwrap();
    assert!(!third.status.success());
    let err = String::from_utf8_lossy(&third.stderr);
    assert!(err.contains("2 profiles are already running"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    drop(procs);

    for (args, want) in [
        (vec!["profile"], "needs a target"),
        (vec!["profile", "--pid", "999999999"], "no process"),
        (
            vec!["profile", "--pid", "1", "--frequency", "5000"],
            "frequency",
        ),
        (
            vec!["profile", "--pid", "1", "--duration", "2m"],
            "duration",
        ),
    ] {
        let o = Command::new(kitty_bin()).args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains(want), "{args:?}: {err}");
    }
}

fn profile_programs() -> usize {
    let out = run_ok(Command::new("bpftool").args(["prog", "list", "--json"]));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .filter(|p| p["name"] == "profile_cpu" || p["name"] == "offcpu_switch")
        .count()
}

#[test]
fn the_profiler_is_released_when_the_profile_ends_and_when_kitty_is_killed() {
    let _g = serial();
    if !is_root() {
        return skip("perf_event BPF needs root");
    }
    if Command::new("bpftool").arg("version").output().is_err() {
        return skip("bpftool is not installed");
    }
    let mut procs = Procs::default();
    let pid = hog(&mut procs).to_string();
    // Ends normally: nothing left once it has exited (the kernel frees it shortly after).
    run_ok(
        Command::new(kitty_bin())
            .args(["profile", "--pid", &pid, "--duration", "1s"])
            .stdout(Stdio::null()),
    );
    assert!(wait_until(10, || (profile_programs() == 0).then_some(())).is_some());
    // Killed mid-profile: the same.
    let mut p = Command::new(kitty_bin())
        .args(["profile", "--pid", &pid, "--duration", "30s"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(
        wait_until(10, || (profile_programs() > 0).then_some(())).is_some(),
        "the profiler never loaded"
    );
    p.kill().unwrap();
    p.wait().unwrap();
    assert!(
        wait_until(10, || (profile_programs() == 0).then_some(())).is_some(),
        "left loaded after kill -9"
    );
    // The off-CPU program too.
    run_ok(
        Command::new(kitty_bin())
            .args(["profile", "--off-cpu", "--pid", &pid, "--duration", "1s"])
            .stdout(Stdio::null()),
    );
    assert!(wait_until(10, || (profile_programs() == 0).then_some(())).is_some());
}

#[test]
fn the_off_cpu_profile_of_a_rank_blocked_in_recv_shows_that_wait() {
    let _g = serial();
    if !is_root() {
        return skip("tp_btf BPF needs root");
    }
    let mut procs = Procs::default();
    let pids = start_ring(&mut procs, 3, "blocked", &|_| {
        vec!["--work".into(), "10".into()]
    });
    wait_established(&pids);
    // Rank 1 stops: rank 2, which receives from it, waits in recv.
    // SAFETY: signalling a child we started.
    unsafe { libc::kill(pids[1] as i32, libc::SIGSTOP) };
    std::thread::sleep(std::time::Duration::from_millis(300));
    let out = Command::new(kitty_bin())
        .args([
            "profile",
            "--off-cpu",
            "--pid",
            &pids[2].to_string(),
            "--duration",
            "2s",
        ])
        .output()
        .unwrap();
    // SAFETY: as above.
    unsafe { libc::kill(pids[1] as i32, libc::SIGCONT) };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let folded = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("s blocked"), "{stderr}");
    let recv_us: u64 = folded
        .lines()
        .filter(|l| l.contains("[blocked:_sleeping_in_the_kernel]") && l.contains("tcp_recvmsg"))
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum();
    assert!(
        recv_us >= 1_500_000,
        "2 s blocked in recv, {recv_us} us found:\n{folded}"
    );
    assert!(
        !folded.contains("bpf_trace_run"),
        "the probe's own frames are cut:\n{folded}"
    );
}
