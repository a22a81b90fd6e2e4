//! GPU telemetry against a stub libnvidia-ml.so.1 built by the test (this
//! machine has no GPU): throttled, XID and lost GPUs, rank -> GPU mapping,
//! verdicts, a hung NVML call, and `doctor` without NVML.

mod support;
use std::process::Command;
use support::*;

fn snapshot_with(
    lib: &std::path::Path,
    cfg: &std::path::Path,
    duration: &str,
) -> serde_json::Value {
    let out = run_ok(
        Command::new(kitty_bin())
            .args(["snapshot", "--json", "--duration", duration, "--nvml-lib"])
            .arg(lib)
            .env("KITTY_NVML_STUB", cfg),
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn stub_gpus_join_the_rank_comparison() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let lib = build_stub_nvml(dir.path());
    let mut procs = Procs::default();
    let pids = start_ring(&mut procs, 4, "gpu-job", &|_| vec![]);
    let cfg = dir.path().join("nvml.cfg");
    // Rank i runs on GPU i. GPU 2: HW slowdown at low clocks. GPU 1: XID 79.
    // GPU 3 stays healthy here (the lost-GPU case is below).
    let mut text = String::from(
        "count=4\ngpu.2.throttle=8\ngpu.2.sm_clock=1100\nxid.seq=1\nxid.gpu=1\nxid.code=79\n",
    );
    // NVML sampled every rank's process but rank 3's (it did not run since
    // the last read: 0, not its old value).
    for (i, pid) in pids.iter().enumerate() {
        text.push_str(&format!("gpu.{i}.pids={pid}:{}\n", (i as u64 + 1) << 30));
        let sampled = if i == 3 { 3999999 } else { *pid };
        text.push_str(&format!("gpu.{i}.proc_util={sampled}:{}\n", 50 + i));
    }
    // GPU 0 has 4 active NVLinks with CRC errors on one.
    text.push_str(
        "gpu.0.nvlinks=4\ngpu.0.nvlink_crc=7\ngpu.0.nvlink_tx_kib=1000\ngpu.0.nvlink_rx_kib=2000\n",
    );
    // GPUs 0, 1 and 3 answer GPM (Hopper); GPU 2 does not.
    for i in [0, 1, 3] {
        text.push_str(&format!(
            "gpu.{i}.gpm=1\ngpu.{i}.sm_active=81\ngpu.{i}.sm_occupancy=40\ngpu.{i}.tensor_active=62\ngpu.{i}.dram_bw=33\n"
        ));
    }
    std::fs::write(&cfg, &text).unwrap();
    let snap = snapshot_with(&lib, &cfg, "4s");

    assert_eq!(
        snap["sources"]["nvml"]["status"], "ok",
        "{:#}",
        snap["sources"]
    );
    let gpus = snap["gpus"].as_array().unwrap();
    assert_eq!(gpus.len(), 4);
    assert_eq!(gpus[2]["throttle"], serde_json::json!(["hw_slowdown"]));
    assert_eq!(gpus[2]["signals"]["sm_clock_mhz"], 1100.0);
    assert_eq!(gpus[1]["xid_recent"], 1);
    assert_eq!(gpus[1]["xid_last"], serde_json::json!([79]));
    assert_eq!(gpus[0]["signals"]["power_w"], 600.0);
    assert_eq!(gpus[0]["processes"][0]["pid"], pids[0]);
    assert_eq!(gpus[0]["signals"]["nvlink_active_links"], 4.0);
    assert_eq!(gpus[0]["signals"]["nvlink_crc_errors"], 7.0);
    assert!(
        gpus[1]["signals"].get("nvlink_active_links").is_none(),
        "no NVLink: absent, not zero"
    );
    // GPM's metrics come from two polls' samples, and only the last is kept.
    for i in [0, 1, 3] {
        let s = &gpus[i]["signals"];
        assert_eq!(s["sm_active_pct"], 81.0, "GPU {i}: {s:#}");
        assert_eq!(s["sm_occupancy_pct"], 40.0);
        assert_eq!(s["tensor_active_pct"], 62.0);
        assert_eq!(s["dram_bw_util_pct"], 33.0);
    }
    assert!(
        gpus[2]["signals"].get("sm_active_pct").is_none(),
        "no GPM: absent, not zero"
    );
    let live = std::fs::read_to_string(format!("{}.gpm_live", cfg.display())).unwrap();
    let live: u32 = live.trim().parse().unwrap();
    assert!(
        live <= 2 * 3,
        "{live} GPM samples alive for 3 GPUs: at most this poll's and the last"
    );
    for (i, r) in ranks_of(&snap, "gpu-job").iter().enumerate() {
        let rank = r["rank"].as_u64().unwrap() as usize;
        assert_eq!(r["gpu"], rank, "rank -> GPU from NVML's process list ({i})");
        assert_eq!(
            r["signals"]["gpu_mem_used_bytes"],
            ((rank as u64 + 1) << 30) as f64
        );
        let sm_util = if rank == 3 { 0 } else { 50 + rank };
        assert_eq!(r["signals"]["gpu_proc_sm_util_pct"], sm_util as f64);
        let sm_active = r["signals"].get("gpu_sm_active_pct");
        assert_eq!(sm_active.is_some(), rank != 2, "rank {rank}: {sm_active:?}");
    }
    let verdicts = snap["verdicts"].as_array().unwrap();
    let has = |rank: u64, signal: &str| {
        verdicts
            .iter()
            .any(|v| v["rank"] == rank && v["signal"] == signal)
    };
    assert!(has(2, "gpu_throttle_slowing"), "{verdicts:#?}");
    assert!(has(2, "gpu_sm_clock_mhz"), "{verdicts:#?}");
    assert!(has(1, "gpu_xid_recent"), "{verdicts:#?}");
    assert!(
        !verdicts.iter().any(|v| v["rank"] == 0 || v["rank"] == 3),
        "healthy GPUs give no verdict: {verdicts:#?}"
    );

    // GPU 3 falls off the bus: it is marked lost, the others carry on.
    std::fs::write(&cfg, format!("{text}gpu.3.lost=1\n")).unwrap();
    let snap = snapshot_with(&lib, &cfg, "3s");
    let gpus = snap["gpus"].as_array().unwrap();
    assert_eq!(gpus[3]["status"], "lost");
    assert_eq!(gpus[0]["status"], "ok");
    assert_eq!(gpus[0]["signals"]["util_pct"], 95.0);
    assert_eq!(ranks_of(&snap, "gpu-job").len(), 4);
}

#[test]
fn hung_nvml_marks_gpus_stale_and_sampling_goes_on() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let lib = build_stub_nvml(dir.path());
    let mut procs = Procs::default();
    start_ring(&mut procs, 3, "gpu-hang", &|_| vec![]);
    let cfg = dir.path().join("nvml.cfg");
    std::fs::write(&cfg, "count=2\n").unwrap();
    // Let the first poll succeed, then hang every NVML call for a minute.
    let child = Command::new(kitty_bin())
        .args(["snapshot", "--json", "--duration", "7s", "--nvml-lib"])
        .arg(&lib)
        .env("KITTY_NVML_STUB", &cfg)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The stub notes each poll in this file: the first one has happened.
    let polled = std::path::PathBuf::from(format!("{}.polled", cfg.display()));
    let first = wait_until(15, || polled.exists().then_some(()));
    assert!(first.is_some(), "NVML was never polled");
    std::fs::write(&cfg, "count=2\ngpu.0.hang_ms=60000\ngpu.1.hang_ms=60000\n").unwrap();
    let out = child.wait_with_output().unwrap();
    let snap: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        snap["sources"]["nvml"]["status"], "degraded",
        "{:#}",
        snap["sources"]
    );
    assert!(
        snap["gpus"]
            .as_array()
            .unwrap()
            .iter()
            .all(|g| g["status"] == "stale"),
        "{:#}",
        snap["gpus"]
    );
    let ranks = ranks_of(&snap, "gpu-hang");
    assert_eq!(ranks.len(), 3, "procfs sampling went on");
    assert!(ranks.iter().all(|r| r["signals"]["cpu_pct"].is_number()));
}

