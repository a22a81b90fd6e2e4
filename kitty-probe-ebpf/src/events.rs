//! OOM kills, fatal-signal deaths of watched processes, and execve bursts,
//! from the kernel's ring buffer into the frame's events.

use crate::load::{self, objects};
use crate::watched::WatchedSet;
use aya::maps::{HashMap as BpfHashMap, MapData, PerCpuArray, RingBuf};
use aya::Ebpf;
use kitty_core::frame::{Event, EventKind, Frame};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Token bucket at the source (seed 004: 150 execve events per second).
pub const EXEC_RATE: u64 = 150;
pub const EXEC_BURST: u64 = 300;
/// execs per second that make a burst worth an event.
pub const BURST_PER_S: f64 = 100.0;

const EV_OOM: u32 = 1;
const EV_FATAL_SIGNAL: u32 = 2;
const EV_EXEC: u32 = 3;

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

fn cstr(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
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
    counts: PerCpuArray<MapData, u64>,
    prev_counts: (u64, u64),
    /// pid -> how the frame named it, for processes that are gone by the
    /// time their death is read.
    names: HashMap<u32, String>,
    last_burst_ns: u64,
}

impl EventsProbe {
    pub fn start() -> Result<EventsProbe, String> {
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
            ],
        )?;
        let ring = RingBuf::try_from(ebpf.take_map("events").ok_or("events map missing")?)
            .map_err(|e| load::reason(&e))?;
        let watched = BpfHashMap::try_from(ebpf.take_map("watched").ok_or("watched map missing")?)
            .map_err(|e| load::reason(&e))?;
        let counts = PerCpuArray::try_from(ebpf.take_map("counts").ok_or("counts map missing")?)
            .map_err(|e| load::reason(&e))?;
        Ok(EventsProbe {
            _ebpf: ebpf,
            ring,
            watched: WatchedSet::new(watched),
            counts,
            prev_counts: (0, 0),
            names: HashMap::new(),
            last_burst_ns: 0,
        })
    }

    fn count(&self, idx: u32) -> u64 {
        self.counts
            .get(&idx, 0)
            .map(|v| v.iter().sum())
            .unwrap_or(0)
    }

    pub fn enrich(&mut self, frame: &mut Frame) {
        let pids: BTreeSet<u32> = frame.ranks.iter().map(|r| r.key.pid).collect();
        for r in &frame.ranks {
            self.names.insert(r.key.pid, r.display_name());
        }
        self.watched.sync(&pids);
        let now = frame.wall_ns;
        let mut execs: BTreeMap<String, u32> = BTreeMap::new();
        let mut exec_events = 0u32;
        while let Some(item) = self.ring.next() {
            if item.len() < std::mem::size_of::<RawEvent>() {
                continue;
            }
            // SAFETY: the ring buffer item holds one `struct event`; read_unaligned
            // copes with any alignment.
            let e: RawEvent = unsafe { std::ptr::read_unaligned(item.as_ptr() as *const RawEvent) };
            match e.kind {
                EV_OOM => frame.events.push(Event {
                    wall_ns: now,
                    kind: EventKind::OomKill,
                    message: format!(
                        "OOM kill: pid {} ({}) killed; the allocation that triggered it came from pid {} ({})",
                        e.pid,
                        cstr(&e.comm),
                        e.actor_pid,
                        cstr(&e.actor_comm)
                    ),
                }),
                EV_FATAL_SIGNAL => {
                    let who = self
                        .names
                        .get(&e.pid)
                        .cloned()
                        .unwrap_or_else(|| format!("pid {} ({})", e.pid, cstr(&e.comm)));
                    frame.events.push(Event {
                        wall_ns: now,
                        kind: EventKind::FatalSignal,
                        message: format!("{who} died from {}", signal_name(e.code)),
                    });
                }
                EV_EXEC => {
                    exec_events += 1;
                    *execs.entry(cstr(&e.comm)).or_default() += 1;
                }
                _ => {}
            }
        }
        let (seen, truncated) = (self.count(0), self.count(1));
        let (seen_d, trunc_d) = (
            seen.saturating_sub(self.prev_counts.0),
            truncated.saturating_sub(self.prev_counts.1),
        );
        let first = self.prev_counts == (0, 0) && seen > 0;
        self.prev_counts = (seen, truncated);
        let secs = frame.interval_ms.max(1) as f64 / 1000.0;
        if !first {
            frame
                .host
                .signals
                .insert("execs_per_s".into(), seen_d as f64 / secs);
        }
        let rate = seen_d as f64 / secs;
        // One event per burst, at most every 5 s, naming what ran.
        if !first && rate >= BURST_PER_S && now.saturating_sub(self.last_burst_ns) > 5_000_000_000 {
            self.last_burst_ns = now;
            let mut top: Vec<(String, u32)> = execs.into_iter().collect();
            top.sort_by_key(|t| std::cmp::Reverse(t.1));
            let names: Vec<String> = top
                .iter()
                .take(3)
                .map(|(c, n)| format!("{c} x{n}"))
                .collect();
            frame.events.push(Event {
                wall_ns: now,
                kind: EventKind::ExecBurst,
                message: format!(
                    "execve burst: {seen_d} in {secs:.1} s ({rate:.0}/s; sampled {exec_events}: {}; truncated {trunc_d})",
                    names.join(", ")
                ),
            });
        }
        if self.names.len() > 4096 {
            self.names.retain(|pid, _| pids.contains(pid));
        }
    }
}
