//! RDMA ports (InfiniBand, RoCE, EFA) from sysfs, in the layout the kernel
//! documents (Documentation/ABI/stable/sysfs-class-infiniband):
//! `class/infiniband/<dev>/ports/<n>/{state,phys_state,rate,link_layer}`,
//! the port's `counters/` and `hw_counters/`, the device's `hw_counters/`,
//! and which uverbs character device belongs to which device
//! (`class/infiniband_verbs/uverbs<N>/ibdev`). A counter a device lacks is
//! absent, never zero. RoCE pause counters come from the port's netdev
//! (`ethtool`), see [`ethtool`]; which process owns which queue pair from
//! RDMA netlink, see [`netlink`].

pub mod ethtool;
pub mod hca;
pub mod netlink;
pub mod standin;

use std::collections::BTreeMap;
use std::path::Path;

/// Counters read per port, at most (a crafted tree cannot make a tick slow).
const MAX_COUNTERS: usize = 256;
/// Devices and ports read at most.
const MAX_DEVICES: usize = 64;
const MAX_PORTS: usize = 8;

/// One port of one RDMA device, raw.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PortSample {
    pub device: String,
    pub port: u32,
    /// Logical state: (code, name), e.g. (4, "ACTIVE").
    pub state: Option<(u32, String)>,
    /// Physical state: (code, name), e.g. (5, "LinkUp").
    pub phys_state: Option<(u32, String)>,
    /// Signalling rate in Gb/s and lane count ("200 Gb/sec (4X HDR)").
    pub rate_gbps: Option<f64>,
    pub width: Option<u32>,
    /// "InfiniBand" or "Ethernet" (RoCE); EFA ports say "Unspecified".
    pub link_layer: Option<String>,
    /// The netdev of a RoCE port (its pause counters live there).
    pub netdev: Option<String>,
    /// The NUMA node of the device's PCI function.
    pub numa_node: Option<u32>,
    /// Counter name -> value: `counters/`, the port's `hw_counters/`, the
    /// device's `hw_counters/` (as `dev.<name>`), and ethtool pause
    /// statistics of the netdev (as `eth.<name>`).
    pub counters: BTreeMap<String, u64>,
}

impl PortSample {
    /// `mlx5_0/1`: how kitty names a port everywhere.
    pub fn id(&self) -> String {
        format!("{}/{}", self.device, self.port)
    }
}

/// Every port of every RDMA device under `sys` (`/sys`, or `--sys-root`).
/// `pause` reads a netdev's pause statistics (ethtool on a live node;
/// nothing for a stand-in tree). None when the kernel has no RDMA class.
pub fn read_ports(
    sys: &Path,
    pause: &mut dyn FnMut(&str) -> BTreeMap<String, u64>,
) -> Option<Vec<PortSample>> {
    let class = sys.join("class/infiniband");
    let mut devices: Vec<String> = std::fs::read_dir(&class)
        .ok()?
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| safe_name(n))
        .collect();
    devices.sort();
    devices.truncate(MAX_DEVICES);
    let mut out = Vec::new();
    for dev in devices {
        let ddir = class.join(&dev);
        let numa_node = read_trim(&ddir.join("device/numa_node"))
            .and_then(|s| s.parse::<i64>().ok())
            .and_then(|n| u32::try_from(n).ok());
        let dev_hw = read_counters(&ddir.join("hw_counters"));
        let Ok(ports) = std::fs::read_dir(ddir.join("ports")) else {
            continue;
        };
        let mut nums: Vec<u32> = ports
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .collect();
        nums.sort_unstable();
        nums.truncate(MAX_PORTS);
        for port in nums {
            let pdir = ddir.join("ports").join(port.to_string());
            let mut counters = read_counters(&pdir.join("counters"));
            counters.extend(read_counters(&pdir.join("hw_counters")));
            for (k, v) in &dev_hw {
                counters.insert(format!("dev.{k}"), *v);
            }
            let netdev = netdev_of(&ddir, &pdir);
            if let Some(nd) = &netdev {
                for (k, v) in pause(nd) {
                    counters.insert(format!("eth.{k}"), v);
                }
            }
            let (rate_gbps, width) = read_trim(&pdir.join("rate"))
                .map(|r| parse_rate(&r))
                .unwrap_or((None, None));
            out.push(PortSample {
                device: dev.clone(),
                port,
                state: read_trim(&pdir.join("state")).and_then(|s| parse_coded(&s)),
                phys_state: read_trim(&pdir.join("phys_state")).and_then(|s| parse_coded(&s)),
                rate_gbps,
                width,
                link_layer: read_trim(&pdir.join("link_layer")),
                netdev,
                numa_node,
                counters,
            });
        }
    }
    Some(out)
}

