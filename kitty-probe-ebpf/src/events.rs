//! OOM kills, fatal-signal deaths of watched processes, and execve bursts,
//! from the kernel's ring buffer into the frame's events.

use crate::load::{self, objects, ProbeError};
use crate::mapped::MappedArray;
use crate::watched::WatchedSet;
use aya::maps::{MapData, RingBuf};
use aya::Ebpf;
use kitty_core::model::{Event, EventKind, Frame, Sig, Text};
use kitty_core::sampler::WatchHints;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Token bucket at the source (seed 004: 150 execve events per second).
pub const EXEC_RATE: u64 = 150;
pub const EXEC_BURST: u64 = 300;
/// execs per second that make a burst worth an event.
pub const BURST_PER_S: f64 = 100.0;

const EV_OOM: u32 = 1;
const EV_FATAL_SIGNAL: u32 = 2;
const EV_EXEC: u32 = 3;
const EV_FORK: u32 = 4;

/// Must match `struct event` in bpf/events.bpf.c.
#[repr(C)]
#[derive(Clone, Copy)]
struct RawEvent {
    kind: u32,
    pid: u32,
    actor_pid: u32,
    code: i32,
    comm: [u8; 16],
    actor_comm: [u8; 16],
    filename: [u8; 64],
}

/// A NUL-terminated kernel string (a comm any user can set), made safe.
fn cstr(b: &[u8]) -> Text {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    Text::from_bytes(&b[..end])
}

pub fn signal_name(sig: i32) -> String {
    let name = match sig {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        5 => "SIGTRAP",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        14 => "SIGALRM",
        15 => "SIGTERM",
        24 => "SIGXCPU",
        25 => "SIGXFSZ",
        31 => "SIGSYS",
        _ => return format!("signal {sig}"),
    };
    name.to_string()
}

pub struct EventsProbe {
    _ebpf: Ebpf,
    ring: RingBuf<MapData>,
    watched: WatchedSet,
    /// Mapped: read in place, no `bpf()` call a tick.
    counts: MappedArray<u64>,
    /// Execs seen and truncated at the last read; None before the first
    /// (whose counts hold what came before kitty looked: no rate, no burst).
    prev_counts: Option<(u64, u64)>,
    /// New processes' hints dropped (fork storms, a full ring), so far.
    prev_dropped: u64,
    /// pid -> its rank when the frame last had it (how the frame names
    /// it), for processes that are gone by the time their death is read:
    /// the name is made only for an event, not for every rank each tick.
    names: HashMap<u32, Option<u32>>,
    burst: Option<Burst>,
    /// New processes (exec, fork) for the sampler to look at next tick.
    hints: WatchHints,
}

/// An execve storm in progress.
#[derive(Default)]
struct Burst {
    start_ns: u64,
    seen: u64,
    sampled: u64,
    truncated: u64,
    comms: BTreeMap<Text, u32>,
}

impl Drop for EventsProbe {
    fn drop(&mut self) {
        // No hints from here on: discovery scans at its usual pace.
        self.hints.set_complete(false);
    }
}

impl EventsProbe {
    pub fn start(hints: WatchHints) -> Result<EventsProbe, ProbeError> {
        let mut ebpf = load::load_object(
            objects::EVENTS,
            &[("exec_rate", EXEC_RATE), ("exec_burst", EXEC_BURST)],
        )?;
        load::attach_all(
            &mut ebpf,
            &[
                ("ev_oom", "mark_victim"),
                ("ev_exit", "sched_process_exit"),
                ("ev_exec", "sched_process_exec"),
                ("ev_fork", "sched_process_fork"),
            ],
        )?;
        let ring = load::take_map(&mut ebpf, "events")?;
        let watched = load::take_map(&mut ebpf, "watched")?;
        let counts = MappedArray::of(&ebpf, "counts")?;
        // Every exec and fork of the node is now a hint, or counted as
        // dropped: discovery's full scan can wait longer.
        hints.set_complete(true);
        Ok(EventsProbe {
            _ebpf: ebpf,
            ring,
            watched: WatchedSet::new(watched),
            counts,
            prev_counts: None,
            prev_dropped: 0,
            names: HashMap::new(),
            burst: None,
            hints,
        })
    }

    /// The count at `idx` of `counts` (bpf/events.bpf.c).
    fn count(&self, idx: u32) -> u64 {
        self.counts.get(idx).unwrap_or(0)
    }

