//! The eBPF probes on this kernel, driven by real processes: run-queue
//! latency of a rank sharing its CPU with a hog, flow bytes of a connection
//! that opens and closes between two polls, OOM / fatal-signal / execve
//! events, and nothing left loaded after kitty exits (kill -9 included).
//! Needs root; prints why it skips otherwise.

mod support;
use kitty_core::model::EventKind;
use std::process::Command;
use support::*;

/// The names our programs carry in the kernel (the C function names).
const PROGRAMS: &[&str] = &[
    "tp_tcp_probe",
    "runq_switch",
    "flow_send",
    "flow_recv",
    "flow_state",
    "ev_oom",
    "ev_exit",
    "ev_exec",
    "ev_fork",
];

fn loaded_programs() -> Vec<String> {
    let out = run_ok(Command::new("bpftool").args(["prog", "list", "--json"]));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("bpftool json");
    v.as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["name"].as_str().map(str::to_string))
        .filter(|n| PROGRAMS.contains(&n.as_str()))
        .collect()
}

fn needs_root() -> bool {
    if !is_root() {
        skip("loading BPF programs needs root");
        return false;
    }
    true
}

/// A ring job of `n` ranks where rank 1 shares the last CPU with a hog of
/// `hog_threads` threads and its peers keep to CPU 0. False (and why) on a
/// machine with one CPU.
fn ring_beside_a_hog(procs: &mut Procs, n: usize, job: &str, hog_threads: u32) -> bool {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus < 2 {
        skip("needs two CPUs: one for the peers, one for the hog");
        return false;
    }
    let hog_cpu = cpus - 1;
    start_ring(procs, n, job, &|rank| {
        let cpu = if rank == 1 { hog_cpu } else { 0 };
        vec![
            "--cpus".into(),
            cpu.to_string(),
            "--work".into(),
            "1".into(),
        ]
    });
    procs.push(
        Command::new(kitty_bin())
            .args(["demo-hog", "--cpu", &hog_cpu.to_string()])
            .args(["--threads", &hog_threads.to_string()])
            .spawn()
            .unwrap(),
    );
    true
}

#[test]
fn a_rank_sharing_its_cpu_has_ten_times_the_run_queue_p99() {
    let _g = serial();
    if !needs_root() {
        return;
    }
    let mut procs = Procs::default();
    if !ring_beside_a_hog(&mut procs, 4, "runq", 8) {
        return;
    }
    // Each rank's p99 over the ticks of the last 4 s: one tick's p99 on the
    // peers' shared CPU once caught a burst of other work on CI (3.1 ms
    // against the usual 0.4-0.6).
    let m = recorded_medians("runq", kitty_core::model::Sig::RunqP99Us, "6s", 4);
    let p99 = |rank: u32| m[&rank];
    let peers: Vec<f64> = [0, 2, 3].iter().map(|r| p99(*r)).collect();
    eprintln!(
        "run-queue p99 (median of 4 s): rank 1 {:.0} us, peers {peers:?}",
        p99(1)
    );
    assert!(
        p99(1) >= 10.0 * median(peers.clone()),
        "{} vs {peers:?}",
        p99(1)
    );
    let snap = snapshot("4s", &[]);
    let ranks = ranks_of(&snap, "runq");
    let rank1 = ranks.iter().find(|x| x["rank"] == 1).unwrap();
    assert!(rank1["signals"]["runq_p50_us"].as_f64().is_some());
    let verdicts = snap["verdicts"].as_array().unwrap();
    assert!(
        verdicts
            .iter()
            .any(|v| v["rank"] == 1 && v["signal"] == "runq_p99_us"),
        "{verdicts:#?}"
    );
    recordings_keep_the_histograms_only_when_asked("runq");
}

