//! Host-wide readers: /proc/stat, loadavg, meminfo, pressure/*, net/dev and
//! statvfs(/dev/shm). These formats are a few lines each and kitty needs the
//! raw jiffies and totals (procfs converts them), so they are parsed here.

use super::kept::{Every, KeptFiles, Records};
use super::Roots;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostSample {
    /// What /proc/stat said at its last reading (every [`CPU_EVERY_NS`]).
    pub cpu: HostCpu,
    /// Whether `cpu` was read this tick (else it is the last reading).
    pub cpu_fresh: bool,
    pub interfaces: BTreeMap<String, (u64, u64)>,
    /// Read every [`GAUGES_EVERY_NS`].
    pub gauges: HostGauges,
}

/// What /proc/stat says: every CPU's busy time and the run queue.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostCpu {
    /// (busy, total) jiffies for all CPUs, then per CPU.
    pub cpu_total: (u64, u64),
    pub cpu_each: Vec<(u64, u64)>,
    pub procs_running: Option<u64>,
    pub procs_blocked: Option<u64>,
}

/// What the host's slower files say: loadavg, meminfo, PSI, /dev/shm.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostGauges {
    pub loadavg: Option<[f64; 3]>,
    pub mem_total: Option<u64>,
    pub mem_available: Option<u64>,
    pub shm_total: Option<u64>,
    pub shm_used: Option<u64>,
    /// PSI: (some avg10 %, some total us) for cpu, memory, io.
    pub psi: [Option<(f64, u64)>; 3],
}

/// How often the host's slower files are read: loadavg (the kernel updates
/// it every 5 s), PSI (its averages every 2 s), meminfo and /dev/shm
/// (gauges on screen and in the exposition; no verdict rests on them).
/// `net/dev` is read every tick (the flow probe's coverage compares the
/// interfaces' bytes with the tick's flows).
pub const GAUGES_EVERY_NS: u64 = 2_000_000_000;

/// How often /proc/stat is read (every CPU's busy time, the run queue):
/// the host line and its per-CPU heat are context, as the gauges are, and
/// the file costs the kernel a sum over every CPU of every interrupt's
/// count (its `intr` line): ~4.6 ms a read on a server with 5,000
/// interrupts, more than all of a tick's other work, where a GPU node's
/// NICs and GPUs bring thousands. The first two readings are a tick apart,
/// so the second frame has a utilization; after that each reading's is
/// over the 2 s since the one before.
pub const CPU_EVERY_NS: u64 = GAUGES_EVERY_NS;

/// The slower files, by path under the proc root, in the order
/// [`read_gauges`] takes them: loadavg, meminfo, then PSI's cpu, memory
/// and io (the order of [`HostGauges::psi`]).
const GAUGE_FILES: [&str; 5] = [
    "loadavg",
    "meminfo",
    "pressure/cpu",
    "pressure/memory",
    "pressure/io",
];

/// Reads the host files (kept open in `files`: the same files every tick),
/// /proc/stat every [`CPU_EVERY_NS`], the slower ones every
/// [`GAUGES_EVERY_NS`].
pub struct HostReader {
    cpu: Every<HostCpu>,
    gauges: Every<HostGauges>,
    /// The files' paths under the proc root they were made for: made once,
    /// not joined every tick.
    paths: Option<HostPaths>,
}

/// Where the host files are.
struct HostPaths {
    proc: PathBuf,
    stat: PathBuf,
    /// init's `net/dev` (the host's interfaces), and the proc root's own
    /// where init's cannot be read.
    init_dev: PathBuf,
    dev: PathBuf,
    /// [`GAUGE_FILES`]'s, in its order.
    gauges: [PathBuf; GAUGE_FILES.len()],
}

impl HostPaths {
    fn under(proc: &Path) -> HostPaths {
        HostPaths {
            proc: proc.to_path_buf(),
            stat: proc.join("stat"),
            init_dev: proc.join("1/net/dev"),
            dev: proc.join("net/dev"),
            gauges: GAUGE_FILES.map(|f| proc.join(f)),
        }
    }
}

