//! Issue 2's end-to-end checks against the real kernel: ring jobs, CPU
//! contention, threads, CFS throttling, bad input.

mod support;
use std::process::{Command, Stdio};
use support::*;

#[test]
fn ring_job_is_listed_with_ranks_sockets_and_rates() {
    let _g = serial();
    let mut procs = Procs::default();
    let job = "ring-list";
    let pids = start_ring(&mut procs, 4, job, &|_| vec![]);
    let unmarked = procs.push(
        Command::new("sleep")
            .arg("60")
            .env_remove("KITTY_WATCH")
            .spawn()
            .unwrap(),
    );
    let snap = snapshot("3s", &[]);
    let ranks = ranks_of(&snap, job);
    assert_eq!(ranks.len(), 4, "{snap:#}");
    let mut seen: Vec<u64> = ranks.iter().map(|r| r["rank"].as_u64().unwrap()).collect();
    seen.sort();
    assert_eq!(seen, vec![0, 1, 2, 3]);
    for r in &ranks {
        assert!(pids.contains(&(r["pid"].as_u64().unwrap() as u32)));
        assert!(signal(r, "tcp_sockets") >= 2.0, "{r}");
        assert!(signal(r, "bytes_sent_per_s") > 0.0, "{r}");
        assert!(signal(r, "out_segs_per_s") > 0.0, "{r}");
        assert!(signal(r, "in_segs_per_s") > 0.0, "{r}");
    }
    let all = snap["ranks"].as_array().unwrap();
    assert!(
        !all.iter().any(|r| r["pid"] == unmarked),
        "an unmarked process is not watched"
    );
    assert_eq!(snap["sources"]["procfs"]["status"], "ok");
}

