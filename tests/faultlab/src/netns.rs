//! Named network namespaces (as `ip netns` makes them) and running code
//! inside one from a thread of this process.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::PathBuf;

pub fn path(name: &str) -> PathBuf {
    PathBuf::from("/run/netns").join(name)
}

pub fn add(name: &str) -> io::Result<()> {
    super::ip(&["netns", "add", name])
}

pub fn del(name: &str) {
    let _ = super::ip(&["netns", "del", name]);
}

/// Removes namespaces of labs whose process is gone (a test killed with -9).
pub fn remove_stale() {
    let Ok(dir) = std::fs::read_dir("/run/netns") else {
        return;
    };
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix("kl") else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            del(&name);
        }
    }
}

/// Runs `f` on a new thread that has joined the namespace behind `ns`
/// (setns affects only the calling thread), and returns its result.
pub fn in_netns<T: Send + 'static>(
    ns: File,
    f: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    std::thread::spawn(move || {
        // SAFETY: setns on a namespace fd; affects only this thread.
        if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(io::Error::last_os_error());
        }
        f()
    })
    .join()
    .map_err(|_| io::Error::other("namespace thread panicked"))?
}