impl Default for HostReader {
    fn default() -> Self {
        HostReader {
            cpu: Every::second_soon(CPU_EVERY_NS),
            gauges: Every::new(GAUGES_EVERY_NS),
            paths: None,
        }
    }
}

impl HostReader {
    /// This tick's host sample, at `mono`.
    pub fn read(&mut self, roots: &Roots, files: &mut KeptFiles, mono: u64) -> HostSample {
        let paths = match &mut self.paths {
            Some(p) if p.proc == roots.proc => p,
            slot => slot.insert(HostPaths::under(&roots.proc)),
        };
        let mut h = HostSample::default();
        let mut fresh = false;
        let stat = &paths.stat;
        h.cpu = self
            .cpu
            .at(mono, files, [(stat.as_path(), 0)], |files, _| {
                fresh = true;
                let mut cpu = HostCpu::default();
                if let Some(text) = files.read(stat, Records::One) {
                    parse_stat(&text, &mut cpu);
                }
                cpu
            })
            .clone();
        h.cpu_fresh = fresh;
        // The host's interfaces are those of init's namespace, not kitty's
        // own (init never changes namespace, so its file can be kept too).
        let dev = files
            .read(&paths.init_dev, Records::Many)
            .or_else(|| files.read(&paths.dev, Records::Many));
        if let Some(text) = dev {
            h.interfaces = parse_net_dev(&text);
        }
        let gauges = &paths.gauges;
        let keep = gauges.iter().map(|p| (p.as_path(), 0));
        h.gauges = self
            .gauges
            .at(mono, files, keep, |files, _| {
                read_gauges(roots, gauges, files)
            })
            .clone();
        h
    }
}

fn read_gauges(
    roots: &Roots,
    [loadavg, meminfo, psi @ ..]: &[PathBuf; GAUGE_FILES.len()],
    files: &mut KeptFiles,
) -> HostGauges {
    let mut g = HostGauges {
        loadavg: files
            .read(loadavg, Records::One)
            .and_then(|t| parse_loadavg(&t)),
        ..Default::default()
    };
    if let Some(text) = files.read(meminfo, Records::One) {
        [g.mem_total, g.mem_available] = meminfo_fields(&text, ["MemTotal", "MemAvailable"]);
    }
    for (i, path) in psi.iter().enumerate() {
        g.psi[i] = files
            .read(path, Records::One)
            .and_then(|t| parse_psi_some(&t));
    }
    if let Some((total, used)) = statvfs(&roots.host_path("/dev/shm")) {
        g.shm_total = Some(total);
        g.shm_used = Some(used);
    }
    g
}

/// /proc/stat's keys for the run queue (not signal names, though alike).
const STAT_RUNNING: &str = "procs_running"; // not a signal
const STAT_BLOCKED: &str = "procs_blocked"; // not a signal

pub fn parse_stat(text: &str, h: &mut HostCpu) {
    for line in text.lines() {
        let mut it = line.split_whitespace();
        let Some(key) = it.next() else { continue };
        if key.starts_with("cpu") {
            // The first eight fields, without a vector per CPU line (a GPU
            // node has a hundred and more).
            let mut v = [0u64; 8];
            let mut n = 0;
            for x in it.filter_map(|x| x.parse().ok()).take(8) {
                v[n] = x;
                n += 1;
            }
            if n < 4 {
                continue;
            }
            // user nice system idle iowait irq softirq steal (guest is in user).
            let total: u64 = v.iter().sum();
            let idle = v[3] + v[4];
            let pair = (total - idle, total);
            if key == "cpu" {
                h.cpu_total = pair;
            } else {
                h.cpu_each.push(pair);
            }
        } else if key == STAT_RUNNING {
            h.procs_running = it.next().and_then(|v| v.parse().ok());
        } else if key == STAT_BLOCKED {
            h.procs_blocked = it.next().and_then(|v| v.parse().ok());
        }
    }
}

pub fn parse_loadavg(text: &str) -> Option<[f64; 3]> {
    let v: Vec<f64> = text
        .split_whitespace()
        .take(3)
        .filter_map(|x| x.parse().ok())
        .collect();
    (v.len() == 3).then(|| [v[0], v[1], v[2]])
}