/// A plain `record` beside `record --histograms` of the same job: the
/// latter has the ranks' run-queue histograms, the plain one none of them
/// but the percentiles, recorded (not recomputed); each header says which
/// it is, and the same frames are smaller without their histograms.
fn recordings_keep_the_histograms_only_when_asked(job: &str) {
    use kitty_core::model::{HistKind, Sig};
    let dir = tempfile::tempdir().unwrap();
    let spawn = |name: &str, extra: &[&str]| {
        Command::new(kitty_bin())
            .args(["record", "--duration", "3s", "-o"])
            .arg(dir.path().join(name))
            .args(extra)
            .spawn()
            .unwrap()
    };
    let (mut plain, mut full) = (
        spawn("plain.kitty", &[]),
        spawn("full.kitty", &["--histograms"]),
    );
    assert!(plain.wait().unwrap().success() && full.wait().unwrap().success());
    let open =
        |name: &str| kitty_core::sinks::record::Reader::open(&dir.path().join(name)).unwrap();
    assert_eq!(open("plain.kitty").header().histograms, Some(false));
    assert_eq!(open("full.kitty").header().histograms, Some(true));
    let read = |name: &str| open(name).read_all().0;
    let ranks = |frames: &[kitty_core::model::Frame]| -> Vec<kitty_core::model::RankFrame> {
        frames
            .iter()
            .flat_map(|f| f.ranks.iter().cloned())
            .filter(|r| r.labels.job.as_deref() == Some(job))
            .collect()
    };
    let (plain, full) = (ranks(&read("plain.kitty")), ranks(&read("full.kitty")));
    let has_hist = |r: &kitty_core::model::RankFrame| r.histograms.get(HistKind::RunqUs).is_some();
    assert!(
        full.iter().any(has_hist),
        "the --histograms recording has them"
    );
    assert!(
        !plain.is_empty() && !plain.iter().any(has_hist),
        "the plain one none"
    );
    let p99s = plain
        .iter()
        .filter(|r| r.labels.rank == Some(1))
        .filter_map(|r| r.signal(Sig::RunqP99Us))
        .count();
    assert!(
        p99s >= 3,
        "rank 1's run-queue p99 is recorded without its histogram: {p99s} ticks"
    );
    // The same frames written again without their histograms are smaller
    // (two 3 s recordings side by side catch different ticks: which of the
    // two is larger varies from run to run).
    let again = dir.path().join("again.kitty");
    let header = open("full.kitty").header().clone().with_histograms(false);
    let mut w = kitty_core::sinks::record::Writer::create(&again, &header).unwrap();
    for f in read("full.kitty") {
        w.append(&f).unwrap();
    }
    w.finish().unwrap();
    let size = |p: &std::path::Path| std::fs::metadata(p).unwrap().len();
    let full = dir.path().join("full.kitty");
    assert!(
        size(&again) < size(&full),
        "{} against {} bytes",
        size(&again),
        size(&full)
    );
}

