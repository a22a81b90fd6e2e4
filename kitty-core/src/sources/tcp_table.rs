//! /proc/<pid>/net/tcp{,6}: the per-namespace socket table, read through the
//! procfs crate. The fallback when sock_diag is unavailable.

use foldhash::HashMapExt;
use procfs::net::{TcpNetEntries, TcpState};
use procfs::FromBufReadSI;
use std::net::SocketAddr;
use std::path::Path;

/// A namespace's TCP sockets by inode. foldhash, as the tick's other
/// maps: they are filled every tick, and std's SipHash of their inodes was
/// most of its 0.9 % of `record`'s profile.
pub type SocketTable = foldhash::HashMap<u64, SocketRaw>;

/// One TCP socket as the kernel's tables describe it.
#[derive(Debug, Clone, PartialEq)]
pub struct SocketRaw {
    pub inode: u64,
    pub local: SocketAddr,
    pub remote: SocketAddr,
    pub state: &'static str,
    pub tx_queue: u64,
    pub rx_queue: u64,
    pub info: Option<crate::model::TcpInfo>,
}

pub fn state_name(code: u8) -> &'static str {
    match code {
        1 => "ESTABLISHED",
        2 => "SYN_SENT",
        3 => "SYN_RECV",
        4 => "FIN_WAIT1",
        5 => "FIN_WAIT2",
        6 => "TIME_WAIT",
        7 => "CLOSE",
        8 => "CLOSE_WAIT",
        9 => "LAST_ACK",
        10 => "LISTEN",
        11 => "CLOSING",
        12 => "NEW_SYN_RECV",
        _ => "UNKNOWN",
    }
}

fn state_of(s: &TcpState) -> &'static str {
    state_name(s.to_u8())
}

/// Parses one tcp or tcp6 table's text.
pub fn parse_table(text: &str) -> Vec<SocketRaw> {
    let Ok(entries) = TcpNetEntries::from_buf_read(text.as_bytes(), procfs::current_system_info())
    else {
        return Vec::new();
    };
    entries
        .0
        .into_iter()
        .map(|e| SocketRaw {
            inode: e.inode,
            local: e.local_address,
            remote: e.remote_address,
            state: state_of(&e.state),
            tx_queue: e.tx_queue as u64,
            rx_queue: e.rx_queue as u64,
            info: None,
        })
        .collect()
}

/// Both tables of the namespace a process lives in, keyed by inode.
pub fn read_tables(pid_dir: &Path) -> SocketTable {
    let mut out = SocketTable::new();
    for f in ["net/tcp", "net/tcp6"] {
        if let Ok(text) = super::read_small(&pid_dir.join(f)) {
            for s in parse_table(&text) {
                out.insert(s.inode, s);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn captured_v4_and_v6_tables() {
        let v4 = parse_table(include_str!("../../tests/fixtures/proc/net_tcp"));
        assert!(v4
            .iter()
            .any(|s| s.state == "ESTABLISHED" && s.local.ip().is_loopback()));
        let v6 = parse_table(include_str!("../../tests/fixtures/proc/net_tcp6"));
        assert!(v6
            .iter()
            .any(|s| s.local.is_ipv6() && s.state == "ESTABLISHED"));
        assert!(v6.iter().all(|s| s.inode > 0 || s.state != "ESTABLISHED"));
    }

    #[test]
    fn empty_and_garbage() {
        assert!(parse_table("").is_empty());
        let header_only = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n";
        assert!(parse_table(header_only).is_empty());
    }
}