/// meminfo values in bytes.
/// `Key:   123 kB` -> ("Key", bytes).
fn meminfo_line(l: &str) -> Option<(&str, u64)> {
    let (k, v) = l.split_once(':')?;
    let mut parts = v.split_whitespace();
    let n: u64 = parts.next()?.parse().ok()?;
    let mult = if parts.next() == Some("kB") { 1024 } else { 1 };
    Some((k, n * mult))
}

/// The values of these meminfo keys, in bytes: what a tick keeps, without
/// naming the file's fifty-odd others.
pub fn meminfo_fields<const N: usize>(text: &str, keys: [&str; N]) -> [Option<u64>; N] {
    let mut out = [None; N];
    for (k, v) in text.lines().filter_map(meminfo_line) {
        if let Some(i) = keys.iter().position(|&want| want == k) {
            out[i] = Some(v);
        }
    }
    out
}

/// `some avg10=.. avg60=.. avg300=.. total=..` -> (avg10, total).
pub fn parse_psi_some(text: &str) -> Option<(f64, u64)> {
    let line = text.lines().find(|l| l.starts_with("some "))?;
    let mut avg10 = None;
    let mut total = None;
    for kv in line.split_whitespace().skip(1) {
        match kv.split_once('=') {
            Some(("avg10", v)) => avg10 = v.parse().ok(),
            Some(("total", v)) => total = v.parse().ok(),
            _ => {}
        }
    }
    Some((avg10?, total?))
}

/// interface -> (rx bytes, tx bytes).
pub fn parse_net_dev(text: &str) -> BTreeMap<String, (u64, u64)> {
    text.lines()
        .skip(2)
        .filter_map(|l| {
            let (name, rest) = l.split_once(':')?;
            // Received bytes are the 1st of 16 numbers, sent bytes the
            // 9th; only those two are parsed (a node's every pod adds a
            // veth line read every tick).
            let mut fields = rest.split_ascii_whitespace();
            let rx = fields.next()?.parse().ok()?;
            let tx = fields.nth(7)?.parse().ok()?;
            Some((name.trim().to_string(), (rx, tx)))
        })
        .collect()
}

