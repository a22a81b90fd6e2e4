//! The node's name, as Kubernetes and the other exporters call it:
//! `NODE_NAME` when set (the downward API in kitty's DaemonSet), else the
//! host's name. In a container with its own UTS namespace the host name
//! seen by kitty is the pod's, so kitty reads the name of the UTS namespace
//! of the host's init process (`<proc>/1/ns/uts`) from a short-lived thread
//! that joins it (root with CAP_SYS_ADMIN); without that, its own. And the
//! running kernel's release (shared by every container on the node).

use std::path::Path;

/// This node's name (see the module).
pub fn node_name(proc_root: &Path) -> String {
    if let Some(n) = std::env::var("NODE_NAME")
        .ok()
        .map(|n| n.trim().to_string())
        .filter(|n| !n.is_empty())
    {
        return n;
    }
    host_uts_name(proc_root)
        .or_else(|| {
            std::fs::read_to_string(proc_root.join("sys/kernel/hostname"))
                .ok()
                .map(|s| s.trim().to_string())
        })
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

/// The running kernel's release (`uname -r`), sanitised; None if unreadable.
pub fn kernel_release() -> Option<crate::model::Text> {
    let s = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    Some(s.trim())
        .filter(|s| !s.is_empty())
        .map(crate::model::Text::new)
}

/// The host name of init's UTS namespace, when it is not ours.
fn host_uts_name(proc_root: &Path) -> Option<String> {
    let theirs = std::fs::read_link(proc_root.join("1/ns/uts")).ok()?;
    let ours = std::fs::read_link("/proc/self/ns/uts").ok()?;
    if theirs == ours {
        return None;
    }
    let file = std::fs::File::open(proc_root.join("1/ns/uts")).ok()?;
    // setns changes the calling thread only: a thread of its own joins the
    // namespace, reads the name and ends.
    std::thread::spawn(move || {
        use std::os::fd::AsRawFd;
        // SAFETY: setns on an fd we own; only this thread changes namespace.
        if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWUTS) } != 0 {
            return None;
        }
        // SAFETY: uname fills the struct we own.
        let mut u: libc::utsname = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        if unsafe { libc::uname(&mut u) } != 0 {
            return None;
        }
        let bytes: Vec<u8> = u
            .nodename
            .iter()
            .take_while(|c| **c != 0)
            .map(|c| *c as u8)
            .collect();
        Some(crate::model::Text::from_bytes(&bytes).to_string())
    })
    .join()
    .ok()
    .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_name_prefers_the_downward_api_and_else_names_the_host() {
        // Our own UTS namespace here: the host name is the kernel's.
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
        let got = node_name(Path::new("/proc"));
        match std::env::var("NODE_NAME") {
            Ok(n) if !n.trim().is_empty() => assert_eq!(got, n.trim()),
            _ => assert_eq!(got, host.trim()),
        }
    }
}
