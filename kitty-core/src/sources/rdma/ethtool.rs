//! A netdev's driver statistics (`ethtool -S`) over the SIOCETHTOOL ioctl,
//! filtered to the pause counters RoCE congestion shows in: per-priority
//! PFC pause frames and durations (`rx_prio3_pause`, `tx_prio3_pause_duration`)
//! and the pause-storm events (mlx5's names). No crate wraps the three
//! ethtool string/stat calls without pulling in a netlink stack, and the
//! ioctl is three small calls. A netdev without statistics gives nothing.

use std::collections::BTreeMap;

const SIOCETHTOOL: libc::c_ulong = 0x8946;
const ETHTOOL_GSTRINGS: u32 = 0x1b;
const ETHTOOL_GSTATS: u32 = 0x1d;
const ETHTOOL_GSSET_INFO: u32 = 0x37;
const ETH_SS_STATS: u32 = 1;
const ETH_GSTRING_LEN: usize = 32;
/// A driver claiming more statistics than this is not believed.
const MAX_STATS: usize = 16_384;

#[repr(C)]
struct IfReq {
    name: [u8; libc::IFNAMSIZ],
    data: *mut libc::c_void,
    _pad: [u8; 16],
}

/// Every statistic of a netdev by name, from the current network namespace.
pub fn stats(netdev: &str) -> Option<BTreeMap<String, u64>> {
    if netdev.is_empty() || netdev.len() >= libc::IFNAMSIZ {
        return None;
    }
    // SAFETY: socket() has no memory preconditions; the fd is closed below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return None;
    }
    let out = read_all(fd, netdev);
    // SAFETY: fd is ours and open.
    unsafe { libc::close(fd) };
    out
}

/// The pause statistics of a netdev (see the module doc).
pub fn pause_stats(netdev: &str) -> BTreeMap<String, u64> {
    stats(netdev)
        .unwrap_or_default()
        .into_iter()
        .filter(|(k, _)| is_pause(k))
        .collect()
}

/// `rx_prio3_pause`, `tx_prio0_pause_duration`, `rx_pause_ctrl_phy`,
/// `tx_pause_storm_warning_events`...
pub fn is_pause(name: &str) -> bool {
    name.contains("pause")
}

fn ioctl(fd: i32, netdev: &str, data: *mut libc::c_void) -> bool {
    let mut req = IfReq {
        name: [0; libc::IFNAMSIZ],
        data,
        _pad: [0; 16],
    };
    req.name[..netdev.len()].copy_from_slice(netdev.as_bytes());
    // SAFETY: req is a valid ifreq whose data points at a buffer the
    // caller sized for the command.
    unsafe { libc::ioctl(fd, SIOCETHTOOL as _, &mut req) == 0 }
}

fn read_all(fd: i32, netdev: &str) -> Option<BTreeMap<String, u64>> {
    // struct ethtool_sset_info { u32 cmd; u32 reserved; u64 mask; u32 data[] }
    let mut info = [0u64; 3];
    info[0] = ETHTOOL_GSSET_INFO as u64;
    info[1] = 1 << ETH_SS_STATS;
    if !ioctl(fd, netdev, info.as_mut_ptr().cast()) || info[1] & (1 << ETH_SS_STATS) == 0 {
        return None;
    }
    let n = (info[2] & 0xffff_ffff) as usize;
    if n == 0 || n > MAX_STATS {
        return None;
    }
    // struct ethtool_gstrings { u32 cmd; u32 string_set; u32 len; u8 data[] }
    let mut strings = vec![0u8; 12 + n * ETH_GSTRING_LEN];
    strings[0..4].copy_from_slice(&ETHTOOL_GSTRINGS.to_ne_bytes());
    strings[4..8].copy_from_slice(&ETH_SS_STATS.to_ne_bytes());
    strings[8..12].copy_from_slice(&(n as u32).to_ne_bytes());
    if !ioctl(fd, netdev, strings.as_mut_ptr().cast()) {
        return None;
    }
    // struct ethtool_stats { u32 cmd; u32 n_stats; u64 data[] }
    let mut values = vec![0u64; 1 + n];
    values[0] = ETHTOOL_GSTATS as u64 | ((n as u64) << 32);
    if !ioctl(fd, netdev, values.as_mut_ptr().cast()) {
        return None;
    }
    let mut out = BTreeMap::new();
    for i in 0..n {
        let raw = &strings[12 + i * ETH_GSTRING_LEN..12 + (i + 1) * ETH_GSTRING_LEN];
        let end = raw.iter().position(|b| *b == 0).unwrap_or(raw.len());
        let Ok(name) = std::str::from_utf8(&raw[..end]) else {
            continue;
        };
        let name = name.trim();
        if !name.is_empty() && name.bytes().all(|b| b.is_ascii_graphic()) {
            out.insert(name.to_string(), values[1 + i]);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn pause_names_are_picked() {
        for n in [
            "rx_prio3_pause",
            "tx_prio3_pause_duration",
            "rx_pause_ctrl_phy",
            "tx_pause_storm_warning_events",
        ] {
            assert!(is_pause(n), "{n}");
        }
        assert!(!is_pause("rx_bytes") && !is_pause("peer_ifindex"));
    }

    #[test]
    fn loopback_has_no_driver_statistics() {
        assert!(stats("lo").is_none_or(|s| s.is_empty()));
        assert!(pause_stats("no-such-dev0").is_empty());
        assert!(stats("an-overlong-interface-name").is_none());
    }

    /// A real veth pair: its driver statistics name the peer's ifindex.
    #[test]
    fn reads_a_veth_pairs_statistics() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: creating a veth pair needs root");
            return;
        }
        let (a, b) = (format!("ktea{}", std::process::id() % 100_000), "ktpeer0");
        let b = format!("{b}{}", std::process::id() % 1000);
        let ok = Command::new("ip")
            .args(["link", "add", &a, "type", "veth", "peer", "name", &b])
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            eprintln!("skipped: `ip link add ... type veth` failed (no iproute2 or veth)");
            return;
        }
        let s = stats(&a);
        let peer = std::fs::read_to_string(format!("/sys/class/net/{b}/ifindex"));
        let _ = Command::new("ip").args(["link", "del", &a]).status();
        let s = s.expect("veth has driver statistics");
        let peer: u64 = peer.unwrap().trim().parse().unwrap();
        assert_eq!(s.get("peer_ifindex"), Some(&peer), "{s:?}");
    }
}