#[test]
fn without_nvml_doctor_says_why_and_the_rest_works() {
    let out = Command::new(kitty_bin())
        .args(["doctor", "--json"])
        .env_remove("KITTY_NVML_LIB")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "a missing NVML is a warning, not a failure"
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let nvml = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "nvml")
        .unwrap()
        .clone();
    if std::path::Path::new("/dev/nvidiactl").exists() {
        return; // a GPU machine: NVML may well work here
    }
    assert_eq!(nvml["status"], "warn");
    assert_eq!(nvml["detail"], "libnvidia-ml.so.1 not found");
    let snap = snapshot("5s", &[]); // long enough for a poller to have gone stale
    assert_eq!(snap["sources"]["nvml"]["status"], "unavailable");
    assert_eq!(
        snap["sources"]["nvml"]["reason"],
        "libnvidia-ml.so.1 not found"
    );
    assert_eq!(snap["sources"]["procfs"]["status"], "ok");
}

#[test]
fn pids_from_another_pid_namespace_are_reported() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let lib = build_stub_nvml(dir.path());
    let cfg = dir.path().join("nvml.cfg");
    // NVML lists host pids that do not exist in this pid namespace.
    std::fs::write(&cfg, "count=1\ngpu.0.pids=3999999:1000,3999998:1000\n").unwrap();
    let snap = snapshot_with(&lib, &cfg, "2s");
    assert_eq!(snap["sources"]["nvml"]["status"], "degraded");
    let reason = snap["sources"]["nvml"]["reason"].as_str().unwrap();
    assert!(reason.contains("host PID namespace"), "{reason}");
    assert_eq!(snap["gpus"][0]["status"], "ok", "the GPU itself is fine");
}

