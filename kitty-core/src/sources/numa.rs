//! NUMA locality from sysfs (the kernel's documented layout): which CPUs
//! each NUMA node has (`devices/system/node/node<N>/cpulist`), and the node
//! of a PCI device (`bus/pci/devices/<addr>/numa_node`), a network
//! interface (`class/net/<if>/device/numa_node`) or an RDMA device
//! (`class/infiniband/<dev>/device/numa_node`). A rank whose CPUs are on
//! another node than its GPU or NIC pays a cross-socket hop on every copy.
//! A device the kernel gives no node (`-1`, a VM, one socket) has none.

use super::status::parse_cpu_list;
use crate::model::{NumaNode, Text};
use std::path::Path;

/// The NUMA nodes and their CPUs (empty when sysfs has no node directory).
pub fn nodes(sys: &Path) -> Vec<NumaNode> {
    let Ok(dir) = std::fs::read_dir(sys.join("devices/system/node")) else {
        return Vec::new();
    };
    let mut out: Vec<NumaNode> = dir
        .flatten()
        .filter_map(|e| {
            let name = e.file_name();
            let n: u32 = name.to_str()?.strip_prefix("node")?.parse().ok()?;
            let list = std::fs::read_to_string(e.path().join("cpulist")).ok()?;
            Some(NumaNode {
                node: n,
                cpus: parse_cpu_list(list.trim())?,
            })
        })
        .collect();
    out.sort_by_key(|n| n.node);
    out
}

fn node_file(p: &Path) -> Option<u32> {
    let v: i64 = std::fs::read_to_string(p).ok()?.trim().parse().ok()?;
    u32::try_from(v).ok()
}

/// The node of a PCI device by its address (NVML's `00000000:3B:00.0`
/// form is accepted: sysfs names it `0000:3b:00.0`).
pub fn pci_node(sys: &Path, bus_id: &str) -> Option<u32> {
    let id = bus_id.trim().to_ascii_lowercase();
    // NVML pads the domain to 8 digits; sysfs uses 4.
    let id = match id.split_once(':') {
        Some((dom, rest)) if dom.len() > 4 => format!("{}:{rest}", &dom[dom.len() - 4..]),
        _ => id,
    };
    if id.contains('/') || id.contains("..") {
        return None;
    }
    node_file(&sys.join("bus/pci/devices").join(id).join("numa_node"))
}

/// The NICs a rank's NCCL settings name, with their nodes: the interfaces
/// of `NCCL_SOCKET_IFNAME` and the RDMA devices of `NCCL_IB_HCA` (a
/// leading `^` excludes and names nothing; `=` means exact; `:port` is
/// dropped). Names that are not plain device names are ignored.
pub fn nic_nodes(sys: &Path, nccl: &[(String, String)]) -> Vec<(Text, u32)> {
    let mut out = Vec::new();
    for (key, class) in [("NCCL_SOCKET_IFNAME", "net"), ("NCCL_IB_HCA", "infiniband")] {
        let Some((_, v)) = nccl.iter().find(|(k, _)| k == key) else {
            continue;
        };
        if v.starts_with('^') {
            continue;
        }
        for name in v.trim_start_matches('=').split(',') {
            let name = name.split(':').next().unwrap_or("").trim();
            let plain = !name.is_empty()
                && name.len() <= 32
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c))
                && name != "."
                && name != "..";
            if !plain {
                continue;
            }
            let p = sys
                .join("class")
                .join(class)
                .join(name)
                .join("device/numa_node");
            if let Some(n) = node_file(&p) {
                out.push((Text::new(name), n));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A two-socket machine's sysfs, in the kernel's layout.
    fn tree() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        let w = |p: &str, v: &str| {
            let p = d.path().join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, v).unwrap();
        };
        w("devices/system/node/node0/cpulist", "0-15,32-47\n");
        w("devices/system/node/node1/cpulist", "16-31,48-63\n");
        w("devices/system/node/possible", "0-1\n");
        w("bus/pci/devices/0000:3b:00.0/numa_node", "0\n");
        w("bus/pci/devices/0000:d8:00.0/numa_node", "1\n");
        w("bus/pci/devices/0000:01:00.0/numa_node", "-1\n");
        w("class/net/ens1f0/device/numa_node", "1\n");
        w("class/infiniband/mlx5_0/device/numa_node", "0\n");
        w("class/infiniband/mlx5_1/device/numa_node", "1\n");
        d
    }

    #[test]
    fn nodes_devices_and_nccl_settings() {
        let d = tree();
        let n = nodes(d.path());
        assert_eq!(n.len(), 2);
        assert_eq!(n[1].cpus, vec![(16, 31), (48, 63)]);
        assert_eq!(pci_node(d.path(), "00000000:D8:00.0"), Some(1));
        assert_eq!(pci_node(d.path(), "0000:3b:00.0"), Some(0));
        assert_eq!(pci_node(d.path(), "0000:01:00.0"), None, "-1 is no node");
        assert_eq!(pci_node(d.path(), "../../etc"), None);
        let env = |k: &str, v: &str| vec![(k.to_string(), v.to_string())];
        assert_eq!(
            nic_nodes(d.path(), &env("NCCL_IB_HCA", "=mlx5_0:1,mlx5_1:1")),
            vec![(Text::new("mlx5_0"), 0), (Text::new("mlx5_1"), 1)]
        );
        assert_eq!(
            nic_nodes(d.path(), &env("NCCL_SOCKET_IFNAME", "ens1f0")),
            vec![(Text::new("ens1f0"), 1)]
        );
        assert!(nic_nodes(d.path(), &env("NCCL_SOCKET_IFNAME", "^docker,lo")).is_empty());
        assert!(nic_nodes(d.path(), &env("NCCL_IB_HCA", "../../x")).is_empty());
        assert!(nodes(&d.path().join("none")).is_empty());
    }

    #[test]
    fn this_machine_has_nodes_with_cpus() {
        // Every Linux with sysfs lists node0 at least (one socket or a VM).
        let n = nodes(Path::new("/sys"));
        if n.is_empty() {
            eprintln!("skip: /sys has no devices/system/node here");
            return;
        }
        assert!(n.iter().all(|x| !x.cpus.is_empty()), "{n:?}");
    }
}
