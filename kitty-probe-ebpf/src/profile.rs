//! The on-CPU profiler: loads `profile.bpf.o` for one target process,
//! attaches it to the software cpu-clock of every online CPU, samples for the
//! requested time (cancellable), then reads the stacks back and symbolizes
//! them with blazesym (process cached at start, so a target that exits
//! mid-profile still resolves). Links and maps are released when the
//! profile ends, is cancelled, or the process dies (they are only fds).

use crate::load::{self, objects, ProbeError};
use aya::maps::{HashMap as BpfHashMap, MapData, PerCpuArray, StackTraceMap};
use aya::programs::perf_event::{PerfEventConfig, PerfEventScope, SamplePolicy, SoftwareEvent};
use aya::programs::PerfEvent;
use blazesym::symbolize::{cache, source, Input, Symbolized, Symbolizer};
use blazesym::Pid;
use kitty_core::model::Text;
use kitty_core::profile::{symbol, Profile, StackSample};
use std::collections::HashMap;
use std::fs::File;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub const MAX_FREQUENCY_HZ: u64 = 999;
pub const MAX_DURATION: Duration = Duration::from_secs(60);
/// Profiles at once on this node (seed 004: a profiler must not become the load).
pub const MAX_CONCURRENT: usize = 2;

/// Why a profile could not be taken.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProfileError {
    #[error("a profile needs a target: --pid PID")]
    NoTarget,
    #[error("frequency must be 1..={MAX_FREQUENCY_HZ} Hz")]
    Frequency,
    #[error("duration must be more than 0 and at most {} s", MAX_DURATION.as_secs())]
    Duration,
    #[error("no process {0}")]
    NoProcess(u32),
    #[error("{MAX_CONCURRENT} profiles are already running on this node (the limit); try again when one ends")]
    Busy,
    #[error("profile lock in {dir}: {why}")]
    Lock { dir: String, why: String },
    #[error("perf_event BPF not permitted here: {0}")]
    PerfEvent(ProbeError),
    #[error("online CPUs: {0}")]
    Cpus(String),
    #[error(transparent)]
    Probe(#[from] ProbeError),
}

impl ProfileError {
    /// A request the user can fix (a usage error), not a failure of the node.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            ProfileError::NoTarget
                | ProfileError::Frequency
                | ProfileError::Duration
                | ProfileError::NoProcess(_)
        )
    }
}

#[derive(Debug, Clone)]
pub struct Request {
    pub pid: u32,
    pub frequency_hz: u64,
    pub duration: Duration,
}

impl Request {
    pub fn validate(&self) -> Result<(), ProfileError> {
        if self.pid == 0 {
            return Err(ProfileError::NoTarget);
        }
        if !(1..=MAX_FREQUENCY_HZ).contains(&self.frequency_hz) {
            return Err(ProfileError::Frequency);
        }
        if self.duration.is_zero() || self.duration > MAX_DURATION {
            return Err(ProfileError::Duration);
        }
        if !std::path::Path::new(&format!("/proc/{}", self.pid)).exists() {
            return Err(ProfileError::NoProcess(self.pid));
        }
        Ok(())
    }
}

/// One of the node's profile slots, held through an flock: a third profile
/// anywhere on the node (this process or another kitty) is refused.
pub struct Slot(#[allow(dead_code)] File);

impl Slot {
    pub fn acquire() -> Result<Slot, ProfileError> {
        // /run is the node-wide place; /tmp when /run is not ours to write.
        let mut last_err = ProfileError::Lock {
            dir: "/run/kitty-tui".into(),
            why: "no directory for the profile lock".into(),
        };
        for dir in ["/run/kitty-tui", "/tmp/kitty-tui"] {
            match Self::acquire_in(std::path::Path::new(dir)) {
                Ok(Some(slot)) => return Ok(slot),
                Ok(None) => return Err(ProfileError::Busy),
                Err(e) => {
                    last_err = ProfileError::Lock {
                        dir: dir.into(),
                        why: e.to_string(),
                    }
                }
            }
        }
        Err(last_err)
    }

    /// A free slot in `dir`, None when all are taken.
    fn acquire_in(dir: &std::path::Path) -> std::io::Result<Option<Slot>> {
        std::fs::create_dir_all(dir)?;
        for i in 0..MAX_CONCURRENT {
            let f = File::options()
                .create(true)
                .truncate(false)
                .write(true)
                .open(dir.join(format!("profile-{i}.lock")))?;
            let fd = std::os::fd::AsRawFd::as_raw_fd(&f);
            // SAFETY: flock on our own fd; released when the file closes.
            if unsafe { libc::flock(fd, libc::LOCK_EX | libc::LOCK_NB) } == 0 {
                return Ok(Some(Slot(f)));
            }
        }
        Ok(None)
    }
}

/// Must match `struct sample_key` in bpf/profile.bpf.c.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct SampleKey {
    tid: u32,
    user_stack: i32,
    kernel_stack: i32,
    comm: [u8; 16],
}
// SAFETY: repr(C) plain data without padding.
unsafe impl aya::Pod for SampleKey {}