#[test]
fn cpu_contention_flags_the_pinned_rank_and_healthy_job_stays_quiet() {
    let _g = serial();
    let ncpu = std::thread::available_parallelism().unwrap().get();
    let hog_cpu = ncpu - 1;
    let others: String = (0..ncpu)
        .filter(|c| *c != hog_cpu)
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",");

    // Healthy first: no verdict over 10 s.
    {
        let mut procs = Procs::default();
        start_ring(&mut procs, 4, "healthy", &|_| {
            vec!["--work".into(), "10".into()]
        });
        let path = std::env::temp_dir().join(format!("kitty-healthy-{}.kitty", std::process::id()));
        record(&path, "10s");
        let mut r = kitty_core::sinks::record::Reader::open(&path).unwrap();
        let (frames, _) = r.read_all();
        let _ = std::fs::remove_file(&path);
        assert!(frames.len() >= 15);
        for f in &frames {
            let mine: Vec<_> = f
                .verdicts
                .iter()
                .filter(|v| v.job.as_deref() == Some("healthy"))
                .collect();
            assert!(mine.is_empty(), "healthy job got a verdict: {:?}", mine);
        }
    }

    let mut procs = Procs::default();
    let straggler = 2;
    start_ring(&mut procs, 4, "contended", &|rank| {
        let cpus = if rank == straggler {
            hog_cpu.to_string()
        } else {
            others.clone()
        };
        vec!["--work".into(), "10".into(), "--cpus".into(), cpus]
    });
    let hog = Command::new(kitty_bin())
        .args(["demo-hog", "--cpu", &hog_cpu.to_string(), "--threads", "16"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let hog_pid = procs.push(hog);
    // Each rank's median over the ticks of the last 4 s rather than one
    // 500 ms interval (peers share the other CPU: one tick is noisy).
    let m = recorded_medians("contended", kitty_core::model::Sig::RunDelayMsPerS, "6s", 4);
    let v = m[&(straggler as u32)];
    let peers = median(
        m.iter()
            .filter(|(r, _)| **r != straggler as u32)
            .map(|(_, v)| *v)
            .collect(),
    );
    eprintln!("contended rank {v:.1} ms/s vs peers median {peers:.1} ms/s (last 4 s)");
    // The three peers share one CPU on a 2-CPU machine, so their own wait
    // grows with the machine's speed: 420-455 ms/s against 37-48 on one VM
    // of this kind (9-12x). The verdict below asks for 3x; this asks 5x.
    assert!(
        v >= 5.0 * peers,
        "straggler {v} ms/s vs peers' median {peers}"
    );
    let snap = snapshot("4s", &[]);
    let ranks = ranks_of(&snap, "contended");
    assert_eq!(ranks.len(), 4);
    let mine = ranks.iter().find(|r| r["rank"] == straggler).unwrap();
    let verdicts = snap["verdicts"].as_array().unwrap();
    let found = verdicts
        .iter()
        .find(|x| x["rank"] == straggler && x["signal"] == "run_delay_ms_per_s");
    let found = found.unwrap_or_else(|| panic!("no verdict: {verdicts:#?}"));
    assert!(found["ratio"].as_f64().unwrap() >= 3.0);
    assert!(found["message"]
        .as_str()
        .unwrap()
        .starts_with("rank 2: run-queue delay"));
    assert_eq!(mine["signals"]["affinity_cpus"], 1.0);
    // The culprit: with the run-queue probe, the hog is charged most of the
    // wait; without it, it is the busiest process allowed on the CPU (a guess).
    let top = &found["culprits"][0];
    assert_eq!(top["comm"], "demo-hog", "{found:#}");
    assert_eq!(top["pid"], hog_pid, "{found:#}");
    if is_root() {
        assert!(top["share_pct"].as_f64().unwrap() >= 50.0, "{found:#}");
        assert_eq!(top["guess"], false, "{found:#}");
    }
}

#[test]
fn run_delay_counts_non_leader_threads() {
    let _g = serial();
    let mut procs = Procs::default();
    let ncpu = std::thread::available_parallelism().unwrap().get();
    let cpu = (ncpu - 1).to_string();
    // The rank's compute runs in a worker thread while the leader only waits.
    let pids = start_ring(&mut procs, 3, "threads", &|rank| {
        let mut a = vec!["--work".into(), "200".into()];
        if rank == 0 {
            a.extend(["--worker-thread".into(), "--cpus".into(), cpu.clone()]);
        }
        a
    });
    procs.push(
        Command::new(kitty_bin())
            .args(["demo-hog", "--cpu", &cpu])
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let snap = snapshot("3s", &["--pid", &pids[0].to_string()]);
    let r = snap["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["pid"] == pids[0])
        .unwrap()
        .clone();
    let total = signal(&r, "run_delay_ms_per_s");
    // The leader's own schedstat shows little: the worker's delay must be in the sum.
    let leader: Vec<u64> = std::fs::read_to_string(format!("/proc/{}/schedstat", pids[0]))
        .unwrap()
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    let tasks = std::fs::read_dir(format!("/proc/{}/task", pids[0]))
        .unwrap()
        .count();
    assert!(tasks >= 3, "leader, writer and worker threads");
    assert!(
        total > 20.0,
        "run delay of a rank whose busy thread is not the leader: {total} ms/s"
    );
    assert!(leader[1] > 0);
}

#[test]
fn cfs_quota_shows_throttling_only_for_the_limited_rank() {
    let _g = serial();
    if !is_root() {
        skip("cfs_quota: needs root to create a cgroup");
        return;
    }
    let (base, quota_file, period_file) =
        if std::path::Path::new("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").exists() {
            ("/sys/fs/cgroup/cpu", "cpu.cfs_quota_us", None)
        } else if std::path::Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
            ("/sys/fs/cgroup", "cpu.max", Some(()))
        } else {
            skip("cfs_quota: no cgroup cpu controller mounted");
            return;
        };
    let dir = std::path::PathBuf::from(base).join(format!("kitty-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // 1 % of a CPU: well under what the rank needs, whatever else runs
    // (at 5 % a ring slowed by a busy machine can fit under its quota).
    let limit = if period_file.is_some() {
        "1000 100000"
    } else {
        "1000"
    };
    std::fs::write(dir.join(quota_file), limit).unwrap();
    let mut procs = Procs::default();
    let pids = start_ring(&mut procs, 3, "cfs", &|_| {
        vec!["--work".into(), "3000".into()]
    });
    let limited = pids[1];
    std::fs::write(dir.join("cgroup.procs"), limited.to_string()).unwrap();
    let snap = snapshot("4s", &[]);
    for r in ranks_of(&snap, "cfs") {
        let v = r["signals"]["cfs_throttled_ms_per_s"].as_f64();
        if r["pid"] == limited {
            assert!(v.unwrap() > 1.0, "limited rank throttled: {r}");
        } else {
            assert!(v.unwrap_or(0.0) < 1.0, "unlimited rank not throttled: {r}");
        }
    }
    drop(procs);
    // Removable once its processes are gone.
    let _ = wait_until(5, || std::fs::remove_dir(&dir).ok());
}

#[test]
fn bad_input_is_one_line_and_non_zero() {
    let run = |args: &[&str]| {
        let out = Command::new(kitty_bin()).args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        (out.status.code(), err)
    };
    let (code, err) = run(&["snapshot", "--json", "--pid", "999999999"]);
    assert_ne!(code, Some(0));
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("pid 999999999 does not exist"), "{err}");
    let (code, err) = run(&["snapshot", "--json", "--proc-root", "/nonexistent"]);
    assert_ne!(code, Some(0));
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("/nonexistent"));
    let (code, err) = run(&[
        "record",
        "-o",
        "/nonexistent-dir/x.kitty",
        "--duration",
        "1s",
    ]);
    assert_ne!(code, Some(0));
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let (code, err) = run(&["replay", "--dump", "/etc/hostname"]);
    assert_ne!(code, Some(0));
    assert!(err.contains("not a kitty recording"), "{err}");
}

#[test]
fn doctor_json_reports_procfs_checks() {
    let out = run_ok(Command::new(kitty_bin()).args(["doctor", "--json"]));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let checks = v["checks"].as_array().unwrap();
    for name in ["proc_root", "schedstat", "cgroup", "sock_diag"] {
        assert!(
            checks.iter().any(|c| c["name"] == name),
            "{name} missing: {v:#}"
        );
    }
}
