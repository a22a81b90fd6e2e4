//! `kitty-tui cluster` against a real Prometheus and three kitty "nodes" on
//! this machine: a 6-rank ring job spread over three network namespaces
//! (two ranks each), one `kitty-tui serve` per namespace with its own node
//! name watching its own ranks, Prometheus scraping all three. The cluster
//! view, driven in tmux, must show the six ranks with their nodes, flag a
//! CPU straggler on one node, flag a whole node when all its ranks are
//! slowed, mark a node stale when its `serve` is killed, drill down to a
//! node's own answer for a rank, and keep the last data with Prometheus's
//! error when Prometheus goes away. What it showed replays from its
//! recording.

mod support;
use kitty_faultlab::{addr, Lab};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use support::*;

const JOB: &str = "cluster-ring";
const NODES: [&str; 3] = ["node-a", "node-b", "node-c"];

fn have(bin: &str) -> bool {
    Command::new(bin).arg("--version").output().is_ok()
}

/// A CPU quota of 1 % that processes can be moved into and out of.
struct Quota {
    dir: PathBuf,
}

impl Quota {
    fn new(name: &str) -> Option<Quota> {
        let (base, file, limit) = if Path::new("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").exists() {
            ("/sys/fs/cgroup/cpu", "cpu.cfs_quota_us", "1000")
        } else if Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
            ("/sys/fs/cgroup", "cpu.max", "1000 100000")
        } else {
            return None;
        };
        let dir = Path::new(base).join(format!("kitty-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).ok()?;
        std::fs::write(dir.join(file), limit).ok()?;
        Some(Quota { dir })
    }

    fn add(&self, pid: u32) {
        std::fs::write(self.dir.join("cgroup.procs"), pid.to_string()).unwrap();
    }

    /// Back to the root group (the parent of ours).
    fn release(&self, pid: u32) {
        let root = self.dir.parent().unwrap();
        std::fs::write(root.join("cgroup.procs"), pid.to_string()).unwrap();
    }
}

impl Drop for Quota {
    fn drop(&mut self) {
        if let Ok(s) = std::fs::read_to_string(self.dir.join("cgroup.procs")) {
            for pid in s.split_whitespace().filter_map(|p| p.parse().ok()) {
                self.release(pid);
            }
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// The ring's ranks, rank r inside namespace r / 2 on that node's address.
fn start_job(lab: &Lab, procs: &mut Procs) -> Vec<u32> {
    let ports = free_ports(6);
    let hosts: Vec<String> = (0..6).map(|r| addr(r / 2).to_string()).collect();
    let pids: Vec<u32> = (0..6)
        .map(|rank| {
            let mut cmd = kitty_tui::demo::ring::rank_command(&kitty_bin(), rank, &ports, JOB);
            cmd.args([
                "--hosts",
                &hosts.join(","),
                "--work",
                "500",
                "--gpu-ms",
                "10",
            ])
            .env("KITTY_NODE", NODES[rank / 2])
            .env("LOCAL_RANK", (rank % 2).to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
            lab.enter(rank / 2, &mut cmd).unwrap();
            procs.push(cmd.spawn().unwrap())
        })
        .collect();
    wait_exec(&pids, "demo-rank");
    wait_established(&pids);
    pids
}

/// One `serve` per node, inside its namespace, watching its own ranks.
fn start_serve(lab: &Lab, procs: &mut Procs, node: usize) -> u32 {
    let mut cmd = Command::new(kitty_bin());
    cmd.args([
        "serve",
        "--no-ebpf",
        "--no-gpu",
        "--listen",
        &format!("{}:9977", addr(node)),
        "--watch-env",
        &format!("KITTY_NODE={}", NODES[node]),
    ])
    .env("NODE_NAME", NODES[node])
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    lab.enter(node, &mut cmd).unwrap();
    procs.push(cmd.spawn().unwrap())
}

#[test]
fn cluster_view_over_three_nodes_in_prometheus() {
    let _g = serial();
    if !is_root() {
        skip("cluster: needs root for network namespaces and cgroups");
        return;
    }
    if !have("prometheus") {
        skip("cluster: the prometheus package is not installed (.ci/run installs it)");
        return;
    }
    let Some(one) = Quota::new("cluster-one") else {
        skip("cluster: no cgroup cpu controller mounted");
        return;
    };
    let whole = Quota::new("cluster-node").unwrap();
    let lab = Lab::new(3).unwrap();
    let mut procs = Procs::default();
    let pids = start_job(&lab, &mut procs);
    let serves: Vec<u32> = (0..3).map(|n| start_serve(&lab, &mut procs, n)).collect();

    // Prometheus inside node-a's namespace, scraping the three nodes.
    let dir = tempfile::tempdir().unwrap();
    let targets: Vec<String> = (0..3).map(|n| format!("'{}:9977'", addr(n))).collect();
    let cfg = dir.path().join("prometheus.yml");
    std::fs::write(
        &cfg,
        format!(
            "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\nscrape_configs:\n  - job_name: kitty\n    static_configs: [{{targets: [{}]}}]\n",
            targets.join(", ")
        ),
    )
    .unwrap();
    let prom = format!("http://{}:9090", addr(0));
    let mut cmd = Command::new("prometheus");
    cmd.arg(format!("--config.file={}", cfg.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("data").display()
        ))
        .arg(format!("--web.listen-address={}:9090", addr(0)))
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    lab.enter(0, &mut cmd).unwrap();
    let prom_pid = procs.push(cmd.spawn().unwrap());

    // The JSON form first: six ranks with their nodes, once all are scraped.
    // None while Prometheus does not answer yet (`--json` then fails with
    // one line instead of printing an empty document).
    let json = |secs: &str| -> Option<serde_json::Value> {
        let mut cmd = Command::new(kitty_bin());
        cmd.args([
            "cluster",
            "--prometheus",
            &prom,
            "--job",
            JOB,
            "--interval",
            "1s",
            "--window",
            "5s",
            "--json",
            "--duration",
            secs,
        ]);
        lab.enter(0, &mut cmd).unwrap();
        let out = cmd.output().unwrap();
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
            return None;
        }
        Some(serde_json::from_slice(&out.stdout).unwrap())
    };
    let snap = wait_until(60, || {
        let s = json("2s")?;
        let n = s["ranks"].as_array().map_or(0, |r| {
            r.iter()
                .filter(|r| r["signals"]["run_delay_ms_per_s"].is_number())
                .count()
        });
        (n == 6).then_some(s)
    })
    .expect("six ranks with rates in the cluster document");
    for r in snap["ranks"].as_array().unwrap() {
        let rank = r["rank"].as_u64().unwrap() as usize;
        assert_eq!(r["node"], NODES[rank / 2], "rank {rank}'s node: {r}");
        assert_eq!(r["job"], JOB);
    }

    // The TUI, recording what it shows.
    let rec = dir.path().join("cluster.kitty");
    let Some(t) = Tmux::start(
        &format!(
            "ip netns exec {} {} cluster --prometheus {prom} --job {JOB} --interval 1s --window 5s --stale-after 5s --record {}",
            lab.netns(0),
            kitty_bin().display(),
            rec.display()
        ),
        200,
        50,
    ) else {
        return;
    };
    let screen = t.wait_for(
        &|s| NODES.iter().all(|n| s.matches(n).count() >= 2) && s.contains("ranks (6)"),
        30,
    );
    assert!(
        screen.contains("NODE") && screen.contains("ranks (6)"),
        "six ranks with a node column:\n{screen}"
    );

    // 1. One rank on node-b held to 1 % of a CPU: flagged on its own (its
    // throttled time shows as run-queue delay, with CFS throttling beside).
    // Throttling heads its verdict cell when it is raised (cut to "throt"
    // at this width); the run-queue delay alone may cross the bar first.
    one.add(pids[2]);
    let flagged = |s: &str| {
        s.lines()
            .any(|l| is_row(l, 2, "node-b") && (l.contains("runq ") || l.contains("throt")))
    };
    let screen = t.wait_for(&flagged, 40);
    assert!(flagged(&screen), "rank 2 on node-b flagged:\n{screen}");
    assert!(
        !screen.contains("slow nodes"),
        "one rank is not a node:\n{screen}"
    );
    one.release(pids[2]);

    // 2. Both ranks of node-c held: the node is named as a whole.
    whole.add(pids[4]);
    whole.add(pids[5]);
    let screen = t.wait_for(&|s| s.contains("node node-c: all 2 ranks"), 40);
    assert!(
        screen.contains("slow nodes") && screen.contains("node node-c: all 2 ranks"),
        "node-c as a whole:\n{screen}"
    );
    whole.release(pids[4]);
    whole.release(pids[5]);

    // 3. node-b's serve killed: its ranks stale, the others go on.
    let _ = Command::new("kill").arg(serves[1].to_string()).status();
    let screen = t.wait_for(
        &|s| s.matches("stale: node stopped reporting").count() == 2,
        40,
    );
    let stale: Vec<&str> = screen
        .lines()
        .filter(|l| l.contains("stale: node stopped reporting"))
        .collect();
    assert_eq!(stale.len(), 2, "node-b's two ranks stale:\n{screen}");
    assert!(stale.iter().all(|l| l.contains("node-b")), "{screen}");
    assert!(screen.contains("ranks (6)"), "the others stay:\n{screen}");

    // Drill-down: a live rank's node answers with its pid and sockets.
    t.keys(&["/"]);
    t.keys(&["node-a", "Enter"]);
    t.keys(&["Enter"]);
    let screen = t.wait_for(&|s| s.contains(" · pid ") && s.contains("ESTAB"), 15);
    assert!(
        screen.contains(" · pid ") && screen.contains("ESTAB"),
        "the node's own view of the rank:\n{screen}"
    );

    // Prometheus gone: its error on screen, the last data kept.
    t.keys(&["Escape"]);
    let _ = Command::new("kill").arg(prom_pid.to_string()).status();
    let screen = t.wait_for(&|s| s.contains("prometheus: unavailable"), 20);
    assert!(
        screen.contains("prometheus: unavailable") && screen.contains("(6 ranks)"),
        "the error, and the last data:\n{screen}"
    );
    t.keys(&["q"]);
    let _ = wait_until(10, || (t.query("#{pane_dead}") == "1").then_some(()));

    // The recording replays with the nodes in it.
    let out = run_ok(
        Command::new(kitty_bin())
            .args(["replay", "--dump"])
            .arg(&rec),
    );
    let dump = String::from_utf8_lossy(&out.stdout);
    assert!(
        NODES.iter().all(|n| dump.contains(n)),
        "the recording names the nodes:\n{}",
        &dump[..dump.len().min(2000)]
    );
    drop(procs);
}

/// A rank table row of `rank` on `node`.
fn is_row(line: &str, rank: u32, node: &str) -> bool {
    let mut w = line.trim_start_matches(['│', ' ']).split_whitespace();
    w.next() == Some(&rank.to_string()) && w.next() == Some(node)
}
