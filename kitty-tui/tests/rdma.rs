//! Issue 15 on real processes: RDMA ports from a sysfs tree in the
//! kernel's documented layout (this machine has no HCA: the tree stands in
//! for the hardware, kitty reads it through `--sys-root` exactly as /sys),
//! ranks mapped to ports by their open uverbs fds and NCCL_IB_HCA; NCCL
//! Inspector records written by the ranks' "plugin" (the test); a RAS
//! server answering NCCL's client protocol.

mod support;
use kitty_core::model::{EventKind, Frame, Sig};
use kitty_core::sources::rdma::standin::{Kind, Tree};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use support::*;

/// A sleeping "rank" with `env`, marked for this test only.
fn rank(procs: &mut Procs, mark: &str, i: u32, env: &[(&str, String)], script: &str) -> u32 {
    let mut c = Command::new("sh");
    c.args(["-c", script])
        .env("KITTY_RDMA_TEST", mark)
        .env("RANK", i.to_string())
        .env("WORLD_SIZE", "4")
        .env("JOB_NAME", mark)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    procs.push(c.spawn().expect("start a rank"))
}

fn verdict_on(f: &Frame, rank: u32, sig: Sig) -> Option<String> {
    f.verdicts
        .iter()
        .find(|v| v.rank == Some(rank) && v.signal == sig)
        .map(|v| v.message.to_string())
}

/// Advances counters until dropped.
struct Bumper(Arc<AtomicBool>, Option<std::thread::JoinHandle<()>>);

