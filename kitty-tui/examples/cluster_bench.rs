//! Benchmark of one cluster-view refresh against a real Prometheus holding
//! 64 nodes x 8 ranks of kitty series: a fleet of 64 small exporters (each
//! kitty's own exporter code over synthetic frames of one node, served on
//! loopback), Prometheus scraping them every second, then the cluster
//! sampler's refreshes timed. One rank (node-17 rank 3) and one whole node
//! (node-42) are slow, so the refresh also shows it finds them.
//!
//!   scripts/cluster-bench.sh            (or: cargo run --release --example cluster_bench)
//!
//! Prints queries per refresh (bounded: independent of nodes and ranks),
//! time per refresh (median and max of 20), and what was found.
#![allow(clippy::print_stdout)]

use kitty_core::analysis::{Analysis, AnalysisConfig};
use kitty_core::engine::FrameSource;
use kitty_core::model::*;
use kitty_core::sampler::cluster::{ClusterConfig, ClusterSampler};
use kitty_core::sinks::exporter::{Exporter, ExporterConfig};
use kitty_core::sources::prometheus::{PromConfig, Prometheus};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const NODES: usize = 64;
const RANKS_PER_NODE: usize = 8;

/// One node's frame at time `t` (s): 8 ranks of one job.
fn node_frame(node: usize, t: u64) -> Frame {
    let mut f = Frame {
        mono_ns: t * 1_000_000_000,
        wall_ns: kitty_core::model::time::wall_ns(),
        node: Text::new(&format!("node-{node:02}")),
        interval_ms: 1000,
        ..Default::default()
    };
    for local in 0..RANKS_PER_NODE {
        let rank = node * RANKS_PER_NODE + local;
        let slow = node == 42 || (node == 17 && local == 3);
        let mut s = Signals::new();
        s.set(Sig::CpuPct, 95.0);
        s.set(
            Sig::RunDelayMsPerS,
            if slow { 400.0 } else { 8.0 + (rank % 5) as f64 },
        );
        s.set(Sig::MigrationsPerS, 2.0);
        s.set(Sig::RetransPerS, 0.0);
        s.set(Sig::OutSegsPerS, 2000.0);
        s.set(Sig::BytesSentPerS, 3e8);
        s.set(Sig::BytesRecvPerS, 3e8);
        s.set(Sig::TxQueueBytes, 1000.0);
        s.set(Sig::Threads, 40.0);
        let mut h = Histograms::default();
        h.insert(HistKind::RttUs, vec![(30.0, 50), (300.0, 5)]);
        h.insert(HistKind::RunqUs, vec![(5.0, 100), (50.0, 10)]);
        f.ranks.push(RankFrame {
            key: ProcKey {
                pid: 1000 + local as u32,
                start_time: 1,
            },
            comm: Text::new("python3"),
            labels: Labels {
                rank: Some(rank as u32),
                local_rank: Some(local as u32),
                job: Some(Text::new("bench-job")),
                job_id: Some(Text::new("master:10.0.0.1:29500")),
                ..Default::default()
            },
            gpu: Some(local as u32),
            state: Text::new("R"),
            signals: s,
            histograms: h,
            ..Default::default()
        });
    }
    f.sources.insert(Source::Procfs, SourceStatus::ok());
    f
}

/// A node's exporter, fed a frame a second, served on `listener`.
fn spawn_node(node: usize, listener: TcpListener) {
    let body = Arc::new(Mutex::new(String::new()));
    let b2 = body.clone();
    std::thread::spawn(move || {
        let mut e = Exporter::new(ExporterConfig::default());
        for t in 0.. {
            let text = e.update(&node_frame(node, t));
            *b2.lock().unwrap() = text;
            std::thread::sleep(Duration::from_secs(1));
        }
    });
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let mut r = BufReader::new(&conn);
            let mut line = String::new();
            // The request line and headers; every path gets the metrics.
            while r.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            let text = body.lock().unwrap().clone();
            let mut w = &conn;
            let _ = write!(
                w,
                "HTTP/1.1 200 OK\r\nContent-Type: application/openmetrics-text; version=1.0.0; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
                text.len()
            );
        }
    });
}

fn main() {
    let dir = std::env::temp_dir().join(format!("kitty-cluster-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut targets = Vec::new();
    for node in 0..NODES {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        targets.push(format!("'{}'", l.local_addr().unwrap()));
        spawn_node(node, l);
    }
    let prom_port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let cfg = dir.join("prometheus.yml");
    std::fs::write(
        &cfg,
        format!(
            "global: {{scrape_interval: 1s}}\nscrape_configs:\n  - job_name: kitty\n    static_configs: [{{targets: [{}]}}]\n",
            targets.join(", ")
        ),
    )
    .unwrap();
    let mut prom = Command::new("prometheus")
        .arg(format!("--config.file={}", cfg.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{prom_port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("prometheus (apt install prometheus)");
    let url = format!("http://127.0.0.1:{prom_port}");
    let client = Prometheus::new(PromConfig {
        url: url.clone(),
        bearer_token_file: None,
        basic_auth: None,
        ca_file: None,
        timeout: Duration::from_secs(10),
    })
    .unwrap();
    let mut sampler = ClusterSampler::new(
        client,
        ClusterConfig {
            interval: Duration::from_secs(1),
            window: Duration::from_secs(10),
            stale_after: Duration::from_secs(60),
            job: Some("bench-job".into()),
            node_selector: None,
        },
    );
    // Until every rank has a rate over a full window.
    let t0 = Instant::now();
    loop {
        let f = sampler.tick();
        let with_rate = f
            .ranks
            .iter()
            .filter(|r| r.signal(Sig::RunDelayMsPerS).is_some())
            .count();
        if with_rate == NODES * RANKS_PER_NODE && t0.elapsed() > Duration::from_secs(15) {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "Prometheus never held every rank ({with_rate} of {})",
            NODES * RANKS_PER_NODE
        );
        std::thread::sleep(Duration::from_secs(1));
    }
    let mut analysis = Analysis::new(AnalysisConfig::default());
    let mut times = Vec::new();
    let mut last = None;
    for _ in 0..20 {
        let t = Instant::now();
        let mut f = sampler.tick();
        times.push(t.elapsed());
        analysis.apply(&mut f);
        last = Some(f);
        std::thread::sleep(Duration::from_millis(200));
    }
    times.sort();
    let f = last.unwrap();
    let nodes: std::collections::BTreeSet<&str> =
        f.ranks.iter().filter_map(|r| r.node.as_deref()).collect();
    println!(
        "cluster refresh against Prometheus with {} nodes x {} ranks ({} ranks seen on {} nodes)",
        NODES,
        RANKS_PER_NODE,
        f.ranks.len(),
        nodes.len()
    );
    println!(
        "  queries per refresh: {} (independent of nodes and ranks)",
        sampler.queries_per_refresh()
    );
    println!(
        "  time per refresh: median {:.1} ms, max {:.1} ms (20 refreshes)",
        times[times.len() / 2].as_secs_f64() * 1e3,
        times[times.len() - 1].as_secs_f64() * 1e3
    );
    let stragglers: Vec<String> = f
        .verdicts
        .iter()
        .filter(|v| !v.is_consequence())
        .map(|v| v.message.to_string())
        .collect();
    println!("  rank verdicts: {}", stragglers.len());
    for v in stragglers.iter().take(3) {
        println!("    {v}");
    }
    for v in &f.node_verdicts {
        println!("  node verdict: {}", v.message);
    }
    let _ = prom.kill();
    let _ = prom.wait();
    let _ = std::fs::remove_dir_all(&dir);
}