/// Loads the sampler for `tgid` (0: samples nothing) and attaches it to the
/// cpu-clock of `cpus` at `hz`.
fn start_sampler(tgid: u32, cpus: &[u32], hz: u64) -> Result<aya::Ebpf, ProfileError> {
    let mut ebpf = load::load_object(objects::PROFILE, &[("target_tgid", tgid as u64)])?;
    let prog: &mut PerfEvent = load::program(&mut ebpf, "profile_cpu")?;
    prog.load().map_err(|e| load::reason(&e))?;
    for &cpu in cpus {
        prog.attach(
            PerfEventConfig::Software(SoftwareEvent::CpuClock),
            PerfEventScope::AllProcessesOneCpu { cpu },
            SamplePolicy::Frequency(hz),
            false,
        )
        .map_err(|e| ProfileError::PerfEvent(load::reason(&e)))?;
    }
    Ok(ebpf)
}

/// Can this node run the profiler at all? (`doctor`, and the view's reason.)
pub fn check() -> Result<(), ProfileError> {
    start_sampler(0, &[0], 1).map(drop)
}

/// Samples `req.pid`; `progress` gets the elapsed fraction; `cancel` stops early
/// (the partial profile is returned).
pub fn run(
    req: &Request,
    cancel: &AtomicBool,
    mut progress: impl FnMut(f64),
) -> Result<Profile, ProfileError> {
    req.validate()?;
    let _slot = Slot::acquire()?;
    let comm = std::fs::read_to_string(format!("/proc/{}/comm", req.pid))
        .map(|s| Text::new(s.trim_end_matches('\n')))
        .unwrap_or_default();
    // Take what symbolization needs now, before the target can exit.
    let symbolizer = Symbolizer::new();
    let _ = symbolizer.cache(&cache::Cache::Process(cache::Process::new(Pid::from(
        req.pid,
    ))));
    let maps = read_maps(req.pid);

    let cpus =
        aya::util::online_cpus().map_err(|(what, e)| ProfileError::Cpus(format!("{what}: {e}")))?;
    let mut ebpf = start_sampler(req.pid, &cpus, req.frequency_hz)?;
    let start = Instant::now();
    let mut exited = false;
    while start.elapsed() < req.duration && !cancel.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(50));
        progress(start.elapsed().as_secs_f64() / req.duration.as_secs_f64());
        if !std::path::Path::new(&format!("/proc/{}", req.pid)).exists() {
            exited = true;
            break;
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    // Detach before reading: the maps stop changing.
    let _ = load::program::<PerfEvent>(&mut ebpf, "profile_cpu")?.unload();
    let samples: BpfHashMap<MapData, SampleKey, u64> = load::take_map(&mut ebpf, "samples")?;
    let stacks: StackTraceMap<MapData> = load::take_map(&mut ebpf, "stacks")?;
    let counters: PerCpuArray<MapData, u64> = load::take_map(&mut ebpf, "counters")?;
    let count = |i: u32| {
        counters
            .get(&i, 0)
            .map(|v| v.iter().sum::<u64>())
            .unwrap_or(0)
    };

    let mut raw: Vec<(SampleKey, u64)> = samples.iter().filter_map(Result::ok).collect();
    raw.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    let ips = |id: i32| -> Vec<u64> {
        if id < 0 {
            return Vec::new();
        }
        stacks
            .get(&(id as u32), 0)
            .map(|st| st.frames().iter().map(|f| f.ip).collect())
            .unwrap_or_default()
    };
    let mut names = Names::new(&symbolizer, req.pid, &maps);
    let mut depths = Vec::new();
    let mut out = Vec::new();
    for (k, n) in raw {
        let user = ips(k.user_stack);
        let kernel = ips(k.kernel_stack);
        if !user.is_empty() {
            depths.push(user.len());
        }
        // The kernel gives innermost first; folded wants the caller first.
        let mut frames: Vec<Text> = names.user(&user).iter().rev().map(|f| symbol(f)).collect();
        frames.extend(
            names
                .kernel(&kernel)
                .iter()
                .rev()
                .map(|f| symbol(&format!("{f}_[k]"))),
        );
        if frames.is_empty() {
            frames.push("[no stack]".into());
        }
        let end = k.comm.iter().position(|&c| c == 0).unwrap_or(16);
        out.push(StackSample {
            tid: k.tid,
            thread: Text::from_bytes(&k.comm[..end]),
            frames,
            count: n,
        });
    }
    let mut notes = Vec::new();
    depths.sort_unstable();
    if let Some(&median) = depths.get(depths.len() / 2) {
        if median <= 2 {
            notes.push(Text::message(format!(
                "user stacks are shallow (median depth {median}): the binary was probably built without frame pointers"
            )));
        }
    }
    if exited {
        notes.push(Text::message(format!(
            "pid {} exited after {elapsed:.1} s; the profile covers its life until then",
            req.pid
        )));
    }
    if cancel.load(Ordering::SeqCst) {
        notes.push(Text::message(format!("cancelled after {elapsed:.1} s")));
    }
    Ok(Profile {
        pid: req.pid,
        comm,
        frequency_hz: req.frequency_hz,
        duration_s: elapsed,
        stacks: out,
        samples: count(0),
        lost_user_stacks: count(1),
        lost_kernel_stacks: count(2),
        collisions: count(3),
        dropped: count(4),
        notes,
    })
}