impl Bumper {
    fn start(f: impl Fn() + Send + 'static) -> Bumper {
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let h = std::thread::spawn(move || {
            while !s2.load(Ordering::Relaxed) {
                f();
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        Bumper(stop, Some(h))
    }
}

impl Drop for Bumper {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
        if let Some(h) = self.1.take() {
            let _ = h.join();
        }
    }
}

#[test]
fn a_congested_port_and_degraded_ports_flag_their_ranks() {
    let _g = serial();
    let sys = tempfile::tempdir().unwrap();
    let tree = Tree::new(sys.path());
    for i in 0..4 {
        tree.add_device(
            &format!("mlx5_{i}"),
            Kind::Mlx5Roce,
            1,
            "400 Gb/sec (4X NDR)",
            0,
        )
        .unwrap();
    }
    // Rank 3 opens its device (as libibverbs does); the others say theirs
    // in NCCL_IB_HCA.
    tree.add_uverbs(3, "mlx5_3").unwrap();
    let dev = tempfile::tempdir().unwrap();
    let uverbs = dev.path().join("infiniband/uverbs3");
    std::fs::create_dir_all(uverbs.parent().unwrap()).unwrap();
    std::fs::write(&uverbs, "").unwrap();
    let mut procs = Procs::default();
    let mark = "rdma-ports";
    let pids: Vec<u32> = (0..4)
        .map(|i| {
            if i == 3 {
                let script = format!("exec 9<'{}'; exec sleep 600", uverbs.display());
                rank(&mut procs, mark, i, &[], &script)
            } else {
                let hca = vec![("NCCL_IB_HCA", format!("=mlx5_{i}:1"))];
                rank(&mut procs, mark, i, &hca, "exec sleep 600")
            }
        })
        .collect();
    wait_exec(&pids, "sleep");
    let t2 = Tree::new(sys.path());
    let _bump = Bumper::start(move || {
        for i in 0..4 {
            let d = format!("mlx5_{i}");
            let hot = i == 2;
            let _ = t2.bump(
                &d,
                1,
                "counters/port_xmit_wait",
                if hot { 400_000 } else { 500 },
            );
            let _ = t2.bump(&d, 1, "counters/port_xmit_data", 25_000_000);
            let _ = t2.bump(&d, 1, "hw_counters/np_cnp_sent", if hot { 80 } else { 0 });
        }
    });
    let root = sys.path().to_str().unwrap();
    let rec = LiveRecord::start(&[
        "--no-ebpf",
        "--no-gpu",
        "--sys-root",
        root,
        "--watch-env",
        &format!("KITTY_RDMA_TEST={mark}"),
        "--interval",
        "250ms",
    ]);
    let congested = rec.wait_for(30, |fs| {
        let f = fs.last()?;
        Some((
            verdict_on(f, 2, Sig::RdmaXmitWaitPerS)?,
            verdict_on(f, 2, Sig::RdmaCnpPerS)?,
            f.clone(),
        ))
    });
    let (wait, cnp, f) = congested.expect("rank 2's congested port is flagged");
    assert!(wait.starts_with("rank 2: RDMA xmit wait"), "{wait}");
    assert!(cnp.contains("RoCE CNPs"), "{cnp}");
    assert!(
        f.verdicts.iter().all(|v| v.rank == Some(2)),
        "the quiet ports' ranks are not flagged: {:#?}",
        f.verdicts
    );
    let ports = |r: u32| -> Vec<String> {
        f.ranks
            .iter()
            .find(|x| x.labels.rank == Some(r))
            .map(|x| x.nics.iter().map(|n| n.to_string()).collect())
            .unwrap_or_default()
    };
    let all: Vec<_> = f
        .ranks
        .iter()
        .map(|r| (r.labels.rank, r.key.pid, r.nics.clone()))
        .collect();
    assert_eq!(ports(0), ["mlx5_0/1"], "from NCCL_IB_HCA: {all:?}");
    assert_eq!(ports(3), ["mlx5_3/1"], "from the open uverbs fd");
    let hot = f.nics.iter().find(|n| n.id() == "mlx5_2/1").unwrap();
    let w = hot.signals.get(Sig::RdmaXmitWaitPerS).unwrap();
    assert!((1e6..1e7).contains(&w), "about 4M/s: {w}");
    assert_eq!(
        hot.signals.get(Sig::RdmaPausePerS),
        None,
        "a stand-in tree has no netdev: pause counters are absent, not 0"
    );

    // Rank 1's port goes down, rank 0's trains at a quarter of the rate.
    tree.set("mlx5_1", 1, "state", "1: DOWN").unwrap();
    tree.set("mlx5_0", 1, "rate", "100 Gb/sec (4X EDR)")
        .unwrap();
    let degraded = rec.wait_for(20, |fs| {
        let f = fs.last()?;
        Some((
            verdict_on(f, 1, Sig::RdmaPortDegraded)?,
            verdict_on(f, 0, Sig::RdmaPortDegraded)?,
        ))
    });
    assert!(degraded.is_some(), "both degraded ports flag their ranks");
    let frames = rec.stop();
    let events = events_of(&frames, EventKind::PortDegraded);
    assert!(
        events.iter().any(|e| e == "RDMA port mlx5_1/1: state DOWN"),
        "{events:?}"
    );
    assert!(
        events
            .iter()
            .any(|e| e.contains("mlx5_0/1: rate 100 Gb/s where the node's other ports run 400")),
        "{events:?}"
    );
    // The recording carries the ports and their raw counters.
    let last = frames.last().unwrap();
    assert_eq!(last.nics.len(), 4);
    assert!(last.nics[0]
        .counters
        .keys()
        .any(|k| k.as_str() == "port_xmit_wait"));
}

/// One Inspector record, as the plugin writes it (format v4.0).
fn inspector_line(rank: u32, pid: u32, seq: u64, exec_us: u64) -> String {
    format!(
        r#"{{"header":{{"id":"0x7f8c496ae9f661","rank":{rank},"n_ranks":4,"nnodes":1}},"metadata":{{"inspector_output_format_version":"v4.0","git_rev":"","rec_mechanism":"nccl_profiler_interface","dump_timestamp_us":1748030377748202,"hostname":"node-a","pid":{pid}}},"coll_perf":{{"coll":"AllReduce","coll_sn":{seq},"coll_msg_size_bytes":1073741824,"coll_exec_time_us":{exec_us},"coll_timing_source":"kernel_gpu","coll_algobw_gbs":17.2,"coll_busbw_gbs":30.1}}}}"#
    )
}

#[test]
fn inspector_dumps_give_the_late_arrival_verdict() {
    let _g = serial();
    let dump = tempfile::tempdir().unwrap();
    let dir = dump.path().to_str().unwrap().to_string();
    let mut procs = Procs::default();
    let mark = "inspector-job";
    let env = vec![
        ("NCCL_INSPECTOR_ENABLE", "1".to_string()),
        ("NCCL_INSPECTOR_DUMP_DIR", dir.clone()),
    ];
    let pids: Vec<u32> = (0..4)
        .map(|i| rank(&mut procs, mark, i, &env, "exec sleep 600"))
        .collect();
    wait_exec(&pids, "sleep");
    // Each rank's plugin appends its collectives; rank 1 arrives 40 ms
    // after the others, so theirs take 40 ms longer.
    let files: Vec<_> = pids
        .iter()
        .map(|p| dump.path().join(format!("node-a-pid{p}.log")))
        .collect();
    let pids2 = pids.clone();
    let seq = std::sync::atomic::AtomicU64::new(1000);
    let _w = Bumper::start(move || {
        let s = seq.fetch_add(1, Ordering::Relaxed);
        for (i, (p, f)) in pids2.iter().zip(&files).enumerate() {
            let exec = if i == 1 {
                20_000
            } else {
                60_000 + i as u64 * 300
            };
            let mut h = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(f)
                .unwrap();
            writeln!(h, "{}", inspector_line(i as u32, *p, s, exec)).unwrap();
        }
    });
    let snap = snapshot(
        "5s",
        &[
            "--no-ebpf",
            "--no-gpu",
            "--watch-env",
            &format!("KITTY_RDMA_TEST={mark}"),
            "--interval",
            "250ms",
        ],
    );
    let verdicts = snap["verdicts"].as_array().unwrap();
    let late: Vec<&serde_json::Value> = verdicts
        .iter()
        .filter(|v| v["signal"] == "nccl_late_ms")
        .collect();
    assert_eq!(late.len(), 1, "{verdicts:#?}");
    assert_eq!(late[0]["rank"], 1);
    let m = late[0]["message"].as_str().unwrap();
    assert!(m.starts_with("rank 1 arrives 40"), "{m}");
    assert!(m.contains(" ms late to AllReduce (seq 1"), "{m}");
    let ranks = ranks_of(&snap, mark);
    let r1 = ranks.iter().find(|r| r["rank"] == 1).unwrap();
    let c = &r1["collectives"][0];
    assert_eq!(c["coll"], "AllReduce");
    assert_eq!(c["exec_us"], 20_000);
    assert!(
        (39_000.0..41_000.0).contains(&c["late_us"].as_f64().unwrap()),
        "{c}"
    );
    assert!(signal(r1, "nccl_busbw_bytes_per_s") > 1e10);
    assert_eq!(snap["sources"]["nccl.inspector"]["status"], "ok");
}

/// A RAS server speaking NCCL's client protocol; `report` is what STATUS returns.
fn ras_server(report: impl Fn() -> String + Send + 'static) -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            let mut w = s.try_clone().unwrap();
            let mut r = BufReader::new(s);
            loop {
                let mut line = String::new();
                if r.read_line(&mut line).unwrap_or(0) == 0 {
                    break;
                }
                let cmd = line.trim();
                if cmd.starts_with("CLIENT PROTOCOL") {
                    let _ = w.write_all(b"SERVER PROTOCOL 2\n");
                } else if cmd.starts_with("SET FORMAT") || cmd.starts_with("TIMEOUT") {
                    let _ = w.write_all(b"OK\n");
                } else if cmd.ends_with("STATUS") {
                    let _ = w.write_all(report().as_bytes());
                    break;
                }
            }
        }
    });
    port
}

