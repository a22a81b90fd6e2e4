//! Issue 13 on real processes: one answer per straggler (its culprit, its
//! consequences), placement findings on the steady window, job identity
//! stronger than the name, wrappers that are not ranks.

mod support;
use kitty_core::model::{FindingKind, Frame, Sig};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use support::*;

fn findings_of(frames: &[Frame], kind: FindingKind) -> Vec<(Vec<Option<u32>>, String)> {
    frames
        .iter()
        .flat_map(|f| f.findings.iter())
        .filter(|x| x.kind == kind)
        .map(|x| (x.ranks.clone(), x.message.to_string()))
        .collect()
}

/// The median run delay (ms/s) of the `steady` job's rank 2 and of its peers.
fn run_delay_p50s(frames: &[Frame]) -> (f64, f64) {
    let p50 = |want: bool| {
        median(
            frames
                .iter()
                .flat_map(|f| of_job(f, "steady"))
                .filter(|r| (r.labels.rank == Some(2)) == want)
                .filter_map(|r| r.signal(Sig::RunDelayMsPerS))
                .collect(),
        )
    };
    (p50(true), p50(false))
}

fn of_job<'a>(
    f: &'a Frame,
    job: &'a str,
) -> impl Iterator<Item = &'a kitty_core::model::RankFrame> {
    f.ranks
        .iter()
        .filter(move |r| r.labels.job.as_deref() == Some(job))
}

/// Records `secs` of the node with a short findings window.
fn record_for(secs: u64, window: &str) -> Vec<Frame> {
    let rec = LiveRecord::start(&["--findings-window", window]);
    std::thread::sleep(std::time::Duration::from_secs(secs));
    rec.stop()
}

