//! The profiler of one process: on-CPU (`profile.bpf.o` on the software
//! cpu-clock of every online CPU: where it runs) and off-CPU
//! (`offcpu.bpf.o` on sched_switch: where it waits, runnable or blocked,
//! weighted by the time away), either or both over the same time
//! (cancellable). Then the stacks are read back and symbolized with
//! blazesym (process cached at start, so a target that exits mid-profile
//! still resolves). Links and maps are released when the profile ends, is
//! cancelled, or the process dies (they are only fds).

use crate::load::{self, objects, ProbeError};
use aya::maps::{HashMap as BpfHashMap, MapData, PerCpuArray, StackTraceMap};
use aya::programs::perf_event::{PerfEventConfig, PerfEventScope, SamplePolicy, SoftwareEvent};
use aya::programs::{BtfTracePoint, PerfEvent};
use blazesym::symbolize::{cache, source, Input, Symbolized, Symbolizer};
use blazesym::Pid;
use kitty_core::model::Text;
use kitty_core::profile::{
    symbol, Profile, ProfileKind, StackSample, BEFORE_FRAME, BLOCKED_FRAME, RUNNABLE_FRAME,
};
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

/// Which profiles to take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kinds {
    OnCpu,
    OffCpu,
    /// Both over the same seconds (the TUI's `p`: its flame view has a tab
    /// for each).
    Both,
}

impl Kinds {
    fn on(self) -> bool {
        self != Kinds::OffCpu
    }
    fn off(self) -> bool {
        self != Kinds::OnCpu
    }
}

#[derive(Debug, Clone)]
pub struct Request {
    pub pid: u32,
    pub frequency_hz: u64,
    pub duration: Duration,
    pub kinds: Kinds,
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

/// Must match `struct wait_key` in bpf/offcpu.bpf.c.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct WaitKey {
    tid: u32,
    user_stack: i32,
    kernel_stack: i32,
    runnable: u32,
    comm: [u8; 16],
}
// SAFETY: repr(C) plain data without padding.
unsafe impl aya::Pod for WaitKey {}

/// Must match `struct away` in bpf/offcpu.bpf.c: a thread off the CPU now.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct Away {
    since_ns: u64,
    key: WaitKey,
}
// SAFETY: repr(C) plain data without padding (8 + 32 bytes).
unsafe impl aya::Pod for Away {}

/// CLOCK_MONOTONIC in ns, the clock of bpf_ktime_get_ns.
fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Loads the off-CPU program for `tgid` and attaches it to sched_switch.
fn start_offcpu(tgid: u32) -> Result<aya::Ebpf, ProfileError> {
    let mut ebpf = load::load_object(
        objects::OFFCPU,
        &[("target_tgid", tgid as u64), ("start_ns", mono_ns())],
    )?;
    load::attach_tp_btf(&mut ebpf, "offcpu_switch", "sched_switch")?;
    Ok(ebpf)
}

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

/// Can it take off-CPU profiles? (`doctor`.)
pub fn check_off_cpu() -> Result<(), ProfileError> {
    start_offcpu(0).map(drop)
}

type Started = (Option<aya::Ebpf>, Option<aya::Ebpf>);

/// The on-CPU and off-CPU programs `req` asks for, attached.
fn start_programs(req: &Request) -> Result<Started, ProfileError> {
    let on = if req.kinds.on() {
        let cpus = aya::util::online_cpus()
            .map_err(|(what, e)| ProfileError::Cpus(format!("{what}: {e}")))?;
        Some(start_sampler(req.pid, &cpus, req.frequency_hz)?)
    } else {
        None
    };
    let off = if req.kinds.off() {
        Some(start_offcpu(req.pid)?)
    } else {
        None
    };
    Ok((on, off))
}