#[test]
fn a_ras_report_of_a_missing_rank_is_an_event_and_a_verdict() {
    let _g = serial();
    let mut procs = Procs::default();
    let mark = "ras-job";
    let port = std::sync::OnceLock::<Vec<u32>>::new();
    let pids_cell = Arc::new(port);
    let cell = pids_cell.clone();
    let ras_port = ras_server(move || {
        let pids = cell.get().cloned().unwrap_or_default();
        let entry = |r: usize, n: u64| {
            format!(
                r#"{{"rank":{r},"host":"127.0.0.1","pid":{},"cuda_dev":{r},"nvml_dev":{r},"status":{{"init_state":0,"async_error":0,"finalize_called":false,"destroy_flag":false,"abort_flag":false}},"collective_counts":{{"AllReduce":{n}}}}}"#,
                pids[r]
            )
        };
        format!(
            r#"{{"nccl_version":"2.28.9","communicators_count":1,"communicators":[{{"hash":"0xa1349768e9517ed7","size":4,"ranks_count":3,"missing_ranks_count":1,"ranks":[{},{},{}],"missing_ranks":[{{"rank":3,"host":"127.0.0.1","pid":{},"cuda_dev":3,"nvml_dev":3,"status":{{"unresponsive":true,"considered_dead":false}}}}]}}],"ras":{{"collection_time_sec":0.0,"timeouts_count":0}}}}"#,
            entry(0, 1200),
            entry(1, 1200),
            entry(2, 1200),
            pids[3]
        )
    });
    let env = vec![("NCCL_RAS_ADDR", format!("127.0.0.1:{ras_port}"))];
    let pids: Vec<u32> = (0..4)
        .map(|i| rank(&mut procs, mark, i, &env, "exec sleep 600"))
        .collect();
    wait_exec(&pids, "sleep");
    pids_cell.set(pids.clone()).unwrap();
    let snap = snapshot(
        "4s",
        &[
            "--no-ebpf",
            "--no-gpu",
            "--watch-env",
            &format!("KITTY_RDMA_TEST={mark}"),
            "--interval",
            "250ms",
        ],
    );
    assert_eq!(
        snap["sources"]["nccl.ras"]["status"], "ok",
        "{:#}",
        snap["sources"]
    );
    let events: Vec<&str> = snap["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "nccl_ras")
        .map(|e| e["message"].as_str().unwrap())
        .collect();
    assert_eq!(
        events,
        [format!(
            "NCCL RAS: rank 3 of communicator 0xa1349768e9517ed7 (pid {} on 127.0.0.1) is unresponsive",
            pids[3]
        )]
    );
    let v: Vec<&serde_json::Value> = snap["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["signal"] == "nccl_ras_missing")
        .collect();
    assert_eq!(v.len(), 1, "{:#}", snap["verdicts"]);
    assert_eq!(v[0]["rank"], 3);
    assert_eq!(v[0]["severity"], "critical");
}

/// A rank with PyTorch's Flight Recorder on: it reads its pipe and, for
/// every request, dumps the documented layout (a pickle, protocol 2 as
/// torch's pickler writes) to its dump file. `done` is its last completed
/// collective.
const FR_RANK: &str = r#"
# fr-rank: PyTorch's pipe-triggered Flight Recorder dump, as ProcessGroupNCCL does it
import os, pickle
rank = int(os.environ["RANK"])
pipe = os.environ["TORCH_NCCL_DEBUG_INFO_PIPE_FILE"] + str(rank) + ".pipe"
dump = os.environ["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"] + str(rank)
done = int(os.environ["FR_DONE"])
os.mkfifo(pipe)
while True:
    with open(pipe) as p:
        p.read()
    d = {"version": "2.4",
         "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2]"}},
         "pg_status": {"0": {"last_enqueued_collective": 1205, "last_started_collective": done + 1,
                             "last_completed_collective": done}},
         "entries": [{"record_id": s, "pg_id": 0, "process_group": ("0", "default_pg"),
                      "collective_seq_id": s, "p2p_seq_id": 0, "op_id": s,
                      "profiling_name": "nccl:all_reduce", "time_created_ns": 1,
                      "input_sizes": [[1024]], "output_sizes": [[1024]],
                      "state": "completed" if s <= done else "started",
                      "duration_ms": 3.5 if s <= done else None,
                      "is_p2p": False, "retired": s <= done, "timeout_ms": 600000, "frames": []}
                     for s in range(done - 6, done + 2)]}
    with open(dump + ".tmp", "wb") as f:
        f.write(pickle.dumps(d, 2))
    os.replace(dump + ".tmp", dump)
