//! Parser for /proc/<pid>/net/snmp and /proc/<pid>/net/netstat: pairs of
//! `Prefix: names...` / `Prefix: values...` lines. Kept generic so TcpExt
//! (which the procfs crate does not parse) and Tcp share one reader.

use std::collections::BTreeMap;

/// Returns `Prefix.Name -> value` for every numeric field in the file.
pub fn parse_pairs(text: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    let mut lines = text.lines();
    while let (Some(names), Some(values)) = (lines.next(), lines.next()) {
        let (Some((p1, names)), Some((p2, values))) =
            (names.split_once(':'), values.split_once(':'))
        else {
            break;
        };
        if p1 != p2 {
            break;
        }
        for (n, v) in names.split_whitespace().zip(values.split_whitespace()) {
            // Negative values (Tcp MaxConn is -1) are not counters: skip them.
            if let Ok(v) = v.parse::<u64>() {
                out.insert(format!("{p1}.{n}"), v);
            }
        }
    }
    out
}

/// The counters kitty keeps per network namespace.
pub const KEPT: &[&str] = &[
    "Tcp.RetransSegs",
    "Tcp.OutSegs",
    "Tcp.InSegs",
    "Tcp.InErrs",
    "Tcp.OutRsts",
    "Tcp.CurrEstab",
    "TcpExt.TCPTimeouts",
    "TcpExt.TCPLostRetransmit",
    "TcpExt.TCPFastRetrans",
    "TcpExt.ListenOverflows",
    "TcpExt.TCPSlowStartRetrans",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_captured_snmp_and_netstat() {
        let snmp = parse_pairs(include_str!("../../tests/fixtures/proc/net_snmp"));
        assert!(snmp.contains_key("Tcp.RetransSegs"));
        assert!(snmp["Tcp.OutSegs"] > 0);
        assert!(snmp.contains_key("Udp.InDatagrams"));
        assert!(
            !snmp.contains_key("Tcp.MaxConn"),
            "negative values are skipped"
        );
        let netstat = parse_pairs(include_str!("../../tests/fixtures/proc/net_netstat"));
        assert!(netstat.contains_key("TcpExt.TCPTimeouts"));
        assert!(netstat.contains_key("IpExt.InOctets"));
    }

    #[test]
    fn odd_input_gives_what_it_can() {
        assert!(parse_pairs("").is_empty());
        assert!(parse_pairs("Tcp: A B\n").is_empty());
        let m = parse_pairs("Tcp: A B C\nTcp: 1 2\n");
        assert_eq!(
            m.len(),
            2,
            "fewer values than names (older kernel layout) keeps the pairs it has"
        );
    }
}