/// uverbs character device number -> RDMA device (`uverbs0` -> `mlx5_0`).
pub fn uverbs_devices(sys: &Path) -> BTreeMap<u32, String> {
    let mut m = BTreeMap::new();
    let Ok(rd) = std::fs::read_dir(sys.join("class/infiniband_verbs")) else {
        return m;
    };
    for e in rd.flatten().take(MAX_DEVICES) {
        let name = e.file_name();
        let Some(n) = name
            .to_str()
            .and_then(|n| n.strip_prefix("uverbs"))
            .and_then(|n| n.parse().ok())
        else {
            continue;
        };
        if let Some(dev) = read_trim(&e.path().join("ibdev")).filter(|d| safe_name(d)) {
            m.insert(n, dev);
        }
    }
    m
}

/// The uverbs number of an fd link target (`/dev/infiniband/uverbs3` -> 3).
pub fn uverbs_of_link(target: &str) -> Option<u32> {
    let (dir, file) = target.rsplit_once('/')?;
    if !dir.ends_with("/infiniband") {
        return None;
    }
    file.strip_prefix("uverbs")?.parse().ok()
}

/// `4: ACTIVE` -> (4, "ACTIVE").
fn parse_coded(s: &str) -> Option<(u32, String)> {
    let (code, name) = s.split_once(':')?;
    Some((code.trim().parse().ok()?, name.trim().to_string()))
}

/// `200 Gb/sec (4X HDR)` -> (200.0, 4); `25 Gb/sec (1X EDR)`; `2.5 Gb/sec (1X SDR)`.
pub fn parse_rate(s: &str) -> (Option<f64>, Option<u32>) {
    let rate = s
        .split_whitespace()
        .next()
        .and_then(|n| n.parse::<f64>().ok())
        .filter(|r| r.is_finite() && *r >= 0.0);
    let width = s
        .split_once('(')
        .and_then(|(_, w)| w.split(['X', 'x']).next())
        .and_then(|w| w.trim().parse().ok());
    (rate, width)
}

/// Every counter file of a directory that holds one decimal number.
fn read_counters(dir: &Path) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return m;
    };
    for e in rd.flatten().take(MAX_COUNTERS) {
        let Some(name) = e.file_name().to_str().map(str::to_string) else {
            continue;
        };
        // `lifespan` is the driver's caching period, not a counter.
        if !safe_name(&name) || name == "lifespan" {
            continue;
        }
        if let Some(v) = read_trim(&e.path()).and_then(|s| s.parse().ok()) {
            m.insert(name, v);
        }
    }
    m
}

/// The netdev a RoCE port runs over: `gid_attrs/ndevs/0`, else the only
/// entry of the PCI function's `net/`.
fn netdev_of(ddir: &Path, pdir: &Path) -> Option<String> {
    if let Some(n) = read_trim(&pdir.join("gid_attrs/ndevs/0")).filter(|n| safe_name(n)) {
        return Some(n);
    }
    let mut names: Vec<String> = std::fs::read_dir(ddir.join("device/net"))
        .ok()?
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| safe_name(n))
        .collect();
    names.sort();
    (names.len() == 1).then(|| names.remove(0))
}

/// Device, counter and netdev names kitty accepts from sysfs: short, and
/// only characters such names use (a crafted tree gets no further).
fn safe_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 64
        && n.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
        && !n.starts_with('.')
}

/// A small sysfs file, trimmed (at most 4 KiB read).
fn read_trim(p: &Path) -> Option<String> {
    use std::io::Read;
    let mut s = String::new();
    std::fs::File::open(p)
        .ok()?
        .take(4096)
        .read_to_string(&mut s)
        .ok()?;
    let t = s.trim();
    (!t.is_empty()).then(|| t.to_string())
}

#[cfg(test)]
mod tests;
