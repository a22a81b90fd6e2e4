//! The flow map read in one batch lookup a tick holds what the per-entry
//! walk (two bpf() calls an entry) reads, on live traffic; each socket's
//! endpoints, written by the kernel at its first byte, are its own.
mod support;
use kitty_probe_ebpf::flow::FlowProbe;
use std::io::{Read, Write};
use std::net::TcpStream;

/// A loopback connection that has carried `bytes` each way, request and
/// echo in 64 KB turns, then left idle.
fn talk(client: &mut TcpStream, server: &mut TcpStream, bytes: usize) {
    let chunk = vec![7u8; 64 << 10];
    let mut back = vec![0u8; 64 << 10];
    for _ in 0..bytes / chunk.len() {
        client.write_all(&chunk).unwrap();
        server.read_exact(&mut back).unwrap();
        server.write_all(&back).unwrap();
        client.read_exact(&mut back).unwrap();
    }
}

#[test]
fn the_flow_map_by_batch_is_the_flow_map_by_lookups() {
    if !support::can_load_bpf() {
        return;
    }
    let mut probe = FlowProbe::start().expect("the flow probe attaches here");
    if probe.entries_by_batch().is_none() {
        // Batch lookups on per-CPU hash maps came with Linux 5.6.
        eprintln!("skipped: {}", probe.strategy());
        return;
    }
    let (mut c, mut s) = support::loopback_pair();
    talk(&mut c, &mut s, 4 << 20);
    // More flows than the batch buffers' first room (64 entries): the
    // read grows them and goes on where it was.
    let mut others: Vec<(TcpStream, TcpStream)> =
        (0..40).map(|_| support::loopback_pair()).collect();
    for (a, b) in &mut others {
        a.write_all(b"ping").unwrap();
        b.read_exact(&mut [0u8; 4]).unwrap();
    }
    let mut ports: Vec<u16> = others
        .iter()
        .flat_map(|(a, b)| {
            [
                a.local_addr().unwrap().port(),
                b.local_addr().unwrap().port(),
            ]
        })
        .collect();
    let me = std::process::id();
    let (cport, sport) = (
        c.local_addr().unwrap().port(),
        s.local_addr().unwrap().port(),
    );
    ports.extend([cport, sport]);
    let (by_batch, by_lookups) = (
        probe.entries_by_batch().unwrap(),
        probe.entries_by_lookups(),
    );
    // This test's connections only: other tests of this process may be
    // talking meanwhile. Each by its endpoints, as the kernel wrote them.
    let ends = |k: &kitty_probe_ebpf::flow::FlowKey| {
        probe
            .ends_of(k.cookie)
            .unwrap_or_else(|| panic!("no endpoints for {k:?}"))
    };
    let mine = |v: Vec<(
        kitty_probe_ebpf::flow::FlowKey,
        kitty_probe_ebpf::flow::FlowBytes,
    )>| {
        let mut v: Vec<_> = v
            .into_iter()
            .filter(|(k, _)| k.tgid == me)
            .map(|(k, b)| (ends(&k), b))
            .filter(|(e, _)| ports.contains(&e.lport))
            .map(|(e, b)| (e.local(), e.remote(), b.tx, b.rx))
            .collect();
        v.sort();
        v
    };
    let batch = mine(by_batch);
    let lookups = mine(by_lookups);
    eprintln!("{}: {} flows of this test", probe.strategy(), batch.len());
    // Idle now: the same bytes both ways, every end of every connection.
    assert_eq!(batch, lookups);
    assert_eq!(batch.len(), 82, "{batch:?}");
    for (me, peer) in [(&c, &s), (&s, &c)] {
        let (local, remote) = (me.local_addr().unwrap(), me.peer_addr().unwrap());
        let (_, far, tx, rx) = *batch
            .iter()
            .find(|f| f.0 == local)
            .unwrap_or_else(|| panic!("the end at {local} in {batch:?}"));
        assert_eq!(far, remote, "its peer");
        assert_eq!(far, peer.local_addr().unwrap());
        assert!(tx >= 4 << 20 && rx >= 4 << 20, "4 MB each way: {tx} {rx}");
    }
    // Every one of the 41 connections' two ends, each pointing at the other.
    for (local, remote, _, _) in &batch {
        assert!(
            batch.iter().any(|f| f.0 == *remote && f.1 == *local),
            "{local} -> {remote} has no other end in {batch:?}"
        );
    }
}
