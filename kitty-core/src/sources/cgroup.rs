//! CFS throttling of a process's cgroup: v1 `cpu.stat` throttled_time (ns)
//! or v2 `cpu.stat` throttled_usec, found through the mount table.

use super::Roots;
use std::path::PathBuf;

/// Where the cpu controller lives: a v1 hierarchy with `cpu` among its
/// options, and/or a v2 (cgroup2) mount.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CgroupMounts {
    pub v1_cpu: Option<PathBuf>,
    /// The v1 cpuacct hierarchy (often the same mount as cpu).
    pub v1_cpuacct: Option<PathBuf>,
    pub v2: Option<PathBuf>,
}

impl CgroupMounts {
    /// Reads the host's mount table (`<proc>/1/mountinfo`, else `<proc>/self/mountinfo`).
    pub fn load(roots: &Roots) -> Self {
        let text = super::read_opt(&roots.proc.join("1/mountinfo"))
            .or_else(|| super::read_opt(&roots.proc.join("self/mountinfo")))
            .unwrap_or_default();
        let mut m = Self::parse(&text);
        m.v1_cpu = m.v1_cpu.map(|p| roots.host_path(p.to_str().unwrap_or("/")));
        m.v1_cpuacct = m
            .v1_cpuacct
            .map(|p| roots.host_path(p.to_str().unwrap_or("/")));
        m.v2 = m.v2.map(|p| roots.host_path(p.to_str().unwrap_or("/")));
        m
    }

    pub fn parse(mountinfo: &str) -> Self {
        let mut m = CgroupMounts::default();
        for line in mountinfo.lines() {
            let Some((pre, post)) = line.split_once(" - ") else {
                continue;
            };
            let mount_point = pre.split_whitespace().nth(4).unwrap_or("");
            let mut post = post.split_whitespace();
            let fstype = post.next().unwrap_or("");
            let options = post.nth(1).unwrap_or("");
            match fstype {
                "cgroup2" if m.v2.is_none() => m.v2 = Some(PathBuf::from(mount_point)),
                "cgroup" => {
                    let has = |c: &str| options.split(',').any(|o| o == c);
                    if m.v1_cpu.is_none() && has("cpu") {
                        m.v1_cpu = Some(PathBuf::from(mount_point));
                    }
                    if m.v1_cpuacct.is_none() && has("cpuacct") {
                        m.v1_cpuacct = Some(PathBuf::from(mount_point));
                    }
                }
                _ => {}
            }
        }
        m
    }

    /// The process's cgroup directory of the cpu controller and its
    /// version (v1 preferred on hybrid hosts), and its path in the hierarchy.
    pub fn cpu_dir(&self, cgroup: &str) -> Option<(PathBuf, CgroupVersion, String)> {
        let (stat, v) = self.cpu_stat_path(cgroup)?;
        let dir = stat.parent()?.to_path_buf();
        let rel = match v {
            CgroupVersion::V1 => cgroup
                .lines()
                .find(|l| {
                    l.split(':')
                        .nth(1)
                        .is_some_and(|c| c.split(',').any(|c| c == "cpu"))
                })
                .and_then(|l| l.splitn(3, ':').nth(2)),
            CgroupVersion::V2 => cgroup.lines().find_map(|l| l.strip_prefix("0::")),
        }
        .unwrap_or("/")
        .to_string();
        Some((dir, v, rel))
    }

    /// The quota in CPUs of a cpu cgroup directory (None: no quota).
    pub fn quota_cpus(dir: &std::path::Path, v: CgroupVersion) -> Option<f64> {
        let read = |f: &str| super::read_small(&dir.join(f)).ok();
        match v {
            CgroupVersion::V2 => parse_cpu_max(&read("cpu.max")?),
            CgroupVersion::V1 => {
                let q: i64 = read("cpu.cfs_quota_us")?.trim().parse().ok()?;
                let p: i64 = read("cpu.cfs_period_us")?.trim().parse().ok()?;
                (q > 0 && p > 0).then(|| q as f64 / p as f64)
            }
        }
    }

    /// CPU time used by a cgroup, in ns (v2 from cpu.stat, v1 from cpuacct).
    pub fn usage_ns(&self, cgroup: &str, cpu_stat: &str, v: CgroupVersion) -> Option<u64> {
        match v {
            CgroupVersion::V2 => field(cpu_stat, "usage_usec").map(|u| u * 1000),
            CgroupVersion::V1 => {
                let root = self.v1_cpuacct.as_ref()?;
                let rel = cgroup.lines().find_map(|l| {
                    let mut p = l.splitn(3, ':');
                    let (_, c, path) = (p.next()?, p.next()?, p.next()?);
                    c.split(',').any(|c| c == "cpuacct").then_some(path)
                })?;
                std::fs::read_to_string(
                    root.join(rel.trim_start_matches('/')).join("cpuacct.usage"),
                )
                .ok()?
                .trim()
                .parse()
                .ok()
            }
        }
    }

