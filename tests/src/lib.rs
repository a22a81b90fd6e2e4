//! Helpers for kitty's end-to-end tests: the real `kitty-tui` binary, real
//! child processes, and a lock so that tests measuring scheduling do not run
//! alongside each other.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};

/// Serialises the tests of one test binary (they measure CPU contention).
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Path of the `kitty-tui` binary, built once if needed.
pub fn kitty_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let st = Command::new(cargo)
            .args(["build", "-q", "-p", "kitty-tui", "--bin", "kitty-tui"])
            .current_dir(&root)
            .status()
            .expect("run cargo build");
        assert!(st.success(), "building kitty-tui failed");
        let exe = std::env::current_exe().unwrap();
        // target/<profile>/deps/<test> -> target/<profile>/kitty-tui
        exe.parent().unwrap().parent().unwrap().join("kitty-tui")
    })
    .clone()
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
/// RANK and JOB_NAME. `extra(rank)` adds per-rank arguments.
pub fn start_ring(
    procs: &mut Procs,
    n: usize,
    job: &str,
    extra: &dyn Fn(usize) -> Vec<String>,
) -> Vec<u32> {
    let ports = free_ports(n);
    let ports_arg = ports
        .iter()
        .map(|p| p.to_string())
        .collect::<Vec<_>>()
        .join(",");
    (0..n)
        .map(|rank| {
            let child = Command::new(kitty_bin())
                .args([
                    "demo-rank",
                    "--rank",
                    &rank.to_string(),
                    "--world",
                    &n.to_string(),
                    "--ports",
                    &ports_arg,
                ])
                .args(extra(rank))
                .env("KITTY_WATCH", "1")
                .env("RANK", rank.to_string())
                .env("WORLD_SIZE", n.to_string())
                .env("JOB_NAME", job)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start rank");
            procs.push(child)
        })
        .collect()
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
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("stub-nvml/nvml_stub.c");
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