/// An executable mapping of the target: [start, end), file offset, path.
struct Mapping {
    start: u64,
    end: u64,
    offset: u64,
    path: String,
}

fn read_maps(pid: u32) -> Vec<Mapping> {
    let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let range = it.next()?;
            let perms = it.next()?;
            let offset = u64::from_str_radix(it.next()?, 16).ok()?;
            let path = it.nth(2).unwrap_or("").to_string();
            if !perms.contains('x') {
                return None;
            }
            let (a, b) = range.split_once('-')?;
            Some(Mapping {
                start: u64::from_str_radix(a, 16).ok()?,
                end: u64::from_str_radix(b, 16).ok()?,
                offset,
                path,
            })
        })
        .collect()
}

/// Address -> name, memoized; unresolved user frames as module+offset.
struct Names<'a> {
    sym: &'a Symbolizer,
    pid: u32,
    maps: &'a [Mapping],
    cache: HashMap<(bool, u64), String>,
}

impl<'a> Names<'a> {
    fn new(sym: &'a Symbolizer, pid: u32, maps: &'a [Mapping]) -> Self {
        Names {
            sym,
            pid,
            maps,
            cache: HashMap::new(),
        }
    }

    fn user(&mut self, ips: &[u64]) -> Vec<String> {
        let src = source::Source::Process(source::Process::new(Pid::from(self.pid)));
        self.resolve(false, ips, &src)
    }

    fn kernel(&mut self, ips: &[u64]) -> Vec<String> {
        let src = source::Source::Kernel(source::Kernel::default());
        self.resolve(true, ips, &src)
    }

    fn resolve(&mut self, kernel: bool, ips: &[u64], src: &source::Source) -> Vec<String> {
        let todo: Vec<u64> = ips
            .iter()
            .copied()
            .filter(|ip| !self.cache.contains_key(&(kernel, *ip)))
            .collect();
        if !todo.is_empty() {
            let found = self
                .sym
                .symbolize(src, Input::AbsAddr(&todo))
                .unwrap_or_default();
            for (i, ip) in todo.iter().enumerate() {
                let name = match found.get(i) {
                    Some(Symbolized::Sym(s)) => s.name.to_string(),
                    _ if kernel => format!("[kernel 0x{ip:x}]"),
                    _ => self.module_offset(*ip),
                };
                self.cache.insert((kernel, *ip), name);
            }
        }
        ips.iter()
            .map(|ip| self.cache[&(kernel, *ip)].clone())
            .collect()
    }

    fn module_offset(&self, ip: u64) -> String {
        match self.maps.iter().find(|m| ip >= m.start && ip < m.end) {
            Some(m) => {
                let base = m.path.rsplit('/').next().unwrap_or(&m.path);
                let base = if base.is_empty() { "[anon]" } else { base };
                format!("{base}+0x{:x}", ip - m.start + m.offset)
            }
            None => format!("[unknown 0x{ip:x}]"),
        }
    }
}