    /// The cpu.stat file for a process, given its /proc/<pid>/cgroup text.
    /// v1 is preferred when the process has a v1 cpu line (hybrid hosts).
    pub fn cpu_stat_path(&self, cgroup: &str) -> Option<(PathBuf, CgroupVersion)> {
        for line in cgroup.lines() {
            let mut parts = line.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            if controllers.split(',').any(|c| c == "cpu") {
                if let Some(root) = &self.v1_cpu {
                    return Some((
                        root.join(path.trim_start_matches('/')).join("cpu.stat"),
                        CgroupVersion::V1,
                    ));
                }
            }
        }
        let v2_path = cgroup.lines().find_map(|l| l.strip_prefix("0::"))?;
        let root = self.v2.as_ref()?;
        let file = root.join(v2_path.trim_start_matches('/')).join("cpu.stat");
        Some((file, CgroupVersion::V2))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupVersion {
    V1,
    V2,
}

/// v2's `cpu.max`: `QUOTA PERIOD` or `max PERIOD`.
pub fn parse_cpu_max(text: &str) -> Option<f64> {
    let mut it = text.split_whitespace();
    let q: f64 = it.next()?.parse().ok()?;
    let p: f64 = it.next()?.parse().ok()?;
    (q > 0.0 && p > 0.0).then_some(q / p)
}

fn field(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok())?
    })
}

/// Throttled time in nanoseconds from a cpu.stat file's text.
pub fn parse_throttled_ns(text: &str, version: CgroupVersion) -> Option<u64> {
    let (key, scale) = match version {
        CgroupVersion::V1 => ("throttled_time", 1),
        CgroupVersion::V2 => ("throttled_usec", 1000),
    };
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse::<u64>().ok().map(|v| v * scale))?
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn captured_mountinfo_hybrid() {
        let m = CgroupMounts::parse(include_str!("../../tests/fixtures/proc/mountinfo"));
        assert_eq!(m.v1_cpu, Some(PathBuf::from("/sys/fs/cgroup/cpu")));
        assert_eq!(m.v2, Some(PathBuf::from("/sys/fs/cgroup/unified")));
        let (p, v) = m.cpu_stat_path("1:cpu:/kitty-test\n0::/\n").unwrap();
        assert_eq!(
            (p, v),
            (
                PathBuf::from("/sys/fs/cgroup/cpu/kitty-test/cpu.stat"),
                CgroupVersion::V1
            )
        );
    }

    #[test]
    fn pure_v2() {
        let m = CgroupMounts::parse(
            "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n",
        );
        let (p, v) = m.cpu_stat_path("0::/kubepods.slice/x.scope\n").unwrap();
        assert_eq!(
            (p, v),
            (
                PathBuf::from("/sys/fs/cgroup/kubepods.slice/x.scope/cpu.stat"),
                CgroupVersion::V2
            )
        );
        assert_eq!(m.cpu_stat_path(""), None);
    }

    #[test]
    fn quota_and_usage() {
        assert_eq!(parse_cpu_max("5000 100000\n"), Some(0.05));
        assert_eq!(parse_cpu_max("max 100000\n"), None);
        let m = CgroupMounts::parse(include_str!("../../tests/fixtures/proc/mountinfo"));
        assert!(m.v1_cpuacct.is_some(), "cpu,cpuacct co-mounted here");
        let v2 = "usage_usec 1500\nthrottled_usec 7\n";
        assert_eq!(
            m.usage_ns("0::/x\n", v2, CgroupVersion::V2),
            Some(1_500_000)
        );
    }

    #[test]
    fn throttled_both_versions() {
        let v1 = "nr_periods 10\nnr_throttled 4\nthrottled_time 123456\n";
        assert_eq!(parse_throttled_ns(v1, CgroupVersion::V1), Some(123_456));
        let v2 = "usage_usec 5\nnr_throttled 1\nthrottled_usec 7\n";
        assert_eq!(parse_throttled_ns(v2, CgroupVersion::V2), Some(7000));
        assert_eq!(
            parse_throttled_ns("usage_usec 5\n", CgroupVersion::V2),
            None
        );
    }
}
