//! Files read every tick, kept open and read again from their start:
//! procfs and cgroupfs make a file's text anew on each read at offset 0,
//! so an open and a close per file per tick are saved (path lookups in
//! /proc: ~5 % of `record`'s CPU on the 8-rank ring before this).
//!
//! A kept file reads what it was opened on: `/proc/stat` is the same file
//! for good, a cgroup removed under its `cpu.stat` fails the read (then it
//! is opened again), and a file whose meaning depends on more than its
//! path (a process's network namespace) is kept under a key that says so.

use foldhash::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Open files by path (and a caller's key), and which were read since the
/// last [`KeptFiles::sweep`].
#[derive(Default)]
pub struct KeptFiles {
    /// By path, then key (nearly always one): found by the caller's `&Path`
    /// without a copy of it a read. foldhash, as the tick's other maps:
    /// several times cheaper a lookup than std's SipHash.
    files: HashMap<PathBuf, Vec<(u64, Kept)>>,
    /// Where each read lands before its text is copied out at its length
    /// (not a zeroed 4 KB buffer made, and kept as the text's capacity,
    /// every read).
    buf: Vec<u8>,
}

struct Kept {
    file: File,
    used: bool,
}

/// What the kernel makes a file's text of, which says how its end is
/// found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Records {
    /// One record (procfs's and cgroupfs's `single_open` files: `stat`,
    /// `loadavg`, `meminfo`, `pressure/*`, `net/snmp`, `net/netstat`,
    /// `cpu.stat`): the kernel makes the whole text before the first read
    /// and a read with room for it returns all of it, so a short read is
    /// the end, and the read that would return nothing is not made.
    One,
    /// Many (`net/dev`, one an interface): a read may stop short where the
    /// next record would not fit the kernel's page, so the end is the read
    /// that returns nothing.
    Many,
}

impl KeptFiles {
    /// The file's text now; None when it cannot be opened or read.
    pub fn read(&mut self, path: &Path, records: Records) -> Option<String> {
        self.read_keyed(path, 0, records)
    }

    /// The same, the open file kept under `key` as well as the path (a
    /// netns inode for `/proc/<pid>/net/...`: the file reads the namespace
    /// the process was in when it was opened).
    pub fn read_keyed(&mut self, path: &Path, key: u64, records: Records) -> Option<String> {
        if let Some(kept) = kept_in(&mut self.files, path, key) {
            kept.used = true;
            if let Ok(text) = text_from_start(&kept.file, &mut self.buf, records) {
                return Some(text);
            }
            // Gone under it (a removed cgroup, an exited process): open again.
            self.forget(path, key);
        }
        let file = File::open(path).ok()?;
        let text = text_from_start(&file, &mut self.buf, records).ok()?;
        let kept = Kept { file, used: true };
        self.files
            .entry(path.to_path_buf())
            .or_default()
            .push((key, kept));
        Some(text)
    }

    fn forget(&mut self, path: &Path, key: u64) {
        if let Some(keyed) = self.files.get_mut(path) {
            keyed.retain(|(k, _)| *k != key);
            if keyed.is_empty() {
                self.files.remove(path);
            }
        }
    }

    /// Closes the files not read since the last sweep (a namespace or a
    /// cgroup no rank is in now), so that open files follow what is read.
    pub fn sweep(&mut self) {
        for keyed in self.files.values_mut() {
            keyed.retain_mut(|(_, k)| std::mem::take(&mut k.used));
        }
        self.files.retain(|_, keyed| !keyed.is_empty());
    }

    /// How many files are open.
    pub fn len(&self) -> usize {
        self.files.values().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }
}

/// The file kept under `path` and `key`, if open.
fn kept_in<'a>(
    files: &'a mut HashMap<PathBuf, Vec<(u64, Kept)>>,
    path: &Path,
    key: u64,
) -> Option<&'a mut Kept> {
    let keyed = files.get_mut(path)?;
    keyed.iter_mut().find(|(k, _)| *k == key).map(|(_, f)| f)
}

/// A reading taken at most once a period and kept in between, its files
/// kept open through each sweep meanwhile: for numbers that change more
/// slowly than a tick, or that nothing needs every tick.
pub struct Every<T> {
    period_ns: u64,
    /// The last reading and when it was taken (monotonic ns).
    last: Option<(u64, T)>,
    /// The second reading is taken at the call after the first, whatever
    /// the period says (cleared once it is).
    second_soon: bool,
}

impl<T> Every<T> {
    pub const fn new(period_ns: u64) -> Self {
        Every {
            period_ns,
            last: None,
            second_soon: false,
        }
    }