#[test]
fn the_demo_shows_one_straggler_its_culprit_and_its_consequences() {
    let _g = serial();
    if !is_root() {
        skip("demo straggler: the culprit comes from the run-queue probe (root)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("demo.kitty");
    let out = run_ok(
        Command::new(kitty_bin())
            .args([
                "demo",
                "--headless",
                "14s",
                "--fault-after",
                "2s",
                "--record",
            ])
            .arg(&path),
    );
    let snap: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let verdicts = snap["verdicts"].as_array().unwrap();
    let stragglers: Vec<&serde_json::Value> = verdicts
        .iter()
        .filter(|v| v["job"] == "kitty-demo" && v["consequence_of"].is_null())
        .collect();
    assert!(!stragglers.is_empty(), "no straggler: {verdicts:#?}");
    assert!(
        stragglers.iter().all(|v| v["rank"] == 2),
        "only rank 2 is a straggler: {stragglers:#?}"
    );
    let delay = stragglers
        .iter()
        .find(|v| v["signal"] == "run_delay_ms_per_s" || v["signal"] == "runq_p99_us")
        .expect("a run-queue verdict");
    let culprit = &delay["culprits"][0];
    assert_eq!(culprit["comm"], "demo-hog", "{delay:#}");
    assert!(culprit["share_pct"].as_f64().unwrap() >= 50.0, "{delay:#}");
    let msg = delay["message"].as_str().unwrap();
    assert!(msg.contains("`demo-hog` (pid"), "{msg}");
    assert!(msg.contains("not a rank) ran"), "{msg}");
    // Any other rank's verdict is rank 2's consequence.
    for v in verdicts
        .iter()
        .filter(|v| v["job"] == "kitty-demo" && v["rank"] != 2)
    {
        assert_eq!(v["consequence_of"]["rank"], 2, "{v:#}");
    }
    // Over the whole recording: no held verdict reads "0 vs 0", no other
    // rank is ever a straggler once rank 2 is flagged.
    let (frames, _) = kitty_core::sinks::record::Reader::open(&path)
        .unwrap()
        .read_all();
    // The demo's ranks write NCCL Inspector records of their all-reduces:
    // the effect verdict (rank 2 arrives late, the others wait) stands on
    // the rank of the CPU cause, and each names the other.
    let late: Vec<String> = frames
        .iter()
        .flat_map(|f| f.verdicts.iter())
        .filter(|v| v.signal == Sig::NcclLateMs)
        .map(|v| format!("{:?} {}", v.rank, v.message))
        .collect();
    assert!(!late.is_empty(), "no late-arrival verdict in the demo");
    assert!(
        late.iter().all(|m| m.starts_with("Some(2) rank 2 arrives")),
        "{late:#?}"
    );
    assert!(
        late.iter()
            .any(|m| m.contains("late to AllReduce (seq")
                && m.contains("the effect of its run-queue")),
        "{late:#?}"
    );
    for f in &frames {
        for v in &f.verdicts {
            let m = v.message.as_str();
            assert!(!m.contains(" 0 /s vs peers 0 /s"), "{m}");
            assert!(!m.contains(" 0 ms/s vs peers 0 ms/s"), "{m}");
            assert!(
                v.value > v.peer_median,
                "a held verdict keeps its window: {m}"
            );
        }
        // Another rank's verdict is rank 2's consequence, or (on a small
        // machine, where the demo pins the healthy ranks together on the
        // CPUs the hog leaves) a wait whose culprits are mostly its own
        // peers: never rank 2's kind of straggler, with an outsider to
        // blame. Others may share such a wait a little (seen on a 2-CPU VM:
        // the demo's own kitty at 13 %, the kernel's `kdamond.0` at 6 %),
        // the hog never.
        let flagged_two = f.verdicts.iter().any(|v| v.rank == Some(2));
        if flagged_two {
            for v in f.verdicts.iter().filter(|v| v.rank != Some(2)) {
                let among_peers = v.culprits.first().is_some_and(|c| c.rank.is_some())
                    && v.culprits.iter().all(|c| c.comm.as_str() != "demo-hog");
                assert!(v.consequence_of.is_some() || among_peers, "{}", v.message);
            }
        }
    }
}

#[test]
fn a_rank_left_unpinned_among_pinned_peers_is_a_finding() {
    let _g = serial();
    let ncpu = std::thread::available_parallelism().unwrap().get();
    let mut procs = Procs::default();
    start_ring(&mut procs, 3, "unpinned", &|rank| {
        let mut a = vec!["--work".into(), "10".into()];
        if rank < 2 {
            a.extend(["--cpus".into(), (rank % ncpu).to_string()]);
        }
        a
    });
    let frames = record_for(8, "10s");
    let found = findings_of(&frames, FindingKind::AffinityAsymmetry);
    let mine: Vec<_> = found.iter().filter(|(r, _)| r == &vec![Some(2)]).collect();
    assert!(!mine.is_empty(), "no affinity finding: {found:?}");
    assert!(
        mine[0]
            .1
            .contains(&format!("rank 2 is unpinned (may run on all {ncpu} CPUs)")),
        "{}",
        mine[0].1
    );
    // A finding is never a straggler verdict.
    assert!(frames
        .iter()
        .flat_map(|f| f.verdicts.iter())
        .all(|v| v.job.as_deref() != Some("unpinned")));
}

#[test]
fn a_small_steady_run_delay_asymmetry_is_a_finding_within_the_window() {
    let _g = serial();
    let ncpu = std::thread::available_parallelism().unwrap().get();
    if ncpu < 2 {
        skip("steady asymmetry: needs two CPUs (one for the peers, one shared)");
        return;
    }
    let shared = (ncpu - 1).to_string();
    let mut procs = Procs::default();
    // Light ranks: peers on CPU 0, rank 2 on the last CPU beside a
    // low-priority busy process, which delays it a little on every wakeup.
    start_ring(&mut procs, 3, "steady", &|rank| {
        let cpu = if rank == 2 {
            shared.clone()
        } else {
            "0".into()
        };
        [
            "--work",
            "1",
            "--chunk-kb",
            "4",
            // Few steps a second: the hog's delay per wakeup stays a
            // multiple of the peers' while the total stays well under
            // the acute floor (at 20 steps/s the two met on CI).
            "--gpu-ms",
            "150",
            "--cpus",
            &cpu,
        ]
        .map(String::from)
        .to_vec()
    });
    // The machine decides how much a niced neighbour delays a rank: pick
    // the neighbour's size that gives the largest asymmetry still under
    // the acute floor (several times the peers, under 25 ms/s above them).
    let mut hog_of = |threads: u32| {
        procs.push(
            Command::new("nice")
                .args(["-n", "19"])
                .arg(kitty_bin())
                .args([
                    "demo-hog",
                    "--cpu",
                    &shared,
                    "--threads",
                    &threads.to_string(),
                ])
                .stdout(Stdio::null())
                .spawn()
                .unwrap(),
        )
    };
    let mut best: Option<(u32, f64)> = None;
    for threads in [3, 4, 5, 6, 7, 8, 10] {
        let hog = hog_of(threads);
        let (me, peers) = run_delay_p50s(&record_for(6, "10s"));
        // SAFETY: signalling a child we started.
        unsafe { libc::kill(hog as i32, libc::SIGKILL) };
        eprintln!("{threads} niced threads: rank 2 {me:.2} ms/s, peers {peers:.2} ms/s");
        // Any tick of rank 2 over the acute floor (25 ms/s) is a verdict,
        // which the finding defers to (one CI run picked 20.8 against 1.0
        // and had only verdicts): a margin of 10 ms/s. A larger neighbour
        // only delays rank 2 more.
        if me - peers >= 15.0 {
            break;
        }
        let ratio = me / peers.max(0.02);
        if best.is_none_or(|(_, r)| ratio > r) {
            best = Some((threads, ratio));
        }
    }
    // The finding needs 5x over its window: a margin of 6x (8x and 15
    // ms/s over the peers could not both hold in some CI runs).
    let Some((threads, _)) = best.filter(|&(_, r)| r >= 6.0) else {
        skip("steady asymmetry: no neighbour size gave a small steady asymmetry here");
        return;
    };
    eprintln!("chose {threads} niced threads");
    let _hog = hog_of(threads);
    let frames = record_for(16, "10s");
    let found = findings_of(&frames, FindingKind::RunDelayAsymmetry);
    let mine: Vec<_> = found.iter().filter(|(r, _)| r == &vec![Some(2)]).collect();
    let acute = frames
        .iter()
        .filter(|f| f.verdicts.iter().any(|v| v.signal == Sig::RunDelayMsPerS))
        .count();
    assert!(
        !mine.is_empty(),
        "no run-delay finding: {found:?}; rank 2 vs peers (p50 ms/s) {:?}, {acute} of {} frames with a run-delay verdict",
        run_delay_p50s(&frames),
        frames.len()
    );
    assert!(
        mine[0].1.contains("rank 2: run-queue delay steady at"),
        "{}",
        mine[0].1
    );
    let peers_found = found.iter().filter(|(r, _)| r != &vec![Some(2)]).count();
    assert_eq!(peers_found, 0, "only rank 2: {found:?}");
}

#[test]
fn two_launches_with_one_job_name_are_two_jobs() {
    let _g = serial();
    let mut procs = Procs::default();
    let a = start_ring(&mut procs, 3, "twin", &|_| {
        vec!["--work".into(), "10".into()]
    });
    let b = start_ring(&mut procs, 3, "twin", &|_| {
        vec!["--work".into(), "10".into()]
    });
    let snap = snapshot("2s", &[]);
    let ranks = ranks_of(&snap, "twin");
    // Which pids are missing, and whether they still ran with their marker
    // after the snapshot (a dead rank, or one discovery missed).
    let missing: Vec<(u32, bool)> = a
        .iter()
        .chain(&b)
        .filter(|p| !ranks.iter().any(|r| r["pid"] == **p))
        .map(|p| {
            let env = std::fs::read(format!("/proc/{p}/environ")).unwrap_or_default();
            (*p, String::from_utf8_lossy(&env).contains("KITTY_WATCH=1"))
        })
        .collect();
    assert_eq!(
        ranks.len(),
        6,
        "launch a {a:?}, b {b:?}; missing (pid, alive and marked) {missing:?}: {snap:#}"
    );
    let id_of = |pid: u32| {
        ranks
            .iter()
            .find(|r| r["pid"] == pid)
            .map(|r| r["job_id"].as_str().unwrap_or("").to_string())
            .unwrap()
    };
    let ids_a: Vec<String> = a.iter().map(|p| id_of(*p)).collect();
    let ids_b: Vec<String> = b.iter().map(|p| id_of(*p)).collect();
    assert!(
        ids_a
            .iter()
            .all(|i| *i == ids_a[0] && i.starts_with("master:")),
        "{ids_a:?}"
    );
    assert!(ids_b.iter().all(|i| *i == ids_b[0]), "{ids_b:?}");
    assert_ne!(ids_a[0], ids_b[0], "two launches, one id");
}

#[test]
fn a_wrapper_that_inherits_the_marker_is_not_a_rank() {
    let _g = serial();
    let mut procs = Procs::default();
    let ports = free_ports(3);
    let mut wrappers = Vec::new();
    for rank in 0..3 {
        let inner = kitty_tui::demo::ring::rank_command(&kitty_bin(), rank, &ports, "wrapped");
        // `timeout 60 <rank>` with the rank's environment: timeout forks the
        // rank and waits; both carry KITTY_WATCH and RANK.
        let mut cmd = Command::new("timeout");
        cmd.arg("60")
            .arg(inner.get_program())
            .args(inner.get_args());
        for (k, v) in inner.get_envs() {
            if let Some(v) = v {
                cmd.env(k, v);
            }
        }
        let pid = procs.push(
            cmd.args(["--work", "10"])
                .process_group(0)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        wrappers.push(pid);
    }
    let ok = wait_until(20, || {
        let snap = snapshot("1s", &[]);
        (ranks_of(&snap, "wrapped").len() == 3).then_some(snap)
    });
    let snap = ok.expect("three ranks of the wrapped job");
    let ranks = ranks_of(&snap, "wrapped");
    for r in &ranks {
        let pid = r["pid"].as_u64().unwrap() as u32;
        assert!(
            !wrappers.contains(&pid),
            "the wrapper {pid} is listed as a rank"
        );
        assert_eq!(r["comm"], "kitty-tui", "{r}");
    }
    let mut seen: Vec<u64> = ranks.iter().map(|r| r["rank"].as_u64().unwrap()).collect();
    seen.sort();
    assert_eq!(seen, vec![0, 1, 2]);
}