    pub fn enrich(&mut self, frame: &mut Frame) {
        let pids: BTreeSet<u32> = frame.ranks.iter().map(|r| r.key.pid).collect();
        for r in &frame.ranks {
            self.names.insert(r.key.pid, r.labels.rank);
        }
        self.watched.sync(&pids);
        let now = frame.wall_ns;
        let mut execs: BTreeMap<Text, u32> = BTreeMap::new();
        let mut exec_events = 0u32;
        while let Some(item) = self.ring.next() {
            if item.len() < std::mem::size_of::<RawEvent>() {
                continue;
            }
            // SAFETY: the ring buffer item holds one `struct event`; read_unaligned
            // copes with any alignment.
            let e: RawEvent = unsafe { std::ptr::read_unaligned(item.as_ptr() as *const RawEvent) };
            match e.kind {
                EV_OOM => frame.events.push(Event::new(
                    now,
                    EventKind::OomKill,
                    format!(
                        "OOM kill: pid {} ({}) killed; the allocation that triggered it came from pid {} ({})",
                        e.pid,
                        cstr(&e.comm),
                        e.actor_pid,
                        cstr(&e.actor_comm)
                    ),
                )),
                EV_FATAL_SIGNAL => {
                    let who = match self.names.get(&e.pid) {
                        Some(&rank) => kitty_core::model::RankFrame::name_of(rank, e.pid),
                        None => format!("pid {} ({})", e.pid, cstr(&e.comm)),
                    };
                    frame.events.push(Event::new(
                        now,
                        EventKind::FatalSignal,
                        format!("{who} died from {}", signal_name(e.code)),
                    ));
                }
                EV_EXEC => {
                    exec_events += 1;
                    *execs.entry(cstr(&e.comm)).or_default() += 1;
                    self.hints.add(e.pid);
                }
                EV_FORK => self.hints.add(e.pid),
                _ => {}
            }
        }
        let (seen, truncated) = (self.count(0), self.count(1));
        let first = self.prev_counts.is_none();
        let (seen_before, truncated_before) = self.prev_counts.unwrap_or_default();
        let (seen_d, trunc_d) = (
            seen.saturating_sub(seen_before),
            truncated.saturating_sub(truncated_before),
        );
        self.prev_counts = Some((seen, truncated));
        let dropped = self.count(2);
        if trunc_d > 0 || dropped > self.prev_dropped {
            // A new process may have gone without its hint.
            self.hints.missed();
        }
        self.prev_dropped = dropped;
        let secs = frame.interval_ms.max(1) as f64 / 1000.0;
        if !first {
            frame.host.signals.set(Sig::ExecsPerS, seen_d as f64 / secs);
        }
        let rate = seen_d as f64 / secs;
        // A burst is summed while it lasts and reported once it ends (or
        // every 10 s while a storm goes on), with what the bucket truncated.
        if !first && rate >= BURST_PER_S {
            let b = self.burst.get_or_insert_with(|| Burst {
                start_ns: now,
                ..Default::default()
            });
            b.seen += seen_d;
            b.sampled += exec_events as u64;
            b.truncated += trunc_d;
            for (c, n) in execs {
                *b.comms.entry(c).or_default() += n;
            }
        }
        let long = self
            .burst
            .as_ref()
            .is_some_and(|b| now.saturating_sub(b.start_ns) >= 10_000_000_000);
        if (rate < BURST_PER_S || long) && self.burst.is_some() {
            let b = self.burst.take().expect("checked");
            let dur = (now.saturating_sub(b.start_ns) as f64 / 1e9).max(secs);
            let mut top: Vec<(Text, u32)> = b.comms.into_iter().collect();
            top.sort_by_key(|t| std::cmp::Reverse(t.1));
            let names: Vec<String> = top
                .iter()
                .take(3)
                .map(|(c, n)| format!("{c} x{n}"))
                .collect();
            frame.events.push(Event::new(
                now,
                EventKind::ExecBurst,
                format!(
                    "execve burst: {} in {dur:.1} s ({:.0}/s; sampled {}: {}; truncated {})",
                    b.seen,
                    b.seen as f64 / dur,
                    b.sampled,
                    names.join(", "),
                    b.truncated
                ),
            ));
        }
        if self.names.len() > 4096 {
            self.names.retain(|pid, _| pids.contains(pid));
        }
    }
}