    /// As [`Every::new`], the second reading taken at the call after the
    /// first: what is made of two readings (a utilization) comes a tick
    /// after the first, not a period after.
    pub const fn second_soon(period_ns: u64) -> Self {
        Every {
            period_ns,
            last: None,
            second_soon: true,
        }
    }

    /// The reading at `mono`: the last one while it is younger than the
    /// period (the files `keep` names stay open, unread), else a new one,
    /// `read` given the last reading and when it was taken.
    pub fn at<'k>(
        &mut self,
        mono: u64,
        files: &mut KeptFiles,
        keep: impl IntoIterator<Item = (&'k Path, u64)>,
        read: impl FnOnce(&mut KeptFiles, Option<(u64, T)>) -> T,
    ) -> &T {
        let second = self.second_soon && self.last.is_some();
        let (at, reading) = match self.last.take() {
            Some((at, last)) if !second && mono.saturating_sub(at) < self.period_ns => {
                for (path, key) in keep {
                    if let Some(kept) = kept_in(&mut files.files, path, key) {
                        kept.used = true;
                    }
                }
                (at, last)
            }
            last => {
                self.second_soon &= !second;
                (mono, read(files, last))
            }
        };
        &self.last.insert((at, reading)).1
    }
}

/// The whole file from offset 0 (positioned reads: the file's offset is
/// never moved, so every read starts the text over), into `buf`, which
/// grows from 4 KB by doubling when full and is kept for the next read:
/// for most procfs and sysfs files one `read()`, and for a file of many
/// records the one that says the end. Returns the text's length.
fn read_into(f: &File, buf: &mut Vec<u8>, records: Records) -> std::io::Result<usize> {
    if buf.len() < 4096 {
        buf.resize(4096, 0);
    }
    let mut len = 0;
    loop {
        if len == buf.len() {
            buf.resize(buf.len() * 2, 0);
        }
        let room = buf.len() - len;
        match f.read_at(&mut buf[len..], len as u64) {
            Ok(0) => return Ok(len),
            Ok(n) if n < room && records == Records::One => return Ok(len + n),
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// [`read_into`]'s text, copied out at its length.
fn text_from_start(f: &File, buf: &mut Vec<u8>, records: Records) -> std::io::Result<String> {
    let len = read_into(f, buf, records)?;
    std::str::from_utf8(&buf[..len])
        .map(str::to_owned)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// The whole file from offset 0 in a buffer of its own, read to the read
/// that returns nothing (see [`read_into`]).
pub(super) fn read_from_start(f: &File) -> std::io::Result<String> {
    text_from_start(f, &mut Vec::new(), Records::Many)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reading_is_taken_once_a_period_its_files_kept_open_between() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("count");
        let mut files = KeptFiles::default();
        let mut every = Every::new(2_000);
        let mut at = |files: &mut KeptFiles, mono| {
            let keep = [(path.as_path(), 0)];
            let r = every.at(mono, files, keep, |files, last| {
                let now: u64 = files
                    .read(&path, Records::One)
                    .unwrap()
                    .trim()
                    .parse()
                    .unwrap();
                (now, last.map(|(at, (n, _))| (mono - at, n)))
            });
            files.sweep();
            *r
        };
        std::fs::write(&path, "1").unwrap();
        assert_eq!(at(&mut files, 0), (1, None));
        std::fs::write(&path, "5").unwrap();
        assert_eq!(
            at(&mut files, 1_999),
            (1, None),
            "not due: the last reading"
        );
        assert_eq!(files.len(), 1, "its file kept open, unread");
        assert_eq!(
            at(&mut files, 2_500),
            (5, Some((2_500, 1))),
            "due: read, given the last"
        );
    }

    #[test]
    fn the_second_reading_can_come_at_the_next_call_then_once_a_period() {
        let mut files = KeptFiles::default();
        let mut every = Every::second_soon(2_000);
        let mut at = |mono| *every.at(mono, &mut files, [], |_, _| mono);
        assert_eq!(at(0), 0, "the first reading");
        assert_eq!(at(500), 500, "the second: the next call");
        assert_eq!(at(1_500), 500, "then a period");
        assert_eq!(at(2_000), 500);
        assert_eq!(at(2_500), 2_500);
    }

    #[test]
    fn a_kept_proc_file_reads_anew_each_time() {
        // Each sleep is a switch off the CPU and back: the thread's count
        // of runs (schedstat's third field) grows, so a kept file must not
        // give the first text again.
        let mut kept = KeptFiles::default();
        let path = Path::new("/proc/thread-self/schedstat");
        let first = kept.read(path, Records::One).expect("schedstat");
        assert_eq!(kept.len(), 1);
        let mut again = first.clone();
        for _ in 0..50 {
            std::thread::sleep(std::time::Duration::from_millis(1));
            again = kept.read(path, Records::One).expect("schedstat again");
            if again != first {
                break;
            }
        }
        assert_ne!(again, first, "a kept file re-read gave the same text");
        assert_eq!(kept.len(), 1, "read in place, not opened again");
        assert_eq!(
            std::fs::read_to_string(path).unwrap().split(' ').count(),
            again.split(' ').count()
        );
    }

    #[test]
    fn a_removed_cgroup_fails_its_read_and_a_new_one_is_opened_again() {
        // cgroupfs, as the sampler reads a rank's cpu.stat: v2, else v1's cpu.
        let base = ["/sys/fs/cgroup/cpu", "/sys/fs/cgroup"]
            .into_iter()
            .map(Path::new)
            .find(|b| b.join("cpu.stat").exists() || b.join("cgroup.procs").exists());
        let Some(base) = base else {
            eprintln!("skipped: no cgroup filesystem here");
            return;
        };
        let dir = base.join(format!("kitty-kept-{}", std::process::id()));
        if std::fs::create_dir(&dir).is_err() {
            eprintln!(
                "skipped: cannot make a cgroup under {} (not root?)",
                base.display()
            );
            return;
        }
        let file = ["cpu.stat", "cgroup.procs"]
            .into_iter()
            .map(|f| dir.join(f))
            .find(|f| f.exists())
            .expect("a cgroup has cgroup.procs");
        let mut kept = KeptFiles::default();
        assert!(kept.read(&file, Records::One).is_some());
        assert_eq!(kept.len(), 1);
        std::fs::remove_dir(&dir).unwrap();
        assert_eq!(
            kept.read(&file, Records::One),
            None,
            "a removed cgroup's file reads nothing"
        );
        assert_eq!(kept.len(), 0, "and is closed");
        std::fs::create_dir(&dir).unwrap();
        assert!(
            kept.read(&file, Records::One).is_some(),
            "the new cgroup is opened"
        );
        std::fs::remove_dir(&dir).unwrap();
    }

    #[test]
    fn keys_keep_two_opens_apart_and_unused_files_close() {
        let mut kept = KeptFiles::default();
        let (a, b) = (Path::new("/proc/self/stat"), Path::new("/proc/loadavg"));
        assert!(kept.read(a, Records::One).is_some());
        assert!(kept.read_keyed(a, 7, Records::One).is_some());
        assert!(kept.read(b, Records::One).is_some());
        assert_eq!(kept.len(), 3);
        kept.sweep();
        assert_eq!(kept.len(), 3, "all were read since the last sweep");
        assert!(kept.read_keyed(a, 7, Records::One).is_some());
        kept.sweep();
        assert_eq!(kept.len(), 1, "the ones not read since are closed");
        assert_eq!(
            kept.read(Path::new("/proc/no-such-file"), Records::One),
            None
        );
        assert_eq!(kept.len(), 1);
    }

    #[test]
    fn one_record_ends_at_a_short_read_and_many_at_the_read_of_nothing() {
        let mut kept = KeptFiles::default();
        // One record: all of it, as a plain read to the end gives it.
        let stat = kept.read(Path::new("/proc/stat"), Records::One).unwrap();
        let keys = |t: &str| -> Vec<String> {
            t.lines()
                .map(|l| l.split(' ').next().unwrap_or("").to_string())
                .collect()
        };
        let whole = std::fs::read_to_string("/proc/stat").unwrap();
        assert_eq!(keys(&stat), keys(&whole));
        // A file larger than the first read's room, read as one record:
        // full reads go on, the short one ends it.
        let d = tempfile::tempdir().unwrap();
        let big = d.path().join("big");
        let text: String = (0..2_000).map(|i| format!("{i}\n")).collect();
        std::fs::write(&big, &text).unwrap();
        assert_eq!(kept.read(&big, Records::One).unwrap(), text);
        // Many records: a read stops short where the next record would not
        // fit the kernel's page, so only the read of nothing ends it.
        // Each mapping of this process is a record of `smaps` (~1 KB).
        let smaps = Path::new("/proc/self/smaps");
        let first_page = kept.read(smaps, Records::One).unwrap();
        let all = kept.read(smaps, Records::Many).unwrap();
        assert!(
            first_page.len() < 4096 && all.len() > 2 * 4096,
            "smaps read as one record: {} bytes; as many: {}",
            first_page.len(),
            all.len()
        );
        assert!(all.ends_with('\n') && all.contains("VmFlags"));
    }
}