/// Profiles `req.pid` (on-CPU, off-CPU or both, in that order);
/// `progress` gets the elapsed fraction; `cancel` stops early (the partial
/// profiles are returned).
pub fn run(
    req: &Request,
    cancel: &AtomicBool,
    mut progress: impl FnMut(f64),
) -> Result<Vec<Profile>, ProfileError> {
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

    let started = start_programs(req);
    // Attached (or failed): the parsed BTF is not needed while it runs.
    load::release_kernel_btf();
    let (mut on, mut off) = started?;
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
    if let Some(e) = on.as_mut() {
        let _ = load::program::<PerfEvent>(e, "profile_cpu")?.unload();
    }
    if let Some(e) = off.as_mut() {
        let _ = load::program::<BtfTracePoint>(e, "offcpu_switch")?.unload();
    }
    let ended_ns = mono_ns();
    // A target still running is read again: what was taken at the start
    // may predate its exec (a process profiled as it starts) or its
    // dlopen()s. The start's copy is for a target that exited.
    let (symbolizer, maps) =
        if !exited && std::path::Path::new(&format!("/proc/{}", req.pid)).exists() {
            (Symbolizer::new(), read_maps(req.pid))
        } else {
            (symbolizer, maps)
        };
    let mut names = Names::new(&symbolizer, req.pid, &maps);
    let mut notes = Vec::new();
    if exited {
        notes.push(Text::message(format!(
            "pid {} exited after {elapsed:.1} s; the profile covers its life until then",
            req.pid
        )));
    }
    if cancel.load(Ordering::SeqCst) {
        notes.push(Text::message(format!("cancelled after {elapsed:.1} s")));
    }
    let base = Profile {
        pid: req.pid,
        comm,
        frequency_hz: req.frequency_hz,
        duration_s: elapsed,
        notes,
        ..Profile::default()
    };
    let mut out = Vec::new();
    if let Some(mut e) = on {
        out.push(read_on_cpu(&mut e, &mut names, base.clone())?);
    }
    if let Some(mut e) = off {
        out.push(read_off_cpu(&mut e, &mut names, base, ended_ns)?);
    }
    Ok(out)
}

/// The sum over CPUs of one of a program's loss counters.
/// Both programs count the same way: 0 samples (switches), 1 user and 2
/// kernel stacks lost, 3 stack-map collisions, 4 dropped on a full map.
fn read_counters(p: &mut Profile, counters: &PerCpuArray<MapData, u64>) {
    p.samples = counter(counters, 0);
    p.lost_user_stacks = counter(counters, 1);
    p.lost_kernel_stacks = counter(counters, 2);
    p.collisions = counter(counters, 3);
    p.dropped = counter(counters, 4);
}

fn counter(counters: &PerCpuArray<MapData, u64>, i: u32) -> u64 {
    counters
        .get(&i, 0)
        .map(|v| v.iter().sum::<u64>())
        .unwrap_or(0)
}

/// A stack map entry's addresses (none for a failed stack id).
fn ips(stacks: &StackTraceMap<MapData>, id: i32) -> Vec<u64> {
    if id < 0 {
        return Vec::new();
    }
    stacks
        .get(&(id as u32), 0)
        .map(|st| st.frames().iter().map(|f| f.ip).collect())
        .unwrap_or_default()
}

/// Caller-first frames of one stack pair: user frames, then kernel ones.
fn frames_of(names: &mut Names, user: &[u64], kernel: &[u64]) -> Vec<Text> {
    // The kernel gives innermost first; folded wants the caller first.
    let mut frames: Vec<Text> = names.user(user).iter().rev().map(|f| symbol(f)).collect();
    frames.extend(
        names
            .kernel(kernel)
            .iter()
            .rev()
            .map(|f| symbol(&format!("{f}_[k]"))),
    );
    if frames.is_empty() {
        frames.push("[no stack]".into());
    }
    frames
}

fn thread_name(comm: &[u8; 16]) -> Text {
    let end = comm.iter().position(|&c| c == 0).unwrap_or(16);
    Text::from_bytes(&comm[..end])
}

/// A note when user stacks are too shallow to mean much.
fn depth_note(depths: &mut [usize]) -> Option<Text> {
    depths.sort_unstable();
    let &median = depths.get(depths.len() / 2)?;
    (median <= 2).then(|| {
        Text::message(format!(
            "user stacks are shallow (median depth {median}): the binary was probably built without frame pointers"
        ))
    })
}

fn read_on_cpu(
    ebpf: &mut aya::Ebpf,
    names: &mut Names,
    mut p: Profile,
) -> Result<Profile, ProfileError> {
    let samples: BpfHashMap<MapData, SampleKey, u64> = load::take_map(ebpf, "samples")?;
    let stacks: StackTraceMap<MapData> = load::take_map(ebpf, "stacks")?;
    let counters: PerCpuArray<MapData, u64> = load::take_map(ebpf, "counters")?;
    let mut raw: Vec<(SampleKey, u64)> = samples.iter().filter_map(Result::ok).collect();
    raw.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    let mut depths = Vec::new();
    for (k, n) in raw {
        let user = ips(&stacks, k.user_stack);
        if !user.is_empty() {
            depths.push(user.len());
        }
        p.stacks.push(StackSample {
            tid: k.tid,
            thread: thread_name(&k.comm),
            frames: frames_of(names, &user, &ips(&stacks, k.kernel_stack)),
            count: n,
        });
    }
    p.notes.extend(depth_note(&mut depths));
    p.kind = ProfileKind::OnCpu;
    read_counters(&mut p, &counters);
    Ok(p)
}