fn statvfs(path: &std::path::Path) -> Option<(u64, u64)> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs is plain data; all zeroes is a valid value.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: c is a valid NUL-terminated path, s a valid out-pointer.
    if unsafe { libc::statvfs(c.as_ptr(), &mut s) } != 0 {
        return None;
    }
    let total = s.f_blocks as u64 * s.f_frsize as u64;
    let free = s.f_bfree as u64 * s.f_frsize as u64;
    Some((total, total.saturating_sub(free)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn captured_host_files() {
        let mut h = HostCpu::default();
        parse_stat(include_str!("../../tests/fixtures/proc/host_stat"), &mut h);
        assert!(h.cpu_total.1 > h.cpu_total.0);
        assert_eq!(h.cpu_each.len(), 2);
        assert!(h.procs_running.unwrap() >= 1);
        assert!(parse_loadavg(include_str!("../../tests/fixtures/proc/loadavg")).is_some());
        let text = include_str!("../../tests/fixtures/proc/meminfo");
        let [total, available, none] =
            meminfo_fields(text, ["MemTotal", "MemAvailable", "NoSuchKey"]);
        let (total, available) = (total.unwrap(), available.unwrap());
        assert!(available > 1 << 20 && available <= total);
        assert_eq!(none, None);
        // kB lines in bytes, from the file's own text.
        let kb: u64 = text
            .lines()
            .find_map(|l| {
                l.strip_prefix("MemTotal:")?
                    .trim()
                    .strip_suffix(" kB")?
                    .trim()
                    .parse()
                    .ok()
            })
            .unwrap();
        assert_eq!(total, kb * 1024);
        let (avg10, total) =
            parse_psi_some(include_str!("../../tests/fixtures/proc/pressure_cpu")).unwrap();
        assert!(avg10 >= 0.0 && total > 0);
        assert!(parse_psi_some(include_str!("../../tests/fixtures/proc/pressure_io")).is_some());
        let dev = parse_net_dev(include_str!("../../tests/fixtures/proc/net_dev"));
        assert_eq!(dev["lo"], (4701, 4701));
        assert_eq!(dev["eth0"], (40795927, 187298), "received, then sent bytes");
        // A line cut before the sent bytes is left out.
        assert!(parse_net_dev("h\nh\n eth1: 1 2 3 4 5 6 7 8\n").is_empty());
    }

    #[test]
    fn odd_inputs() {
        assert_eq!(parse_loadavg(""), None);
        assert_eq!(
            parse_psi_some("full avg10=0 total=1\n"),
            None,
            "no some line (memory on old kernels)"
        );
        let mut h = HostCpu::default();
        parse_stat("cpu 1 2\nintr 5\n", &mut h);
        assert_eq!(h.cpu_total, (0, 0));
        assert!(parse_net_dev("garbage").is_empty());
    }

    #[test]
    fn live_host() {
        let (mut files, mut r) = (KeptFiles::default(), HostReader::default());
        let h = r.read(&Roots::default(), &mut files, 0);
        assert!(files.len() >= 4, "the host files are kept open");
        let again = r.read(&Roots::default(), &mut files, 1);
        assert!(again.cpu.cpu_total.1 >= h.cpu.cpu_total.1 && again.gauges == h.gauges);
        assert!(h.cpu.cpu_total.1 > 0 && !h.cpu.cpu_each.is_empty());
        assert!(h.gauges.mem_available.is_some());
        assert!(h.gauges.shm_total.is_some());
    }

    /// A proc root whose files say these numbers.
    fn write_host(root: &std::path::Path, busy: u64, available_kb: u64, load: f64) {
        std::fs::create_dir_all(root.join("pressure")).unwrap();
        let psi = format!("some avg10={load} avg60=0 avg300=0 total=7\n");
        for (f, text) in [
            ("stat", format!("cpu {busy} 0 0 100 0 0 0 0\n")),
            (
                "meminfo",
                format!("MemTotal: 1000 kB\nMemAvailable: {available_kb} kB\n"),
            ),
            ("loadavg", format!("{load} 0.5 0.25 1/100 42\n")),
            ("pressure/cpu", psi.clone()),
            ("pressure/memory", psi.clone()),
            ("pressure/io", psi),
        ] {
            std::fs::write(root.join(f), text).unwrap();
        }
    }

    #[test]
    fn stat_is_read_a_tick_after_the_first_then_every_two_seconds_as_the_slower_files() {
        let d = tempfile::tempdir().unwrap();
        let roots = Roots::new(d.path());
        let (mut files, mut r) = (KeptFiles::default(), HostReader::default());
        let mut at = |ms: u64| {
            let h = r.read(&roots, &mut files, ms * 1_000_000);
            files.sweep();
            let g = h.gauges;
            (
                (h.cpu.cpu_total.1, h.cpu_fresh),
                g.mem_available,
                g.loadavg.map(|l| l[0]),
                g.psi[1],
            )
        };
        write_host(d.path(), 10, 500, 1.5);
        assert_eq!(
            at(0),
            ((110, true), Some(500 * 1024), Some(1.5), Some((1.5, 7)))
        );
        write_host(d.path(), 20, 250, 3.0);
        // The second reading of stat a tick after the first (a utilization
        // from the second frame on); the rest as read at 0.
        assert_eq!(
            at(500),
            ((120, true), Some(500 * 1024), Some(1.5), Some((1.5, 7)))
        );
        write_host(d.path(), 30, 250, 3.0);
        // Then stat waits its 2 s too.
        assert_eq!(
            at(1_500),
            ((120, false), Some(500 * 1024), Some(1.5), Some((1.5, 7)))
        );
        assert_eq!(
            at(2_000),
            ((120, false), Some(250 * 1024), Some(3.0), Some((3.0, 7)))
        );
        assert_eq!(
            at(2_500),
            ((130, true), Some(250 * 1024), Some(3.0), Some((3.0, 7)))
        );
        assert_eq!(
            files.len(),
            6,
            "stat, meminfo, loadavg, three PSI files kept open"
        );
    }
}