/// The stub's count of a slow call on one GPU.
fn calls(cfg: &std::path::Path, name: &str) -> u64 {
    let text = std::fs::read_to_string(format!("{}.calls", cfg.display())).unwrap_or_default();
    text.lines()
        .filter_map(|l| l.split_once(' '))
        .find(|(k, _)| *k == name)
        .map_or(0, |(_, n)| n.parse().unwrap())
}

#[test]
fn slow_nvml_calls_are_made_once_or_rarely() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let lib = build_stub_nvml(dir.path());
    let cfg = dir.path().join("nvml.cfg");
    // GPU 0 answers the field values (energy, PCIe byte counters), GPU 1 only
    // GPM with PCIe rates, GPU 2 neither (the slow calls are its only way).
    std::fs::write(
        &cfg,
        "count=3\n\
         gpu.0.fields=1\ngpu.0.pcie_tx_step=4000000\ngpu.0.pcie_rx_step=2000000\ngpu.0.energy_mj=5000000\n\
         gpu.1.gpm=1\ngpu.1.pcie_tx_mib=3\ngpu.1.pcie_rx_mib=5\n\
         gpu.2.pcie_rx_kb=700\ngpu.2.pcie_tx_kb=900\n",
    )
    .unwrap();
    let snap = snapshot_with(&lib, &cfg, "4s");
    let gpus = snap["gpus"].as_array().unwrap();
    let sig = |i: usize, k: &str| gpus[i]["signals"][k].as_f64();
    // GPU 0: PCIe rates from the counters (4 MB and 2 MB a poll), energy from its field.
    let (tx, rx) = (sig(0, "pcie_tx_bytes_per_s"), sig(0, "pcie_rx_bytes_per_s"));
    assert!(
        tx.is_some_and(|v| v > 1e6) && rx.is_some_and(|v| v > 5e5),
        "{tx:?} {rx:?}"
    );
    assert!(
        (tx.unwrap() / rx.unwrap() - 2.0).abs() < 0.01,
        "{tx:?} {rx:?}"
    );
    assert_eq!(sig(0, "energy_j"), Some(5000.0));
    assert_eq!(calls(&cfg, "energy_field.0"), 1, "energy every 5 s");
    assert_eq!(
        calls(&cfg, "energy.0"),
        0,
        "energy came from the field value"
    );
    assert_eq!(calls(&cfg, "pcie_throughput.0"), 0);
    // GPU 1: PCIe from GPM (MiB/s).
    assert_eq!(sig(1, "pcie_tx_bytes_per_s"), Some(3.0 * 1048576.0));
    assert_eq!(sig(1, "pcie_rx_bytes_per_s"), Some(5.0 * 1048576.0));
    assert_eq!(calls(&cfg, "pcie_throughput.1"), 0);
    assert_eq!(
        calls(&cfg, "energy.1"),
        1,
        "no energy field: its own call, every 5 s"
    );
    assert!(sig(1, "energy_j").is_some(), "held between readings");
    // GPU 2: the throughput call, once in the 4 s (rx and tx), its reading held.
    assert_eq!(sig(2, "pcie_rx_bytes_per_s"), Some(700.0 * 1024.0));
    assert_eq!(sig(2, "pcie_tx_bytes_per_s"), Some(900.0 * 1024.0));
    let slow = calls(&cfg, "pcie_throughput.2");
    assert!((2..=4).contains(&slow), "{slow} throughput calls in 4 s");
    // Maximum clocks never change: asked once per GPU.
    for i in 0..3 {
        assert_eq!(calls(&cfg, &format!("max_clock.{i}")), 2, "GPU {i}");
        assert_eq!(sig(i, "sm_clock_max_mhz"), Some(1980.0));
    }
}