fn read_off_cpu(
    ebpf: &mut aya::Ebpf,
    names: &mut Names,
    mut p: Profile,
    ended_ns: u64,
) -> Result<Profile, ProfileError> {
    let waits: BpfHashMap<MapData, WaitKey, u64> = load::take_map(ebpf, "waits")?;
    let leaving: BpfHashMap<MapData, u32, Away> = load::take_map(ebpf, "leaving")?;
    let stacks: StackTraceMap<MapData> = load::take_map(ebpf, "stacks")?;
    let counters: PerCpuArray<MapData, u64> = load::take_map(ebpf, "counters")?;
    let mut total: HashMap<WaitKey, u64> = waits.iter().filter_map(Result::ok).collect();
    // Threads still away when the profile ended (a rank blocked in recv the
    // whole time never came back): their wait so far counts too.
    for (_, a) in leaving.iter().filter_map(Result::ok) {
        *total.entry(a.key).or_default() += ended_ns.saturating_sub(a.since_ns) / 1000;
    }
    let mut raw: Vec<(WaitKey, u64)> = total.into_iter().collect();
    raw.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    let mut depths = Vec::new();
    for (k, us) in raw.into_iter().filter(|(_, us)| *us > 0) {
        let user = ips(&stacks, k.user_stack);
        if !user.is_empty() {
            depths.push(user.len());
        }
        // The state is the root: the flame graph splits there.
        let root = match k.runnable {
            1 => {
                p.runnable_us += us;
                RUNNABLE_FRAME
            }
            0 => {
                p.blocked_us += us;
                BLOCKED_FRAME
            }
            _ => BEFORE_FRAME,
        };
        let mut frames = vec![Text::new(root)];
        frames.extend(frames_of(names, &user, &ips(&stacks, k.kernel_stack)));
        // The innermost kernel frames are the probe's own (the tracepoint
        // run from __schedule): where the thread waits ends above them.
        if let Some(i) = frames.iter().position(|f| f.starts_with("bpf_trace_run")) {
            frames.truncate(i);
        }
        p.stacks.push(StackSample {
            tid: k.tid,
            thread: thread_name(&k.comm),
            frames,
            count: us,
        });
    }
    // Threads that never ran while watched: asleep the whole time.
    let seen: std::collections::HashSet<u32> = p.stacks.iter().map(|s| s.tid).collect();
    let whole_us = (p.duration_s * 1e6) as u64;
    for t in asleep_threads(p.pid)
        .into_iter()
        .filter(|t| !seen.contains(&t.tid))
    {
        let mut frames = vec![Text::new(BLOCKED_FRAME)];
        frames.extend(names.user(&t.user_pc).iter().map(|f| symbol(f)));
        frames.extend(t.kernel.iter().map(|f| symbol(&format!("{f}_[k]"))));
        p.blocked_us += whole_us;
        p.stacks.push(StackSample {
            tid: t.tid,
            thread: t.comm,
            frames,
            count: whole_us,
        });
    }
    p.notes.extend(depth_note(&mut depths));
    p.kind = ProfileKind::OffCpu;
    read_counters(&mut p, &counters);
    Ok(p)
}

/// A thread asleep now, where it sleeps: the user address of its system
/// call and its kernel stack (caller first), from /proc (root).
struct Asleep {
    tid: u32,
    comm: Text,
    user_pc: Vec<u64>,
    kernel: Vec<String>,
}

fn asleep_threads(pid: u32) -> Vec<Asleep> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in dir.flatten() {
        let Some(tid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let path = e.path();
        let stat = std::fs::read_to_string(path.join("stat")).unwrap_or_default();
        // The state follows the parenthesised comm.
        let state = stat.rsplit_once(") ").and_then(|(_, r)| r.chars().next());
        if !matches!(state, Some('S' | 'D')) {
            continue;
        }
        let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
        // `nr arg1..arg6 sp pc`: the last field is the user address.
        let user_pc = std::fs::read_to_string(path.join("syscall"))
            .ok()
            .and_then(|s| {
                let last = s.split_whitespace().last()?;
                u64::from_str_radix(last.trim_start_matches("0x"), 16).ok()
            })
            .filter(|pc| *pc != 0)
            .into_iter()
            .collect();
        // `[<0>] tcp_recvmsg+0x6e/0x1a0`, innermost first.
        let mut kernel: Vec<String> = std::fs::read_to_string(path.join("stack"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split_whitespace().nth(1))
            .map(|f| f.split('+').next().unwrap_or(f).to_string())
            .collect();
        kernel.reverse();
        out.push(Asleep {
            tid,
            comm: Text::new(comm.trim_end()),
            user_pc,
            kernel,
        });
    }
    out
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