"#;

#[test]
fn flight_recorder_dumps_say_which_rank_is_behind() {
    let _g = serial();
    if Command::new("python3").arg("-V").output().is_err() {
        skip("Flight Recorder: the test ranks are python3 scripts");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    let mut procs = Procs::default();
    let mark = "fr-job";
    let pids: Vec<u32> = (0..3u32)
        .map(|i| {
            let mut c = Command::new("python3");
            c.args(["-c", FR_RANK])
                .env("KITTY_RDMA_TEST", mark)
                .env("RANK", i.to_string())
                .env("WORLD_SIZE", "3")
                .env("JOB_NAME", mark)
                .env("TORCH_NCCL_DEBUG_INFO_PIPE_FILE", format!("{d}/fr_"))
                .env("TORCH_NCCL_DEBUG_INFO_TEMP_FILE", format!("{d}/trace_"))
                .env("TORCH_NCCL_TRACE_BUFFER_SIZE", "2000")
                .env("FR_DONE", if i == 2 { "1200" } else { "1204" })
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            procs.push(c.spawn().unwrap())
        })
        .collect();
    wait_exec(&pids, "fr-rank");
    let pipes = (0..3).map(|i| dir.path().join(format!("fr_{i}.pipe")));
    let ready = wait_until(20, || pipes.clone().all(|p| p.exists()).then_some(()));
    assert!(ready.is_some(), "the ranks made their pipes");
    // The sampler finds each rank's pipe and dump under its root.
    let rec = LiveRecord::start(&[
        "--no-ebpf",
        "--no-gpu",
        "--watch-env",
        &format!("KITTY_RDMA_TEST={mark}"),
    ]);
    let paths = rec
        .wait_for(20, |fs| {
            let f = fs.last()?;
            let p: Vec<_> = f
                .ranks
                .iter()
                .filter_map(|r| r.flight_recorder.clone())
                .collect();
            (p.len() == 3).then_some(p)
        })
        .expect("three ranks with Flight Recorder paths");
    drop(rec);
    assert!(
        paths[0].pipe.ends_with(&format!("{d}/fr_0.pipe")) && paths[0].pipe.starts_with("/proc/"),
        "{:?}",
        paths[0]
    );
    // Each dump is asked for through the rank's pipe and read back.
    let dumps: Vec<_> = paths
        .iter()
        .map(|p| kitty_core::sources::flight_recorder::dump(p, Duration::from_secs(10)).unwrap())
        .collect();
    assert_eq!(dumps[2].pg_status[0].last_completed, 1200);
    assert_eq!(dumps[0].entries.last().unwrap().state, "started");
    let ranked: Vec<_> = (0..3).map(|i| (Some(i as u32), &dumps[i])).collect();
    assert_eq!(
        kitty_core::sources::flight_recorder::behind(&ranked),
        ["rank 2 is behind in process group 0: completed 1200, its peers up to 1204; nccl:all_reduce 1201 started"]
    );
    // The same from the TUI: F on a rank of the job.
    let cmd = format!(
        "{} --no-ebpf --no-gpu --watch-env KITTY_RDMA_TEST={mark}",
        kitty_bin().display()
    );
    let Some(t) = Tmux::start(&cmd, 160, 45) else {
        return;
    };
    t.wait_for(&|s| s.contains("ranks (3)"), 20);
    t.keys(&["F"]);
    let screen = t.wait_for(&|s| s.contains("is behind in process group"), 20);
    assert!(
        screen
            .contains("rank 2 is behind in process group 0: completed 1200, its peers up to 1204"),
        "{screen}"
    );
    assert!(
        screen.contains("flight recorder (F asks again)"),
        "{screen}"
    );
    t.keys(&["q"]);
}
