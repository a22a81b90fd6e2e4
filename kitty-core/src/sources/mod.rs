//! Sources: readers of the live system. The procfs readers return raw
//! samples that the sampler turns into frames; the other sources (NVML here,
//! the eBPF probes in their own crate, a demo job's own reports) are
//! [`Enricher`]s that add to each frame. Rates and verdicts are computed
//! elsewhere.

pub mod cgroup;
pub mod discovery;
pub mod flight_recorder;
pub mod host;
pub mod inet_diag;
pub mod kept;
pub mod labels;
pub mod nccl_env;
pub mod nccl_inspector;
pub mod nccl_ras;
pub mod netstat;
pub mod node;
pub mod node_api;
pub mod numa;
pub mod nvml;
pub mod process;
pub mod prometheus;
pub mod rdma;
pub mod sched;
pub mod sockdiag;
pub mod status;
pub mod tasks;
pub mod tcp_table;

use std::path::{Path, PathBuf};

/// Clock ticks per second, the unit of /proc's times (USER_HZ).
pub fn clock_ticks() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(t).ok().filter(|t| *t > 0).unwrap_or(100)
}

/// A source that adds to every frame after the sampler built it (GPU data,
/// probe signals and events, a job's own step times). Enrichers run on the
/// sampling thread in the order the pipeline lists them and must not block:
/// slow work belongs on the source's own thread.
pub trait Enricher: Send {
    /// The source's name, for logs and the architecture's pipeline listing.
    fn name(&self) -> &'static str;
    fn enrich(&mut self, frame: &mut crate::model::Frame);
}

/// Where the host's /proc lives (`/proc`, or `/host/proc` under kubectl debug),
/// the root of the filesystem that holds it (for /dev/shm and cgroups), and
/// the host's /sys (beside the proc root unless `--sys-root` says otherwise).
#[derive(Debug, Clone)]
pub struct Roots {
    pub proc: PathBuf,
    pub host: PathBuf,
    pub sys: PathBuf,
}

impl Roots {
    pub fn new(proc_root: impl Into<PathBuf>) -> Self {
        let proc: PathBuf = proc_root.into();
        let host = match proc.parent() {
            Some(p) if proc.file_name().is_some_and(|n| n == "proc") => p.to_path_buf(),
            _ => PathBuf::from("/"),
        };
        let sys = host.join("sys");
        Roots { proc, host, sys }
    }

    /// The same roots with sysfs somewhere else (`--sys-root`).
    pub fn with_sys(mut self, sys: impl Into<PathBuf>) -> Self {
        self.sys = sys.into();
        self
    }

    pub fn pid_dir(&self, pid: u32) -> PathBuf {
        self.proc.join(pid.to_string())
    }

    /// [`Roots::pid_dir`] for each pid in turn, in one buffer: a tick
    /// visits every watched process's directory, and each path made anew
    /// was two allocations or three.
    pub fn pid_dirs(&self) -> PidDirs {
        PidDirs {
            path: self.proc.clone(),
            pid_pushed: false,
            pid: String::with_capacity(10),
        }
    }

    /// A host path such as `/sys/fs/cgroup` seen under the host root.
    pub fn host_path(&self, abs: &str) -> PathBuf {
        self.host.join(abs.trim_start_matches('/'))
    }
}

/// Processes' directories, one at a time in one buffer ([`Roots::pid_dirs`]).
pub struct PidDirs {
    path: PathBuf,
    /// Whether `path` ends in a pid (pushed by the last [`PidDirs::of`]).
    pid_pushed: bool,
    /// The pid's digits.
    pid: String,
}

impl PidDirs {
    /// `pid`'s directory, as [`Roots::pid_dir`] gives it.
    pub fn of(&mut self, pid: u32) -> &Path {
        if std::mem::replace(&mut self.pid_pushed, true) {
            self.path.pop();
        }
        self.pid.clear();
        crate::model::addr::push_decimal(&mut self.pid, pid);
        self.path.push(&self.pid);
        &self.path
    }
}

impl Default for Roots {
    fn default() -> Self {
        Roots::new("/proc")
    }
}

/// A path as a watched process names it, reached from outside its mount
/// namespace: an absolute one under `/proc/<pid>/root`, a relative one
/// under its working directory (`/proc/<pid>/cwd`).
pub fn in_process_fs(pid_dir: &Path, path: &str) -> PathBuf {
    match path.strip_prefix('/') {
        Some(abs) => pid_dir.join("root").join(abs.trim_start_matches('/')),
        None => pid_dir.join("cwd").join(path),
    }
}

/// Reads a small file into a string; a missing file is `None`, not an error,
/// since processes and kernel features come and go.
pub fn read_opt(path: &Path) -> Option<String> {
    read_small(path).ok()
}

/// A procfs or sysfs file's whole text in one `read()` (and the one that
/// says the end) for files under 4 KB: `std::fs::read_to_string` first
/// asks the size (statx: 0 for these files) and then grows its buffer from
/// 32 bytes, a `read()` per doubling (8 of them for a `status`).
pub fn read_small(path: &Path) -> std::io::Result<String> {
    kept::read_from_start(&std::fs::File::open(path)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_pid_dir_from_the_one_buffer_is_the_one_made_anew() {
        for root in ["/proc", "/host/proc/", "proc"] {
            let roots = Roots::new(root);
            let mut dirs = roots.pid_dirs();
            for pid in [1, 4_194_304, 0, 90, 7, u32::MAX] {
                assert_eq!(dirs.of(pid), roots.pid_dir(pid), "{root} {pid}");
            }
        }
    }

    #[test]
    fn a_small_read_gives_the_whole_file_or_why_not() {
        // A procfs file (its size says 0) and a file over the first 4 KB.
        let status = read_small(Path::new("/proc/self/status")).unwrap();
        assert!(status.starts_with("Name:") && status.contains("\nCpus_allowed_list:"));
        let d = tempfile::tempdir().unwrap();
        let big: String = (0..3000).map(|i| format!("{i}\n")).collect();
        std::fs::write(d.path().join("big"), &big).unwrap();
        assert_eq!(read_small(&d.path().join("big")).unwrap(), big);
        let gone = read_small(&d.path().join("gone")).unwrap_err();
        assert_eq!(gone.kind(), std::io::ErrorKind::NotFound);
        std::fs::write(d.path().join("bytes"), [0xff, 0xfe]).unwrap();
        assert_eq!(
            read_small(&d.path().join("bytes")).unwrap_err().kind(),
            std::io::ErrorKind::InvalidData
        );
    }
}
