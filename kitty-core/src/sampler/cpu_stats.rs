//! Each watched cgroup's `cpu.stat` this tick, by the `/proc/<pid>/cgroup`
//! text that places a rank in it: the file found once per cgroup, read
//! once a tick however many ranks share it (a job's pod or slice).

use crate::sources::cgroup::{CgroupMounts, CgroupVersion};
use crate::sources::kept::{KeptFiles, Records};
use foldhash::HashMap;
use std::path::PathBuf;

struct CpuStat {
    /// The cgroup's `cpu.stat` and its hierarchy's version; None where no
    /// mounted hierarchy has the process's cgroup.
    file: Option<(PathBuf, CgroupVersion)>,
    /// Its text at `read_at`, when it could be read.
    text: Option<String>,
    read_at: u64,
}

#[derive(Default)]
pub(super) struct CpuStats(HashMap<String, CpuStat>);

impl CpuStats {
    /// Reads the `cpu.stat` of each cgroup named (once each); forgets the
    /// cgroups no longer named. `tick` differs from the last call's.
    pub fn read<'a>(
        &mut self,
        cgroups: impl Iterator<Item = &'a str>,
        mounts: &CgroupMounts,
        files: &mut KeptFiles,
        tick: u64,
    ) {
        let read = |file: &Option<(PathBuf, CgroupVersion)>, files: &mut KeptFiles| {
            file.as_ref().and_then(|(p, _)| files.read(p, Records::One))
        };
        for cgroup in cgroups {
            match self.0.get_mut(cgroup) {
                Some(stat) if stat.read_at == tick => {}
                Some(stat) => {
                    stat.text = read(&stat.file, files);
                    stat.read_at = tick;
                }
                None => {
                    let file = mounts.cpu_stat_path(cgroup);
                    let text = read(&file, files);
                    let stat = CpuStat {
                        file,
                        text,
                        read_at: tick,
                    };
                    self.0.insert(cgroup.to_string(), stat);
                }
            }
        }
        self.0.retain(|_, s| s.read_at == tick);
    }

    /// This tick's text of the `cpu.stat` of the cgroup `cgroup` names,
    /// and its version.
    pub fn get(&self, cgroup: &str) -> Option<(&str, CgroupVersion)> {
        let stat = self.0.get(cgroup)?;
        Some((stat.text.as_deref()?, stat.file.as_ref()?.1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_cgroup_is_read_once_and_a_gone_one_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        let v2 = dir.path();
        for (cg, throttled) in [("a", 1), ("b", 2)] {
            std::fs::create_dir(v2.join(cg)).unwrap();
            let text = format!("usage_usec 5\nthrottled_usec {throttled}\n");
            std::fs::write(v2.join(cg).join("cpu.stat"), text).unwrap();
        }
        let mounts = CgroupMounts {
            v2: Some(v2.to_path_buf()),
            ..CgroupMounts::default()
        };
        let mut files = KeptFiles::default();
        let mut stats = CpuStats::default();
        stats.read(
            ["0::/a\n", "0::/a\n", "0::/b\n"].into_iter(),
            &mounts,
            &mut files,
            1,
        );
        let (text, v) = stats.get("0::/b\n").unwrap();
        assert_eq!(
            (text, v),
            ("usage_usec 5\nthrottled_usec 2\n", CgroupVersion::V2)
        );
        assert_eq!(files.len(), 2, "one kept file a cgroup");
        std::fs::write(v2.join("a").join("cpu.stat"), "throttled_usec 9\n").unwrap();
        stats.read(["0::/a\n"].into_iter(), &mounts, &mut files, 2);
        assert_eq!(
            stats.get("0::/a\n").unwrap().0,
            "throttled_usec 9\n",
            "read again each tick"
        );
        assert_eq!(stats.get("0::/b\n"), None, "no rank names it now");
        stats.read(["0::/nowhere\n"].into_iter(), &mounts, &mut files, 3);
        assert_eq!(stats.get("0::/nowhere\n"), None, "no such cgroup: no text");
    }
}
