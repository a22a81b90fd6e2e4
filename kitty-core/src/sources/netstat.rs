//! Parser for /proc/<pid>/net/snmp and /proc/<pid>/net/netstat: pairs of
//! `Prefix: names...` / `Prefix: values...` lines. Kept generic so TcpExt
//! (which the procfs crate does not parse) and Tcp share one reader.

use std::collections::BTreeMap;

/// Returns `Prefix.Name -> value` for every numeric field in the file.
pub fn parse_pairs(text: &str) -> BTreeMap<String, u64> {
    parse_pairs_where(text, |_| true, |_, _| true)
}

/// The [`KEPT`] counters only: what a tick reads (naming every field of
/// both files, ~150, was most of a network namespace's cost per tick).
pub fn parse_kept(text: &str) -> BTreeMap<String, u64> {
    fn kept(prefix: &str) -> impl Iterator<Item = &'static str> + '_ {
        KEPT.iter()
            .filter_map(move |k| k.strip_prefix(prefix)?.strip_prefix('.'))
    }
    parse_pairs_where(
        text,
        // Whole line pairs (Ip, Icmp, Udp, IpExt, ...) are skipped unsplit.
        |prefix| kept(prefix).next().is_some(),
        |prefix, name| kept(prefix).any(|n| n == name),
    )
}

/// `Prefix.Name -> value` for the fields `keep(prefix, name)` accepts, in
/// the line pairs `wants(prefix)` accepts.
fn parse_pairs_where(
    text: &str,
    wants: impl Fn(&str) -> bool,
    keep: impl Fn(&str, &str) -> bool,
) -> BTreeMap<String, u64> {
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
        if !wants(p1) {
            continue;
        }
        for (n, v) in names.split_whitespace().zip(values.split_whitespace()) {
            if !keep(p1, n) {
                continue;
            }
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
    fn the_kept_counters_are_the_same_either_way() {
        let mut text = include_str!("../../tests/fixtures/proc/net_snmp").to_string();
        text.push_str(include_str!("../../tests/fixtures/proc/net_netstat"));
        let all = parse_pairs(&text);
        let kept = parse_kept(&text);
        assert_eq!(kept.len(), KEPT.len(), "{kept:?}");
        for (k, v) in &kept {
            assert_eq!(all.get(k), Some(v), "{k}");
        }
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
