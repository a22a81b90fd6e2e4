//! Helpers for kitty's end-to-end tests: the real `kitty-tui` binary (built
//! by cargo for these tests), real child processes, and a lock so that tests
//! measuring scheduling do not run alongside each other. Each test file
//! includes this module; not every file uses every helper.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};

/// Serialises the tests of one test binary (they measure CPU contention).
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Path of the `kitty-tui` binary cargo built for these tests.
pub fn kitty_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_kitty-tui"))
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Children killed (and reaped) when dropped.
#[derive(Default)]
pub struct Procs(pub Vec<Child>);

impl Procs {
    pub fn push(&mut self, c: Child) -> u32 {
        let pid = c.id();
        self.0.push(c);
        pid
    }
}

impl Drop for Procs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            // A child started as its own process group takes its
            // descendants with it (a wrapper's rank outlives `timeout`).
            // SAFETY: a signal to a group we created; ESRCH when it is not one.
            unsafe { libc::kill(-(c.id() as i32), libc::SIGKILL) };
            let _ = c.kill();
        }
        for c in &mut self.0 {
            let _ = c.wait();
        }
    }
}

pub fn free_ports(n: usize) -> Vec<u16> {
    let ls: Vec<_> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    ls.iter().map(|l| l.local_addr().unwrap().port()).collect()
}

/// A ring job of `n` demo ranks over loopback, labelled KITTY_WATCH=1,
/// RANK and JOB_NAME (the demo's own launcher). `extra(rank)` adds per-rank
/// arguments. Returns once every rank is in the ring (it listens, has
/// connected to the next rank and accepted the previous one). The ports are
/// picked free but another process can take one before a rank binds it (a
/// starting ring's connect attempts take ephemeral ports): a rank that exits
/// while starting makes the ring start again on new ports. A wait for exec
/// alone could let such a rank die after this returned (the likeliest reason
/// one CI run saw one launch of two).
pub fn start_ring(
    procs: &mut Procs,
    n: usize,
    job: &str,
    extra: &dyn Fn(usize) -> Vec<String>,
) -> Vec<u32> {
    for _attempt in 0..5 {
        let ports = free_ports(n);
        let mut ring: Vec<Child> = (0..n)
            .map(|rank| {
                kitty_tui::demo::ring::rank_command(&kitty_bin(), rank, &ports, job)
                    .args(extra(rank))
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .expect("start rank")
            })
            .collect();
        let pids: Vec<u32> = ring.iter().map(|c| c.id()).collect();
        let started = wait_until(20, || {
            if ring.iter_mut().any(|c| matches!(c.try_wait(), Ok(Some(_)))) {
                return Some(false);
            }
            pids.iter()
                .all(|p| runs(*p, "demo-rank") && socket_inodes(*p).len() >= 3)
                .then_some(true)
        });
        match started {
            Some(true) => {
                for c in ring {
                    procs.push(c);
                }
                return pids;
            }
            _ => {
                for c in &mut ring {
                    let _ = c.kill();
                    let _ = c.wait();
                }
            }
        }
    }
    panic!("the ring job {job} never started");
}

/// The inodes of the sockets a process holds (a ring rank in its ring:
/// its listener, the next rank and the previous one).
fn socket_inodes(pid: u32) -> Vec<u64> {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(Vec::new(), |d| {
        d.flatten()
            .filter_map(|e| std::fs::read_link(e.path()).ok())
            .filter_map(|l| kitty_core::sources::process::parse_socket_link(l.to_str()?))
            .collect()
    })
}

fn runs(pid: u32, marker: &str) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|c| String::from_utf8_lossy(&c).contains(marker))
}

/// Waits until each process runs a command line containing `marker` (its
/// exec is done, so /proc shows its own environment).
pub fn wait_exec(pids: &[u32], marker: &str) {
    let ok = wait_until(20, || pids.iter().all(|p| runs(*p, marker)).then_some(()));
    assert!(ok.is_some(), "processes {pids:?} did not start {marker}");
}

/// Runs `kitty-tui snapshot --json` and parses its output.
pub fn snapshot(duration: &str, extra: &[&str]) -> serde_json::Value {
    let out = run_ok(
        Command::new(kitty_bin())
            .args(["snapshot", "--json", "--duration", duration])
            .args(extra),
    );
    serde_json::from_slice(&out.stdout).expect("snapshot prints JSON")
}

/// The ranks of one job in a snapshot.
pub fn ranks_of<'a>(snap: &'a serde_json::Value, job: &str) -> Vec<&'a serde_json::Value> {
    snap["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["job"] == job)
        .collect()
}

pub fn signal(rank: &serde_json::Value, name: &str) -> f64 {
    rank["signals"][name]
        .as_f64()
        .unwrap_or_else(|| panic!("signal {name} missing in {rank}"))
}

pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// A minimal HTTP/1.1 GET over std (the tests need no client crate):
/// returns (status, body).
pub fn http_get(
    addr: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> std::io::Result<(u16, String)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr)?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))?;
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes())?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw).to_string();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((status, dechunk(&body)))
}

/// Undoes `Transfer-Encoding: chunked` if the body looks chunked.
fn dechunk(body: &str) -> String {
    let mut out = String::new();
    let mut rest = body;
    loop {
        let Some((size, tail)) = rest.split_once("\r\n") else {
            return body.to_string();
        };
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            return body.to_string();
        };
        if n == 0 {
            return out;
        }
        if tail.len() < n {
            return body.to_string();
        }
        out.push_str(&tail[..n]);
        rest = tail[n..].trim_start_matches("\r\n");
    }
}

/// Percent-encodes a query parameter value.
pub fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Resident memory of a process, in KiB.
pub fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))?
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

/// Waits until `f` returns Some, up to `secs`.
pub fn wait_until<T>(secs: u64, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let t = std::time::Instant::now();
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if t.elapsed() > std::time::Duration::from_secs(secs) {
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// A test that cannot run here says why; on CI (CI=true, root, packages
/// installed by .ci/run) it must run, so skipping there is a failure.
pub fn skip(why: &str) {
    if std::env::var_os("CI").is_some_and(|v| !v.is_empty()) {
        panic!("cannot skip on CI: {why}");
    }
    eprintln!("SKIP {why}");
}

/// Builds the stub libnvidia-ml.so.1 (tests/stub-nvml/nvml_stub.c) with the
/// system C compiler into `dir`; returns its path.
pub fn build_stub_nvml(dir: &std::path::Path) -> PathBuf {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/stub-nvml/nvml_stub.c");
    let out = dir.join("libnvidia-ml.so.1");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let st = Command::new(cc)
        .args(["-shared", "-fPIC", "-O1", "-Wall", "-o"])
        .arg(&out)
        .arg(&src)
        .status()
        .expect("run the C compiler");
    assert!(st.success(), "building the NVML stub failed");
    out
}

/// Runs a command and returns its output; a failure shows its stderr.
pub fn run_ok(cmd: &mut Command) -> std::process::Output {
    let out = cmd.output().expect("start the command");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `kitty-tui record -o FILE --duration D`, which must succeed.
pub fn record(file: impl AsRef<std::path::Path>, duration: &str) {
    run_ok(
        Command::new(kitty_bin())
            .args(["record", "-o"])
            .arg(file.as_ref())
            .args(["--duration", duration]),
    );
}

/// Records for `duration`, then gives each rank of `job` (by rank number)
/// the median of `sig` over the ticks of the last `window_s` seconds: one
/// tick's value on a shared CPU can catch a passing burst of other work, a
/// median over several ticks does not.
pub fn recorded_medians(
    job: &str,
    sig: kitty_core::model::Sig,
    duration: &str,
    window_s: u64,
) -> std::collections::BTreeMap<u32, f64> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("medians.kitty");
    record(&path, duration);
    let (frames, _) = kitty_core::sinks::record::Reader::open(&path)
        .unwrap()
        .read_all();
    let t_end = frames.last().expect("frames").mono_ns;
    let mut per_rank: std::collections::BTreeMap<u32, Vec<f64>> = Default::default();
    for f in frames
        .iter()
        .filter(|f| t_end - f.mono_ns <= window_s * 1_000_000_000)
    {
        for r in f
            .ranks
            .iter()
            .filter(|r| r.labels.job.as_deref() == Some(job))
        {
            if let (Some(rank), Some(v)) = (r.labels.rank, r.signal(sig)) {
                per_rank.entry(rank).or_default().push(v);
            }
        }
    }
    per_rank.into_iter().map(|(r, v)| (r, median(v))).collect()
}

/// `kitty-tui record` in the background; the test reads the recording as it
/// grows (frames are flushed as written) to wait on what kitty saw.
pub struct LiveRecord {
    child: Child,
    pub path: PathBuf,
    _dir: tempfile::TempDir,
}

impl LiveRecord {
    pub fn start(extra: &[&str]) -> LiveRecord {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("live.kitty");
        let child = Command::new(kitty_bin())
            .args(["record", "-o"])
            .arg(&path)
            .args(extra)
            .stderr(Stdio::null())
            .spawn()
            .expect("start kitty-tui record");
        LiveRecord {
            child,
            path,
            _dir: dir,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The frames written so far.
    pub fn frames(&self) -> Vec<kitty_core::model::Frame> {
        match kitty_core::sinks::record::Reader::open(&self.path) {
            Ok(mut r) => r.read_all().0,
            Err(_) => Vec::new(),
        }
    }

    /// Waits until `f` finds something in the frames so far.
    pub fn wait_for<T>(
        &self,
        secs: u64,
        f: impl Fn(&[kitty_core::model::Frame]) -> Option<T>,
    ) -> Option<T> {
        wait_until(secs, || f(&self.frames()))
    }

    /// Waits for a frame in which every loaded source reports (the probes
    /// are attached and the sampler ticks).
    pub fn wait_ready(&self) {
        let ok = self.wait_for(30, |fs| {
            fs.iter()
                .rev()
                .find(|f| f.sources.iter().any(|(s, _)| s.name().starts_with("ebpf")))
                .map(|_| ())
        });
        assert!(ok.is_some(), "kitty never recorded a frame with its probes");
    }

    /// Waits for the recorder to exit (after a signal the test sent).
    pub fn wait(&mut self) -> std::process::ExitStatus {
        self.child.wait().unwrap()
    }

    /// Stops the recorder (SIGINT, a clean close) and returns every frame.
    pub fn stop(mut self) -> Vec<kitty_core::model::Frame> {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let st = self.child.wait().unwrap();
        assert!(st.success(), "record exited with {st}");
        self.frames()
    }
}

impl Drop for LiveRecord {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The messages of the events of one kind in frames.
pub fn events_of(
    frames: &[kitty_core::model::Frame],
    kind: kitty_core::model::EventKind,
) -> Vec<String> {
    frames
        .iter()
        .flat_map(|f| f.events.iter())
        .filter(|e| e.kind == kind)
        .map(|e| e.message.to_string())
        .collect()
}

/// Waits until every process has an established TCP connection (its
/// `connect` is done), reading its own namespace's table.
pub fn wait_established(pids: &[u32]) {
    let established = |pid: u32| -> bool {
        let inodes = socket_inodes(pid);
        ["tcp", "tcp6"].iter().any(|t| {
            std::fs::read_to_string(format!("/proc/{pid}/net/{t}"))
                .unwrap_or_default()
                .lines()
                .skip(1)
                .any(|l| {
                    let f: Vec<&str> = l.split_whitespace().collect();
                    f.len() > 9
                        && f[3] == "01"
                        && f[9].parse().is_ok_and(|i: u64| inodes.contains(&i))
                })
        })
    };
    let ok = wait_until(20, || pids.iter().all(|p| established(*p)).then_some(()));
    assert!(ok.is_some(), "no established connection for {pids:?}");
}

/// How long a phase of an experiment lasts (a fault held, a baseline
/// accrued): a measurement window, not a wait for something to be ready.
pub fn phase(secs: f64) {
    std::thread::sleep(std::time::Duration::from_secs_f64(secs));
}

/// A tmux session running one command, for driving the real TUI.
pub struct Tmux {
    name: String,
}

impl Tmux {
    pub fn start(cmd: &str, w: u16, h: u16) -> Option<Tmux> {
        if Command::new("tmux").arg("-V").output().is_err() {
            skip("tmux is not installed");
            return None;
        }
        let name = format!("kitty-test-{}-{}", std::process::id(), w);
        let st = Command::new("tmux")
            .args([
                "new-session",
                "-d",
                "-s",
                &name,
                "-x",
                &w.to_string(),
                "-y",
                &h.to_string(),
            ])
            .env("TERM", "xterm-256color")
            .status()
            .unwrap();
        assert!(st.success());
        // Keep the pane after the program exits, to read its status.
        Command::new("tmux")
            .args(["set-option", "-t", &name, "remain-on-exit", "on"])
            .status()
            .unwrap();
        Command::new("tmux")
            .args(["respawn-pane", "-k", "-t", &name, cmd])
            .status()
            .unwrap();
        Some(Tmux { name })
    }
    pub fn capture(&self) -> String {
        let out = Command::new("tmux")
            .args(["capture-pane", "-p", "-t", &self.name])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).to_string()
    }
    pub fn keys(&self, keys: &[&str]) {
        Command::new("tmux")
            .args(["send-keys", "-t", &self.name])
            .args(keys)
            .status()
            .unwrap();
    }
    pub fn query(&self, fmt: &str) -> String {
        let out = Command::new("tmux")
            .args(["display-message", "-p", "-t", &self.name, fmt])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
    pub fn wait_for(&self, what: &dyn Fn(&str) -> bool, secs: u64) -> String {
        let t = std::time::Instant::now();
        loop {
            let s = self.capture();
            if what(&s) || t.elapsed() > std::time::Duration::from_secs(secs) {
                return s;
            }
            std::thread::sleep(std::time::Duration::from_millis(250));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &self.name])
            .status();
    }
}

/// Runs `promtool check metrics` on an exposition.
pub fn promtool_check_metrics(text: &str) -> std::process::Output {
    let mut check = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut check.stdin.take().unwrap(), text.as_bytes()).unwrap();
    check.wait_with_output().unwrap()
}
