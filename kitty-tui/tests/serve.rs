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

/// Runs `promtool check metrics` on an exposition.
fn promtool_check_metrics(text: &str) -> std::process::Output {
    let mut check = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    check
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    check.wait_with_output().unwrap()
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
    start_ring(&mut procs, 3, "prom-ring", &|_| vec![]);
    let (addr, _) = start_serve(&mut procs);

    // promtool parses the exposition (exit 1 would be a format error) and its
    // only lint is the unit-abbreviation rule, which DESIGN's signal names
    // (`_ms_per_s`, `_us`, `_per_s`) break on purpose: they are the contract.
    let (_, body) = http_get(&addr, "/metrics", &[]).unwrap();
    let out = promtool_check_metrics(&body);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_ne!(
        out.status.code(),
        Some(1),
        "promtool cannot parse the exposition: {said}"
    );
    let other: Vec<&str> = said
        .lines()
        .filter(|l| {
            !l.trim().is_empty()
                && !l.ends_with("metric names should not contain abbreviated units")
        })
        .collect();
    assert!(
        other.is_empty(),
        "promtool lint problems beyond unit abbreviations: {other:#?}"
    );
    // Without the DESIGN names the exposition is fully clean.
    let clean: String = body
        .lines()
        .filter(|l| {
            !["_us", "_per_s", "_ms"].iter().any(|u| {
                l.split(['{', ' '])
                    .nth(if l.starts_with('#') { 2 } else { 0 })
                    .unwrap_or("")
                    .contains(u)
            })
        })
        .map(|l| format!("{l}\n"))
        .collect();
    let out = promtool_check_metrics(&clean);
    assert!(
        out.status.success(),
        "promtool on the rest: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("prometheus.yml");
    std::fs::write(
        &cfg,
        format!(
            "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\nscrape_configs:\n  - job_name: kitty\n    honor_labels: true\n    static_configs: [{{targets: ['{addr}']}}]\n"
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
    let series = wait_until(40, || {
        let v = query(r#"kitty_run_delay_ms_per_s{job="prom-ring"}"#);
        let n = v["data"]["result"].as_array().map_or(0, |a| a.len());
        (n == 3).then_some(v)
    })
    .expect("three per-rank kitty_run_delay_ms_per_s series in Prometheus");
    let mut ranks: Vec<String> = series["data"]["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["metric"]["rank"].as_str().unwrap().to_string())
        .collect();
    ranks.sort();
    assert_eq!(ranks, vec!["0", "1", "2"]);
    let q = r#"histogram_quantile(0.5, sum by (le) (rate(kitty_tcp_srtt_seconds_bucket{job="prom-ring"}[5s])))"#;
    let v = wait_until(20, || {
        let v = query(q);
        let val = v["data"]["result"][0]["value"][1]
            .as_str()?
            .parse::<f64>()
            .ok()?;
        val.is_finite().then_some(val)
    })
    .expect("histogram_quantile over the RTT histogram returns a number");
    assert!(v > 0.0 && v < 1.0, "median smoothed RTT on loopback: {v} s");
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
    let (_, text) = http_get(&addr, "/metrics", &[]).unwrap();
    assert!(
        !text.contains("# EOF") && text.contains("# TYPE kitty_run_delay_seconds_total counter")
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

#[test]
fn example_alert_rules_are_valid() {
    if !have("promtool") {
        skip("example_alert_rules: promtool is not installed (.ci/run installs it)");
        return;
    }
    let rules = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../assets/kitty-alerts.yml");
    let out = Command::new("promtool")
        .args(["check", "rules"])
        .arg(&rules)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
