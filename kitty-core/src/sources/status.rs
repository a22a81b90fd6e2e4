//! The few fields of /proc/<pid>/status a tick needs (NSpid, VmRSS, the
//! context switches, Cpus_allowed_list), scanned line by line. procfs's
//! `Status` parses all ~55 fields into a map first: measured with
//! `kitty-tui profile` on a running `record`, that was half of the user
//! time spent reading processes. The captured fixture is parsed both ways
//! in the tests.

/// What kitty takes from a status file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StatusFields {
    /// NSpid's last field: the pid in the process's own namespace.
    pub own_pid: Option<u32>,
    pub vmrss_kb: Option<u64>,
    pub voluntary_ctxt_switches: Option<u64>,
    pub nonvoluntary_ctxt_switches: Option<u64>,
    /// Cpus_allowed_list as inclusive ranges.
    pub cpus_allowed_list: Option<Vec<(u32, u32)>>,
}

/// Reads and scans `<dir>/status`.
pub fn read_status(dir: &std::path::Path) -> std::io::Result<StatusFields> {
    super::read_small(&dir.join("status")).map(|t| parse_status(&t))
}

pub fn parse_status(text: &str) -> StatusFields {
    let mut f = StatusFields::default();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match key {
            "NSpid" => f.own_pid = value.split_whitespace().last().and_then(|p| p.parse().ok()),
            "VmRSS" => f.vmrss_kb = value.strip_suffix("kB").and_then(|v| v.trim().parse().ok()),
            "voluntary_ctxt_switches" => f.voluntary_ctxt_switches = value.parse().ok(),
            "nonvoluntary_ctxt_switches" => f.nonvoluntary_ctxt_switches = value.parse().ok(),
            "Cpus_allowed_list" => f.cpus_allowed_list = parse_cpu_list(value),
            _ => {}
        }
    }
    f
}

/// A kernel CPU list (`0-3,8,10-11`, `3`, empty) as inclusive ranges (None
/// if any part is not a number): Cpus_allowed_list, and the NUMA nodes'
/// `cpulist`.
pub fn parse_cpu_list(s: &str) -> Option<Vec<(u32, u32)>> {
    s.split(',')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('-') {
            Some((a, b)) => Some((a.trim().parse().ok()?, b.trim().parse().ok()?)),
            None => {
                let c = p.trim().parse().ok()?;
                Some((c, c))
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use procfs::FromRead;

    #[test]
    fn the_captured_file_gives_what_procfs_gives() {
        let text = include_str!("../../tests/fixtures/proc/status");
        let ours = parse_status(text);
        let theirs = procfs::process::Status::from_read(text.as_bytes()).unwrap();
        assert_eq!(
            ours.own_pid,
            theirs.nspid.and_then(|n| n.last().map(|p| *p as u32))
        );
        assert_eq!(ours.vmrss_kb, theirs.vmrss);
        assert_eq!(ours.voluntary_ctxt_switches, theirs.voluntary_ctxt_switches);
        assert_eq!(
            ours.nonvoluntary_ctxt_switches,
            theirs.nonvoluntary_ctxt_switches
        );
        assert_eq!(ours.cpus_allowed_list, theirs.cpus_allowed_list);
        assert_eq!(ours.own_pid, Some(4420));
        assert_eq!(ours.vmrss_kb, Some(14532));
    }

    #[test]
    fn this_process_parses_like_procfs_does() {
        let text = std::fs::read_to_string("/proc/self/status").unwrap();
        let ours = parse_status(&text);
        let theirs = procfs::process::Status::from_read(text.as_bytes()).unwrap();
        assert_eq!(ours.cpus_allowed_list, theirs.cpus_allowed_list);
        assert_eq!(ours.voluntary_ctxt_switches, theirs.voluntary_ctxt_switches);
        assert!(ours.vmrss_kb.is_some());
    }

    #[test]
    fn cpu_lists_and_damaged_lines() {
        assert_eq!(
            parse_cpu_list("0-3,8,10-11"),
            Some(vec![(0, 3), (8, 8), (10, 11)])
        );
        assert_eq!(parse_cpu_list("x"), None);
        let f = parse_status("VmRSS: lots\nvoluntary_ctxt_switches:\nnot a line\n");
        assert_eq!(f, StatusFields::default());
    }
}
