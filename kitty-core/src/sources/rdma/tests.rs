//! The sysfs reader against a tree in the kernel's documented layout.

use super::standin::{Kind, Tree};
use super::*;
use std::collections::BTreeMap;

fn none(_: &str) -> BTreeMap<String, u64> {
    BTreeMap::new()
}

#[test]
fn reads_ports_counters_and_hw_counters() {
    let d = tempfile::tempdir().unwrap();
    let t = Tree::new(d.path());
    t.add_device("mlx5_0", Kind::Mlx5Roce, 1, "200 Gb/sec (4X HDR)", 1)
        .unwrap();
    t.add_device("efa_0", Kind::Efa, 1, "100 Gb/sec (4X EDR)", -1)
        .unwrap();
    t.set("mlx5_0", 1, "counters/port_xmit_wait", "123")
        .unwrap();
    t.set("mlx5_0", 1, "gid_attrs/ndevs/0", "eth2").unwrap();
    t.add_uverbs(3, "mlx5_0").unwrap();
    let ports = read_ports(d.path(), &mut none).unwrap();
    assert_eq!(ports.len(), 2);
    let efa = &ports[0];
    assert_eq!(efa.id(), "efa_0/1");
    assert_eq!(efa.numa_node, None, "numa_node -1 means none");
    assert!(efa.counters.contains_key("tx_bytes"));
    assert!(
        !efa.counters.contains_key("port_xmit_wait"),
        "EFA has no IB counters"
    );
    assert!(!efa.counters.contains_key("lifespan"), "not a counter");
    let m = &ports[1];
    assert_eq!(m.state, Some((4, "ACTIVE".into())));
    assert_eq!(m.phys_state, Some((5, "LinkUp".into())));
    assert_eq!((m.rate_gbps, m.width), (Some(200.0), Some(4)));
    assert_eq!(m.link_layer.as_deref(), Some("Ethernet"));
    assert_eq!(m.netdev.as_deref(), Some("eth2"));
    assert_eq!(m.numa_node, Some(1));
    assert_eq!(m.counters.get("port_xmit_wait"), Some(&123));
    assert_eq!(m.counters.get("np_cnp_sent"), Some(&0));
    assert_eq!(
        uverbs_devices(d.path()).get(&3).map(String::as_str),
        Some("mlx5_0")
    );
}

#[test]
fn no_rdma_class_is_none_and_odd_files_are_skipped() {
    let d = tempfile::tempdir().unwrap();
    assert!(read_ports(d.path(), &mut none).is_none());
    let t = Tree::new(d.path());
    t.add_device("mlx5_0", Kind::Plain, 1, "garbage", 0)
        .unwrap();
    t.set("mlx5_0", 1, "counters/port_rcv_errors", "-5")
        .unwrap();
    t.set("mlx5_0", 1, "counters/symbol_error", "not a number")
        .unwrap();
    t.set("mlx5_0", 1, "state", "ACTIVE").unwrap();
    std::fs::create_dir_all(d.path().join("class/infiniband/bad\u{1b}[2Jname/ports/1")).unwrap();
    let ports = read_ports(d.path(), &mut none).unwrap();
    assert_eq!(
        ports.len(),
        1,
        "a device name with control characters is not read"
    );
    let p = &ports[0];
    assert_eq!((p.rate_gbps, p.width, p.state.clone()), (None, None, None));
    assert!(!p.counters.contains_key("port_rcv_errors"));
    assert!(!p.counters.contains_key("symbol_error"));
    assert!(p.counters.contains_key("port_xmit_wait"));
    assert!(
        !p.counters.keys().any(|k| k.starts_with("dev.")),
        "no hw_counters"
    );
}

#[test]
fn rates_and_uverbs_links() {
    assert_eq!(parse_rate("25 Gb/sec (1X EDR)"), (Some(25.0), Some(1)));
    assert_eq!(parse_rate("2.5 Gb/sec (1X SDR)"), (Some(2.5), Some(1)));
    assert_eq!(parse_rate("400 Gb/sec (4X NDR)"), (Some(400.0), Some(4)));
    assert_eq!(uverbs_of_link("/dev/infiniband/uverbs12"), Some(12));
    assert_eq!(uverbs_of_link("/dev/infiniband/rdma_cm"), None);
    assert_eq!(uverbs_of_link("/tmp/uverbs1"), None);
}
