//! `kitty-tui serve` against a real Prometheus server and promtool, and under
//! bad clients: unknown paths, huge headers, slowloris, 200 concurrent scrapes.

mod support;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::*;

fn start_serve(procs: &mut Procs) -> (String, u32) {
    let port = free_ports(1)[0];
    let addr = format!("127.0.0.1:{port}");
    let pid = procs.push(
        Command::new(kitty_bin())
            .args(["serve", "--listen", &addr])
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let ok = wait_until(15, || {
        http_get(&addr, "/metrics", &[])
            .ok()
            .filter(|(s, _)| *s == 200)
    });
    assert!(ok.is_some(), "serve did not come up on {addr}");
    (addr, pid)
}

fn have(bin: &str) -> bool {
    Command::new(bin).arg("--version").output().is_ok()
}

#[test]
fn real_prometheus_scrapes_ranks_and_histograms() {
    let _g = serial();
    if !have("prometheus") || !have("promtool") {
        skip("real_prometheus: the prometheus package is not installed (.ci/run installs it)");
        return;
    }
    let mut procs = Procs::default();
    let pids = start_ring(&mut procs, 3, "prom-ring", &|_| vec![]);
    // Every source up: the NVML stub gives the GPU families too.
    let dir = tempfile::tempdir().unwrap();
    let lib = build_stub_nvml(dir.path());
    let nvml = dir.path().join("nvml.cfg");
    let mut cfg_text = String::from("count=3\n");
    for (i, pid) in pids.iter().enumerate() {
        cfg_text.push_str(&format!("gpu.{i}.pids={pid}:{}\n", 1u64 << 30));
    }
    std::fs::write(&nvml, cfg_text).unwrap();
    let port = free_ports(1)[0];
    let addr = format!("127.0.0.1:{port}");
    procs.push(
        Command::new(kitty_bin())
            .args(["serve", "--listen", &addr, "--nvml-lib"])
            .arg(&lib)
            .env("KITTY_NVML_STUB", &nvml)
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let body = wait_until(20, || {
        let (s, b) = http_get(&addr, "/metrics", &[]).ok()?;
        (s == 200 && b.contains("kitty_gpu_up") && b.contains("kitty_rank_tcp_rtt_seconds_bucket"))
            .then_some(b)
    })
    .expect("serve up with GPU and probe families");

    // promtool: exit 0 and not one lint.
    let out = promtool_check_metrics(&body);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && said.trim().is_empty(),
        "promtool: {said}"
    );
    for name in [
        "kitty_rank_run_delay_seconds_total",
        "kitty_rank_cpu_seconds_total",
        "kitty_rank_tcp_retransmits_total",
        "kitty_node_cpu_utilization_ratio",
        "kitty_gpu_sm_clock_hertz",
        "kitty_source_up",
    ] {
        assert!(body.contains(&format!("\n{name}{{")), "{name} missing");
    }
    assert!(
        !body.contains(" job=") && !body.contains("{job="),
        "no `job` label of kitty's own"
    );
    assert!(body.contains("UUID=\"GPU-"), "GPU UUIDs on the series");

    let cfg = dir.path().join("prometheus.yml");
    std::fs::write(
        &cfg,
        format!(
            "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\nscrape_configs:\n  - job_name: kitty\n    static_configs: [{{targets: ['{addr}']}}]\n"
        ),
    )
    .unwrap();
    let prom_addr = format!("127.0.0.1:{}", free_ports(1)[0]);
    procs.push(
        Command::new("prometheus")
            .arg(format!("--config.file={}", cfg.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={prom_addr}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let query = |q: &str| -> serde_json::Value {
        // Prometheus takes a moment to start: a refused connection is "not yet".
        match http_get(
            &prom_addr,
            &format!("/api/v1/query?query={}", urlencode(q)),
            &[],
        ) {
            Ok((_, body)) => serde_json::from_str(&body).unwrap_or(serde_json::Value::Null),
            Err(_) => serde_json::Value::Null,
        }
    };
    // The scrape job keeps its own `job` label; the training job is apart.
    let series = wait_until(40, || {
        let v = query(r#"rate(kitty_rank_run_delay_seconds_total{training_job="prom-ring", job="kitty"}[5s])"#);
        let n = v["data"]["result"].as_array().map_or(0, |a| a.len());
        (n == 3).then_some(v)
    })
    .expect("three per-rank run-delay rates in Prometheus");
    let mut ranks: Vec<String> = series["data"]["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["metric"]["rank"].as_str().unwrap().to_string())
        .collect();
    ranks.sort();
    assert_eq!(ranks, vec!["0", "1", "2"]);
    // The probes' RTT buckets and tcp_info's smoothed RTT, as histograms.
    for family in ["kitty_rank_tcp_rtt_seconds", "kitty_rank_tcp_srtt_seconds"] {
        let q = format!(
            r#"histogram_quantile(0.5, sum by (le) (rate({family}_bucket{{training_job="prom-ring"}}[5s])))"#
        );
        let v = wait_until(20, || {
            let v = query(&q);
            let val = v["data"]["result"][0]["value"][1]
                .as_str()?
                .parse::<f64>()
                .ok()?;
            val.is_finite().then_some(val)
        })
        .unwrap_or_else(|| panic!("histogram_quantile over {family} returns a number"));
        assert!(v > 0.0 && v < 1.0, "median {family} on loopback: {v} s");
    }
}

#[test]
fn bad_clients_do_not_stop_sampling_or_scrapes() {
    let _g = serial();
    let mut procs = Procs::default();
    start_ring(&mut procs, 3, "serve-bad", &|_| vec![]);
    let (addr, pid) = start_serve(&mut procs);
    let frames = |addr: &str| -> u64 {
        let (_, b) = http_get(addr, "/healthz", &[]).unwrap();
        b.split("frames=")
            .nth(1)
            .and_then(|x| x.trim().parse().ok())
            .unwrap_or(0)
    };

    assert_eq!(http_get(&addr, "/nope", &[]).unwrap().0, 404);
    let (status, body) = http_get(&addr, "/api/snapshot", &[]).unwrap();
    assert_eq!(status, 200);
    let snap: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert!(snap["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["job"] == "serve-bad"));
    let (_, om) = http_get(
        &addr,
        "/metrics",
        &[("Accept", "application/openmetrics-text; version=1.0.0")],
    )
    .unwrap();
    assert!(om.trim_end().ends_with("# EOF"), "OpenMetrics on request");
    // Counters appear once their rate has been computed (the second frame).
    let text = wait_until(10, || {
        let (_, t) = http_get(&addr, "/metrics", &[]).ok()?;
        t.contains("kitty_rank_run_delay_seconds_total{")
            .then_some(t)
    })
    .expect("the run-delay counter");
    assert!(
        !text.contains("# EOF")
            && text.contains("# TYPE kitty_rank_run_delay_seconds_total counter")
    );

    // Huge headers are refused without harm.
    let big = "x".repeat(200_000);
    let huge = http_get(&addr, "/metrics", &[("X-Big", &big)]);
    assert!(
        huge.map(|(s, _)| s != 200).unwrap_or(true),
        "a 200 KB header is not served"
    );

    // Slowloris: 50 connections that never finish their headers.
    let mut slow = Vec::new();
    for _ in 0..50 {
        let mut s = std::net::TcpStream::connect(&addr).unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
            .unwrap();
        slow.push(s);
    }
    let before = frames(&addr);
    let t = Instant::now();
    for _ in 0..10 {
        assert_eq!(http_get(&addr, "/metrics", &[]).unwrap().0, 200);
    }
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "scrapes slowed by slow clients: {:?}",
        t.elapsed()
    );
    let went_on = wait_until(10, || (frames(&addr) >= before + 2).then_some(()));
    assert!(went_on.is_some(), "sampling continued");
    drop(slow);

    // 200 concurrent scrapes are all served; memory stays bounded.
    let rss_before = rss_kib(pid);
    let handles: Vec<_> = (0..200)
        .map(|_| {
            let a = addr.clone();
            std::thread::spawn(move || http_get(&a, "/metrics", &[]).map(|(s, b)| (s, b.len())))
        })
        .collect();
    let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let ok = results
        .iter()
        .filter(|r| matches!(r, Ok((200, n)) if *n > 1000))
        .count();
    let rss_after = rss_kib(pid);
    eprintln!("200 concurrent scrapes: {ok} ok; serve RSS {rss_before} KiB -> {rss_after} KiB");
    assert_eq!(ok, 200);
    assert!(
        rss_after < rss_before + 64 * 1024,
        "RSS grew from {rss_before} to {rss_after} KiB"
    );
    assert_eq!(http_get(&addr, "/healthz", &[]).unwrap().0, 200);
}

/// A frame is rendered when a scrape first asks, and every scrape of that
/// frame gets the same text; the next frame gives new text. SIGINT, SIGTERM and
/// SIGHUP each end the server cleanly (the accept loop waits for a client
/// or a signal, with no timer).
#[test]
fn scrapes_of_one_frame_agree_and_each_signal_stops_the_server() {
    let _g = serial();
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        let port = free_ports(1)[0];
        let addr = format!("127.0.0.1:{port}");
        let mut child = Command::new(kitty_bin())
            .args([
                "serve",
                "--listen",
                &addr,
                "--interval",
                "2s",
                "--no-ebpf",
                "--no-gpu",
            ])
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let frames = |addr: &str| -> Option<u64> {
            let (_, b) = http_get(addr, "/healthz", &[]).ok()?;
            b.split("frames=").nth(1)?.trim().parse().ok()
        };
        // Scraped twice within one frame (the next is 2 s away).
        let (n, a, b) = wait_until(20, || {
            let n = frames(&addr).filter(|n| *n >= 2)?;
            let (_, a) = http_get(&addr, "/metrics", &[]).ok()?;
            let (_, b) = http_get(&addr, "/metrics", &[]).ok()?;
            (frames(&addr) == Some(n)).then_some((n, a, b))
        })
        .expect("serve up, two scrapes within one frame");
        assert_eq!(a, b, "two scrapes of frame {n}");
        let stamp = |t: &str| {
            t.lines()
                .find(|l| l.starts_with("kitty_last_frame_timestamp_seconds{"))
                .map(str::to_owned)
        };
        let later = wait_until(10, || {
            (frames(&addr)? > n).then_some(())?;
            http_get(&addr, "/metrics", &[]).ok().map(|(_, t)| t)
        })
        .expect("a later frame");
        assert!(stamp(&a).is_some());
        assert_ne!(stamp(&a), stamp(&later), "the next frame renders anew");

        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, sig) };
        let ended = wait_until(10, || child.try_wait().ok().flatten());
        let Some(st) = ended else {
            let _ = child.kill();
            panic!("signal {sig}: serve still running after 10 s");
        };
        assert!(st.success(), "signal {sig}: serve exited with {st}");
    }
}

#[test]
fn alert_and_recording_rules_are_valid_and_their_unit_tests_pass() {
    if !have("promtool") {
        skip("rules: promtool is not installed (.ci/run installs it)");
        return;
    }
    let assets = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../assets");
    for args in [
        vec![
            "check",
            "rules",
            "kitty-alerts.yml",
            "kitty-recording-rules.yml",
        ],
        vec!["test", "rules", "tests/kitty-alerts.test.yml"],
    ] {
        let out = Command::new("promtool")
            .args(&args)
            .current_dir(&assets)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "promtool {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn the_manifests_validate_against_their_schemas() {
    if !have("python3") || !have("node") {
        skip("manifests: python3 and node validate them (.ci/run has both)");
        return;
    }
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/validate-manifests.sh");
    let out = Command::new(script).output().unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