/// The same job through both per-thread paths: the BPF task iterator (the
/// default) and procfs (`--no-task-iter`, the fallback). Same signals, same
/// meaning: the rank sharing its CPU with a hog waits the most either way.
#[test]
fn the_task_iterator_and_procfs_give_the_same_signals() {
    let _g = serial();
    if !needs_root() {
        return;
    }
    let mut procs = Procs::default();
    if !ring_beside_a_hog(&mut procs, 3, "tasks", 4) {
        return;
    }
    let via_iter = snapshot("3s", &[]);
    let via_procfs = snapshot("3s", &["--no-task-iter"]);
    let st = |s: &serde_json::Value| s["sources"]["ebpf.tasks"].clone();
    assert_eq!(st(&via_iter)["status"], "ok", "{}", st(&via_iter));
    // Linux 6.7+ (CI's kernel: 6.18): one walk of every watched process.
    assert_eq!(
        st(&via_iter)["strategy"],
        "one iter/task walk of every watched process (kfuncs), open files by iter/task_file, TCP sockets read in one run"
    );
    assert_eq!(st(&via_procfs)["status"], "unavailable");
    let why = st(&via_procfs)["reason"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        why.contains("--no-task-iter") && why.contains("procfs"),
        "{why}"
    );

    let per_thread = ["cpu_pct", "run_delay_ms_per_s", "migrations_per_s"];
    let mut delay = Vec::new();
    let mut switches = Vec::new();
    let mut rss = Vec::new();
    let mut fds = Vec::new();
    for snap in [&via_iter, &via_procfs] {
        let ranks = ranks_of(snap, "tasks");
        assert_eq!(ranks.len(), 3);
        let of = |r: u64| *ranks.iter().find(|x| x["rank"] == r).expect("rank");
        for r in &ranks {
            for s in per_thread {
                assert!(r["signals"][s].as_f64().is_some(), "{s} missing: {r}");
            }
            let names: std::collections::BTreeSet<String> = r["threads"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["comm"].as_str().unwrap().to_string())
                .collect();
            assert!(!names.is_empty(), "threads named: {r}");
        }
        let d = |r| signal(of(r), "run_delay_ms_per_s");
        eprintln!(
            "run delay ms/s: {:.1} vs peers {:.1} {:.1}",
            d(1),
            d(0),
            d(2)
        );
        // Singled out, on either path: a clean-clone run saw the peers at
        // 41 and 57 ms/s (their CPU busy too) against 278.
        assert!(
            d(1) > 3.0 * d(0).max(d(2)).max(1.0),
            "{} {} {}",
            d(1),
            d(0),
            d(2)
        );
        // The fd inventory: the iterator's walk of the open files, or
        // /proc/<pid>/fd and its links (the ring's sockets either way).
        for r in &ranks {
            let socks = r["sockets"].as_array().map_or(0, Vec::len);
            assert!(socks >= 2, "a ring rank's two TCP sockets: {r}");
        }
        fds.push(ranks.iter().map(|r| signal(r, "fds")).sum::<f64>());
        delay.push(d(1));
        switches.push(signal(of(0), "ctx_voluntary_per_s"));
        rss.push(signal(of(0), "rss_bytes"));
        assert!(of(0)["signals"]["io_write_bytes_per_s"].as_f64().is_some());
    }
    assert_eq!(fds[0], fds[1], "open fds: iterator vs procfs");
    // RSS from the rows' mm counters, or stat: the same pages.
    assert!(
        (rss[0] - rss[1]).abs() <= 0.2 * rss[1],
        "RSS: iterator {} vs procfs {}",
        rss[0],
        rss[1]
    );
    // The leader's context switches: its task row, or `status`.
    assert!(
        switches[0] < 3.0 * switches[1].max(1.0) && switches[1] < 3.0 * switches[0].max(1.0),
        "voluntary switches/s: iterator {} vs procfs {}",
        switches[0],
        switches[1]
    );
    // One steady load, two paths: the same order of magnitude.
    assert!(
        delay[0] < 3.0 * delay[1] && delay[1] < 3.0 * delay[0],
        "iterator {} vs procfs {} ms/s",
        delay[0],
        delay[1]
    );
    // doctor says the same.
    let check = |extra: &[&str]| {
        let out = run_ok(
            Command::new(kitty_bin())
                .args(["doctor", "--json"])
                .args(extra),
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == "ebpf.tasks")
            .cloned()
            .unwrap_or_else(|| panic!("no ebpf.tasks check: {v:#}"))
    };
    let on = check(&[]);
    assert_eq!(on["status"], "ok", "{on}");
    let detail = on["detail"].as_str().unwrap();
    assert!(
        detail.ends_with("the neighbours scan from one walk of every task"),
        "{on}"
    );
    assert!(detail.contains("(iter/task_file)"), "{on}");
    let off = check(&["--no-task-iter"]);
    assert_eq!(off["status"], "warn", "{off}");
    assert!(off["detail"].as_str().unwrap().contains("procfs"), "{off}");
}

