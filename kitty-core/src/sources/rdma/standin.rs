//! A stand-in sysfs tree for RDMA hardware this machine lacks, in the
//! kernel's documented layout (the same files a ConnectX or EFA device
//! shows), for tests and `scripts/`: devices, ports, their counters, and
//! uverbs nodes. kitty reads it through `--sys-root` exactly as it reads
//! /sys; only the hardware is stood in for.

use std::path::{Path, PathBuf};

/// What counters a stand-in device has.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    /// InfiniBand ConnectX: `counters/` and mlx5 `hw_counters/`.
    Mlx5Ib,
    /// RoCE ConnectX: the same, over Ethernet, with CNP/ECN counters.
    Mlx5Roce,
    /// A device with `counters/` only (no `hw_counters/`).
    Plain,
    /// AWS EFA: `hw_counters/` only.
    Efa,
}

pub const IB_COUNTERS: &[&str] = &[
    "port_xmit_wait",
    "port_xmit_discards",
    "port_rcv_errors",
    "symbol_error",
    "link_error_recovery",
    "link_downed",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
    "port_xmit_data",
    "port_rcv_data",
    "port_xmit_packets",
    "port_rcv_packets",
];

pub const MLX5_HW_COUNTERS: &[&str] = &[
    "out_of_sequence",
    "out_of_buffer",
    "local_ack_timeout_err",
    "rnr_nak_retry_err",
    "packet_seq_err",
    "np_cnp_sent",
    "rp_cnp_handled",
    "np_ecn_marked_roce_packets",
    "roce_adp_retrans",
];

pub const EFA_HW_COUNTERS: &[&str] = &[
    "tx_bytes",
    "rx_bytes",
    "tx_pkts",
    "rx_pkts",
    "rx_drops",
    "retrans_pkts",
    "retrans_timeout_events",
];

pub struct Tree {
    root: PathBuf,
}

impl Tree {
    /// A tree rooted at `root` (the `--sys-root`).
    pub fn new(root: impl Into<PathBuf>) -> Tree {
        Tree { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn port_dir(&self, dev: &str, port: u32) -> PathBuf {
        self.root
            .join("class/infiniband")
            .join(dev)
            .join("ports")
            .join(port.to_string())
    }

    /// Adds a device with `ports` ports, all ACTIVE / LinkUp at `rate`
    /// (e.g. `200 Gb/sec (4X HDR)`), every counter at 0, on `numa_node`.
    pub fn add_device(
        &self,
        dev: &str,
        kind: Kind,
        ports: u32,
        rate: &str,
        numa_node: i32,
    ) -> std::io::Result<()> {
        let ddir = self.root.join("class/infiniband").join(dev);
        write(&ddir.join("device/numa_node"), &numa_node.to_string())?;
        for p in 1..=ports {
            let pdir = self.port_dir(dev, p);
            write(&pdir.join("state"), "4: ACTIVE")?;
            write(&pdir.join("phys_state"), "5: LinkUp")?;
            write(&pdir.join("rate"), rate)?;
            let layer = match kind {
                Kind::Mlx5Roce => "Ethernet",
                Kind::Efa => "Unspecified",
                _ => "InfiniBand",
            };
            write(&pdir.join("link_layer"), layer)?;
            if kind != Kind::Efa {
                for c in IB_COUNTERS {
                    write(&pdir.join("counters").join(c), "0")?;
                }
            }
            let hw: &[&str] = match kind {
                Kind::Mlx5Ib | Kind::Mlx5Roce => MLX5_HW_COUNTERS,
                Kind::Efa => EFA_HW_COUNTERS,
                Kind::Plain => &[],
            };
            for c in hw {
                write(&pdir.join("hw_counters").join(c), "0")?;
            }
            if !hw.is_empty() {
                // The driver's caching period: not a counter.
                write(&pdir.join("hw_counters/lifespan"), "10")?;
            }
        }
        Ok(())
    }

    /// Sets a port file: `counters/port_xmit_wait`, `hw_counters/np_cnp_sent`,
    /// `state`, `rate`...
    pub fn set(&self, dev: &str, port: u32, file: &str, value: &str) -> std::io::Result<()> {
        write(&self.port_dir(dev, port).join(file), value)
    }

    /// Reads back a port counter (to advance it).
    pub fn get(&self, dev: &str, port: u32, file: &str) -> u64 {
        std::fs::read_to_string(self.port_dir(dev, port).join(file))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0)
    }

    /// Adds `by` to a port counter.
    pub fn bump(&self, dev: &str, port: u32, file: &str, by: u64) -> std::io::Result<()> {
        let v = self.get(dev, port, file).saturating_add(by);
        self.set(dev, port, file, &v.to_string())
    }

    /// `class/infiniband_verbs/uverbs<n>/ibdev` naming `dev`.
    pub fn add_uverbs(&self, n: u32, dev: &str) -> std::io::Result<()> {
        write(
            &self
                .root
                .join("class/infiniband_verbs")
                .join(format!("uverbs{n}"))
                .join("ibdev"),
            dev,
        )
    }
}

/// Writes by rename, so a reader never sees half a value (the temporary
/// file sits outside the counter directories, which readers list).
fn write(path: &Path, value: &str) -> std::io::Result<()> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d)?;
    }
    let tmp = std::env::temp_dir().join(format!(
        "kitty-standin-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::write(&tmp, format!("{value}\n"))?;
    // Across filesystems a rename fails: write in place then.
    if std::fs::rename(&tmp, path).is_err() {
        let _ = std::fs::remove_file(&tmp);
        std::fs::write(path, format!("{value}\n"))?;
    }
    Ok(())
}