/// Where the iterator cannot load (here: an unprivileged user, who may not
/// load BPF), the procfs path takes over and the status says why.
#[test]
fn without_the_iterator_procfs_takes_over_and_says_why() {
    let _g = serial();
    if !needs_root() {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    // A copy of the binary nobody can run (the checkout may be under /root).
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let bin = dir.path().join("kitty-tui");
    std::fs::copy(kitty_bin(), &bin).unwrap();
    let mut procs = Procs::default();
    // nobody's own watched process, which nobody may read.
    let pid = procs.push(
        Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .env("KITTY_WATCH", "1")
            .env("RANK", "0")
            .env("JOB_NAME", "unprivileged")
            .uid(65534)
            .gid(65534)
            .spawn()
            .unwrap(),
    );
    wait_exec(&[pid], "while");
    let out = run_ok(
        Command::new(&bin)
            .args(["snapshot", "--json", "--duration", "2s", "--no-gpu"])
            .current_dir(dir.path())
            .uid(65534)
            .gid(65534),
    );
    let snap: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let st = &snap["sources"]["ebpf.tasks"];
    assert_eq!(st["status"], "unavailable", "{st}");
    let why = st["reason"].as_str().unwrap_or_default();
    assert!(
        why.contains("iter/task did not load") && why.contains("per-thread counters from procfs"),
        "{why}"
    );
    let ranks = ranks_of(&snap, "unprivileged");
    assert_eq!(ranks.len(), 1, "{snap:#}");
    assert!(
        signal(ranks[0], "cpu_pct") > 50.0,
        "procfs read it: {}",
        ranks[0]
    );
}

#[test]
fn flow_bytes_land_on_the_sender_and_its_peer_even_when_closed_between_polls() {
    let _g = serial();
    if !needs_root() {
        return;
    }
    let mut procs = Procs::default();
    let port = free_ports(1)[0];
    let addr = format!("127.0.0.1:{port}");
    procs.push(
        Command::new(kitty_bin())
            .args(["demo-flow", "--listen", &addr])
            .spawn()
            .unwrap(),
    );
    let rec = LiveRecord::start(&[]);
    rec.wait_ready();
    const SENT: u64 = 3_000_000;
    let mut sender = Command::new(kitty_bin())
        .args([
            "demo-flow",
            "--connect",
            &addr,
            "--bytes",
            &SENT.to_string(),
        ])
        .spawn()
        .unwrap();
    let pid = sender.id();
    assert!(sender.wait().unwrap().success());
    // The last frame in which the sender's flow has all its bytes.
    let last = rec.wait_for(10, |fs| {
        fs.iter()
            .rev()
            .find(|f| {
                f.flows
                    .iter()
                    .any(|x| x.pid == pid && x.tx_bytes >= SENT * 95 / 100)
            })
            .cloned()
    });
    drop(rec);
    let last = last.expect("the flow was never recorded whole");
    let flows: Vec<serde_json::Value> = last
        .flows
        .iter()
        .map(|f| serde_json::to_value(f).unwrap())
        .collect();
    let mine: Vec<&serde_json::Value> = flows
        .iter()
        .filter(|f| f["pid"] == pid && f["remote"] == addr.as_str())
        .collect();
    assert_eq!(mine.len(), 1, "flows of pid {pid}: {flows:#?}");
    let tx = mine[0]["tx_bytes"].as_f64().unwrap();
    eprintln!("sent {SENT} B, attributed {tx} B to pid {pid} -> {addr}");
    assert!(
        (tx - SENT as f64).abs() <= 0.05 * SENT as f64,
        "{tx} vs {SENT}"
    );
    // The sink's side: the same bytes received, on the peer's socket.
    let rx: f64 = flows
        .iter()
        .filter(|f| f["local"] == addr.as_str())
        .map(|f| f["rx_bytes"].as_f64().unwrap())
        .sum();
    assert!(
        (rx - SENT as f64).abs() <= 0.05 * SENT as f64,
        "sink received {rx}"
    );
}

#[test]
fn a_watched_process_killed_by_a_signal_is_an_event_naming_the_signal() {
    let _g = serial();
    if !needs_root() {
        return;
    }
    let mut procs = Procs::default();
    let rec = LiveRecord::start(&[]);
    rec.wait_ready();
    let victim = procs.push(
        Command::new("sleep")
            .arg("60")
            .env("KITTY_WATCH", "1")
            .spawn()
            .unwrap(),
    );
    // Watched (the exec hint finds it at the next tick), then killed.
    let seen = rec.wait_for(10, |fs| {
        fs.iter()
            .any(|f| f.ranks.iter().any(|r| r.key.pid == victim))
            .then_some(())
    });
    assert!(seen.is_some(), "the victim was never watched");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(victim as i32, libc::SIGSEGV) };
    rec.wait_for(10, |fs| {
        (!events_of(fs, EventKind::FatalSignal).is_empty()).then_some(())
    });
    let ev = events_of(&rec.stop(), EventKind::FatalSignal);
    assert!(
        ev.iter()
            .any(|m| m.contains(&victim.to_string()) && m.contains("SIGSEGV")),
        "{ev:?}"
    );
}

/// A memory cgroup (v1 or v2) limited to 32 MiB; removed on drop.
struct MemCgroup(std::path::PathBuf);

impl MemCgroup {
    fn new() -> Option<MemCgroup> {
        let name = format!("kitty-oom-{}", std::process::id());
        for (root, limit) in [
            ("/sys/fs/cgroup/memory", "memory.limit_in_bytes"),
            ("/sys/fs/cgroup", "memory.max"),
            ("/sys/fs/cgroup/unified", "memory.max"),
        ] {
            let dir = std::path::Path::new(root).join(&name);
            if std::fs::create_dir(&dir).is_ok() {
                if std::fs::write(dir.join(limit), "33554432").is_ok() {
                    let _ = std::fs::write(dir.join("memory.swappiness"), "0");
                    let _ = std::fs::write(dir.join("memory.swap.max"), "0");
                    return Some(MemCgroup(dir));
                }
                let _ = std::fs::remove_dir(&dir);
            }
        }
        None
    }
}

impl Drop for MemCgroup {
    fn drop(&mut self) {
        // Removable once the killed process is gone from it.
        let _ = wait_until(5, || std::fs::remove_dir(&self.0).ok());
    }
}

#[test]
fn an_oom_kill_names_the_victim_and_the_allocation_that_caused_it() {
    let _g = serial();
    if !needs_root() {
        return;
    }
    let Some(cg) = MemCgroup::new() else {
        return skip("no memory cgroup controller to limit a process with");
    };
    let rec = LiveRecord::start(&[]);
    rec.wait_ready();
    // `tail` keeps an ever-growing line of /dev/zero in memory until killed.
    let procs_file = cg.0.join("cgroup.procs");
    let st = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "echo $$ > {} && exec tail /dev/zero",
            procs_file.display()
        ))
        .status()
        .unwrap();
    assert!(!st.success(), "the hog should have been killed");
    rec.wait_for(10, |fs| {
        (!events_of(fs, EventKind::OomKill).is_empty()).then_some(())
    });
    let ev = events_of(&rec.stop(), EventKind::OomKill);
    assert!(ev.iter().any(|m| m.contains("(tail)")), "{ev:?}");
    drop(cg);
}

#[test]
fn an_execve_storm_is_one_event_with_a_truncated_count() {
    let _g = serial();
    if !needs_root() {
        return;
    }
    let rec = LiveRecord::start(&[]);
    rec.wait_ready();
    // Two loops at once, 4000 execs: faster than the bucket refills (150/s
    // per CPU after a burst of 300 each) even on a slow, busy machine (at
    // 230/s a single loop of 2500 stayed under it).
    // A process marked for watching starts in the middle of it: its exec
    // hint is likely dropped with the rest, and the drop brings discovery's
    // scan back to its 5 s pace (from 30 s while every new process is
    // hinted), so it is watched within seconds all the same.
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("marked");
    let st = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "l() {{ i=0; while [ $i -lt 2000 ]; do /bin/true; i=$((i+1)); done; }}; \
             l & a=$!; l & b=$!; \
             (sleep 0.3; KITTY_WATCH=1 exec sleep 30) & echo $! > {}; wait $a $b",
            pid_file.display()
        ))
        .status()
        .unwrap();
    assert!(st.success());
    let marked: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    struct Kill(u32);
    impl Drop for Kill {
        fn drop(&mut self) {
            // SAFETY: a signal to the sleeper this test started.
            unsafe { libc::kill(self.0 as i32, libc::SIGKILL) };
        }
    }
    let _sleeper = Kill(marked);
    let watched = rec.wait_for(12, |fs| {
        fs.iter()
            .any(|f| f.ranks.iter().any(|r| r.key.pid == marked))
            .then_some(())
    });
    assert!(
        watched.is_some(),
        "the process started in the storm was never watched"
    );
    // The burst is reported once it ends.
    rec.wait_for(10, |fs| {
        (!events_of(fs, EventKind::ExecBurst).is_empty()).then_some(())
    });
    let ev = events_of(&rec.stop(), EventKind::ExecBurst);
    assert_eq!(ev.len(), 1, "one event per burst: {ev:?}");
    let truncated: u64 = ev[0]
        .split("truncated ")
        .nth(1)
        .and_then(|t| t.trim_end_matches(')').parse().ok())
        .expect("a truncated count");
    eprintln!("{}", ev[0]);
    assert!(
        truncated > 0,
        "4000 execs in a few seconds exceed the token bucket: {}",
        ev[0]
    );
}

#[test]
fn nothing_stays_loaded_after_kitty_exits_normally_or_by_kill_9() {
    let _g = serial();
    if !needs_root() {
        return;
    }
    if Command::new("bpftool").arg("version").output().is_err() {
        return skip("bpftool is not installed");
    }
    // Another test's kitty may have exited a moment ago: its programs are
    // freed shortly after (deferred work), so wait for a clean start.
    let clean = wait_until(10, || loaded_programs().is_empty().then_some(()));
    assert!(
        clean.is_some(),
        "left over from before: {:?}",
        loaded_programs()
    );
    let dir = tempfile::tempdir().unwrap();
    record(dir.path().join("a.kitty"), "2s");
    // The kernel frees a program once its last reference is gone, which
    // happens shortly after the process exits (deferred work).
    let gone = wait_until(10, || loaded_programs().is_empty().then_some(()));
    assert!(
        gone.is_some(),
        "after a normal exit: {:?}",
        loaded_programs()
    );

    let mut child = Command::new(kitty_bin())
        .args(["record", "-o"])
        .arg(dir.path().join("b.kitty"))
        .spawn()
        .unwrap();
    let all = wait_until(15, || {
        let l = loaded_programs();
        (l.len() == PROGRAMS.len()).then_some(l)
    });
    assert!(
        all.is_some(),
        "the probes never all loaded: {:?}",
        loaded_programs()
    );
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let gone = wait_until(10, || loaded_programs().is_empty().then_some(()));
    assert!(gone.is_some(), "after kill -9: {:?}", loaded_programs());
}
