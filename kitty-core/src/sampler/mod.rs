//! The sampler: reads every procfs / sock_diag source once per tick and
//! turns two consecutive raw samples into a [`Frame`] with rates. One tick
//! is a sequence of phases, each in its own module: the watch list
//! (discovery), the processes, their sockets per network namespace, the
//! communication phase (RDMA ports, NCCL Inspector, NCCL RAS), the rank
//! frames, the host, and the sources' status.

pub mod cluster;
mod collectives;
mod cpu_stats;
mod host;
pub mod identity;
mod neighbours;
mod nics;
mod procs;
mod rank;
mod ras;
mod sockets;
mod tasks;
mod watch;

use crate::model::time::{mono_ns, wall_ns};
use crate::model::{Event, EventKind, Frame, HostFrame, Source, SourceStatus, Sources, Text};
use crate::sources::cgroup::CgroupMounts;
use crate::sources::discovery::WatchRule;
use crate::sources::kept::KeptFiles;
use crate::sources::Roots;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct SamplerConfig {
    pub roots: Roots,
    pub rule: WatchRule,
    pub interval: Duration,
    /// How often the process list is refreshed.
    pub discovery_every: Duration,
    pub node: String,
    /// Use sock_diag for per-socket tcp_info (else only /proc/<pid>/net/tcp).
    pub sock_diag: bool,
    /// Pids a probe saw exec or fork, looked at on the next tick.
    pub hints: WatchHints,
    /// Where per-thread counters come from (the probes' task iterator, or
    /// procfs).
    pub tasks: crate::sources::tasks::TaskSource,
}

impl Default for SamplerConfig {
    fn default() -> Self {
        SamplerConfig {
            roots: Roots::default(),
            rule: WatchRule::default(),
            interval: Duration::from_millis(500),
            discovery_every: Duration::from_secs(5),
            node: crate::sources::node::node_name(std::path::Path::new("/proc")),
            sock_diag: true,
            hints: WatchHints::default(),
            tasks: Default::default(),
        }
    }
}

/// Pids worth a look before the next discovery cycle (new execs and forks,
/// from the events probe). Shared between the probe and the sampler. While
/// the probe says it sees every exec and fork ([`WatchHints::set_complete`])
/// and drops none, discovery's scan of every process can wait longer: a new
/// process is looked at the tick after its hint.
#[derive(Debug, Clone, Default)]
pub struct WatchHints(Arc<HintsShared>);

#[derive(Debug, Default)]
struct HintsShared {
    pids: Mutex<HashSet<u32>>,
    /// The probe runs and hints at every new process.
    complete: AtomicBool,
    /// A hint was dropped since the last take (a storm past the probe's
    /// token bucket, a full ring, this set full).
    missed: AtomicBool,
}

/// What the sampler takes from the hints each tick.
#[derive(Debug, Default)]
pub struct Hinted {
    pub pids: HashSet<u32>,
    /// The probe hints at every new process...
    pub complete: bool,
    /// ...but some went without their hint since the last take.
    pub missed: bool,
}

impl WatchHints {
    pub fn add(&self, pid: u32) {
        let mut s = self.0.pids.lock().unwrap_or_else(|e| e.into_inner());
        // Bounded: a fork storm must not grow this without limit.
        if s.len() < 4096 {
            s.insert(pid);
        } else {
            self.missed();
        }
    }

    /// Whether the hints name every new process from now on (the events
    /// probe attached), or no longer.
    pub fn set_complete(&self, yes: bool) {
        self.0.complete.store(yes, Ordering::Relaxed);
    }

    /// Some new process went without its hint.
    pub fn missed(&self) {
        self.0.missed.store(true, Ordering::Relaxed);
    }

    fn take(&self) -> Hinted {
        let pids = std::mem::take(&mut *self.0.pids.lock().unwrap_or_else(|e| e.into_inner()));
        Hinted {
            pids,
            complete: self.0.complete.load(Ordering::Relaxed),
            missed: self.0.missed.swap(false, Ordering::Relaxed),
        }
    }
}

/// What the communication phase learnt before the rank frames exist.
struct CommPhase {
    nics: Vec<crate::model::NicFrame>,
    nic_map: std::collections::HashMap<u32, Vec<String>>,
    ras_signals: ras::PerRank,
    recorders: std::collections::HashMap<u32, crate::model::FlightRecorderPaths>,
    statuses: Vec<(Source, SourceStatus)>,
}

impl CommPhase {
    /// Writes it into the rank frames; returns the ports and the statuses.
    fn apply(
        mut self,
        ranks: &mut [crate::model::RankFrame],
        collectives: &collectives::Collectives,
        mono: u64,
    ) -> (Vec<crate::model::NicFrame>, Vec<(Source, SourceStatus)>) {
        nics::join(&mut self.nics, ranks, &self.nic_map);
        collectives.apply(ranks, mono);
        ras::apply(ranks, &self.ras_signals);
        for r in ranks.iter_mut() {
            r.flight_recorder = self.recorders.remove(&r.key.pid);
        }
        (self.nics, self.statuses)
    }
}

pub struct Sampler {
    cfg: SamplerConfig,
    watch: watch::WatchList,
    mounts: CgroupMounts,
    sockets: sockets::SocketReader,
    procs: procs::ProcReader,
    neighbours: neighbours::Neighbours,
    prev_mono: Option<u64>,
    host: crate::sources::host::HostReader,
    prev_host: Option<HostFrame>,
    prev_sources: Sources,
    seq: u64,
    /// The NUMA nodes and their CPUs, read once (they do not change).
    numa: Vec<crate::model::NumaNode>,
    nics: nics::Nics,
    collectives: collectives::Collectives,
    ras: ras::Ras,
    tasks: tasks::Tasks,
    /// The files read every tick (host, netns, cgroups), kept open.
    files: KeptFiles,
}

impl Sampler {
    pub fn new(cfg: SamplerConfig) -> Self {
        let mounts = CgroupMounts::load(&cfg.roots);
        let numa = crate::sources::numa::nodes(&cfg.roots.sys);
        Sampler {
            tasks: tasks::Tasks::open(&cfg.tasks),
            files: KeptFiles::default(),
            sockets: sockets::SocketReader::new(cfg.sock_diag),
            procs: procs::ProcReader::new(cfg.discovery_every),
            neighbours: Default::default(),
            cfg,
            watch: Default::default(),
            mounts,
            prev_mono: None,
            host: Default::default(),
            prev_host: None,
            prev_sources: Sources::default(),
            seq: 0,
            numa,
            nics: Default::default(),
            collectives: Default::default(),
            ras: Default::default(),
        }
    }

    pub fn config(&self) -> &SamplerConfig {
        &self.cfg
    }

    /// Takes one sample and returns the frame (rates against the previous tick).
    pub fn tick(&mut self) -> Frame {
        let mono = mono_ns();
        let wall = wall_ns();
        let mut events = Vec::new();
        let hinted = self.cfg.hints.take();
        self.watch
            .refresh(&self.cfg, &hinted, (mono, wall), &mut events);
        let dt_s = self
            .prev_mono
            .map(|p| (mono.saturating_sub(p)) as f64 / 1e9)
            .filter(|d| *d > 0.0);

        let tgids = self.watch.ranks().map(|w| w.key.pid).collect();
        let rows = self.tasks.read(&tgids);
        let given = rows.as_ref().ok().and_then(Option::as_ref);
        self.watch.follow_placement(&self.cfg.roots, given);
        let tasks = &mut self.tasks;
        // Out while the samples borrow its entries (until the rank frames
        // are built).
        let watch = std::mem::take(&mut self.watch);
        let (samples, gone) =
            self.procs
                .read(&self.cfg.roots, watch.ranks(), given, mono, &mut |pid| {
                    tasks.open_files(pid)
                });
        let tasks_status = self.tasks.status(rows.as_ref().err(), &samples);
        watch::WatchList::exited(&gone, wall, &mut events);
        // The watched TCP sockets from one BPF run, where the fd walks told
        // them apart (and so found each socket).
        let walked = samples
            .iter()
            .any(|(_, s)| s.tcp_inodes.is_some())
            .then(|| self.tasks.tcp_sockets())
            .flatten();
        let tables = self.sockets.read(&self.cfg.roots, &samples, walked);
        let netns = self
            .sockets
            .netns_frames(&self.cfg.roots, &samples, mono, &mut self.files);
        let comm = self.comm_phase(&samples, mono, wall, &mut events);
        let mut ranks =
            self.procs
                .build_ranks(samples, &tables, &self.mounts, mono, dt_s, &mut self.files);
        self.watch = watch;
        self.watch.remove_gone(&gone);
        let (nics, mut phase_sources) = comm.apply(&mut ranks, &self.collectives, mono);
        phase_sources.extend(tasks_status.map(|s| (Source::EbpfTasks, s)));

        let mut host = host::build_host(
            &self.host.read(&self.cfg.roots, &mut self.files, mono),
            self.prev_host.as_ref(),
            dt_s,
        );
        // What no rank or host reader read this tick is closed.
        self.files.sweep();
        host.numa = self.numa.clone();
        self.prev_host = Some(host.clone());
        if ranks.len() >= 3 {
            let pids = ranks.iter().map(|r| r.key.pid).collect();
            let tasks = &mut self.tasks;
            let walk = || tasks.node_processes();
            if let Some(busy) = self.neighbours.scan(&self.cfg.roots, &pids, mono, walk) {
                host.busy = busy;
            }
        }
        let sources = self.sources(wall, phase_sources, &mut events);
        self.prev_mono = Some(mono);
        let frame = Frame {
            version: crate::model::FRAME_VERSION,
            seq: self.seq,
            wall_ns: wall,
            mono_ns: mono,
            node: Text::new(&self.cfg.node),
            interval_ms: self.cfg.interval.as_millis() as u64,
            host,
            ranks,
            netns,
            nics,
            sources,
            events,
            ..Default::default()
        };
        self.seq += 1;
        frame
    }

    /// The communication phase (RDMA ports, NCCL Inspector, NCCL RAS,
    /// Flight Recorder paths): read from the samples, applied to the rank
    /// frames once they exist.
    fn comm_phase(
        &mut self,
        samples: &[procs::Sample],
        mono: u64,
        wall: u64,
        events: &mut Vec<Event>,
    ) -> CommPhase {
        let nics = self.nics.read(&self.cfg.roots.sys, mono, wall, events);
        let nic_map = self.nics.rank_ports(&nics, samples);
        self.collectives.read(&self.cfg.roots, samples, mono);
        self.ras.targets(&self.cfg.roots, samples);
        let (ras_signals, ras_status) = self.ras.judge(samples, wall, events);
        let recorders = samples
            .iter()
            .filter_map(|(w, _)| {
                let dir = || self.cfg.roots.pid_dir(w.key.pid);
                crate::sources::flight_recorder::paths(&w.nccl, w.labels.rank, dir)
                    .map(|p| (w.key.pid, p))
            })
            .collect();
        let mut statuses = vec![(Source::NcclRas, ras_status)];
        statuses.extend(self.nics.status().map(|s| (Source::Rdma, s)));
        statuses.extend(
            self.collectives
                .status()
                .map(|s| (Source::NcclInspector, s)),
        );
        CommPhase {
            nics,
            nic_map,
            ras_signals,
            recorders,
            statuses,
        }
    }

    /// Every source's status, with an event when one is lost or back.
    fn sources(
        &mut self,
        wall: u64,
        others: Vec<(Source, SourceStatus)>,
        events: &mut Vec<Event>,
    ) -> Sources {
        let mut sources = Sources::default();
        sources.insert(
            Source::Procfs,
            match (&self.watch.error, self.watch.hidden()) {
                (Some(e), _) => SourceStatus::unavailable(e),
                (None, 0) => SourceStatus::ok(),
                (None, n) => SourceStatus::degraded(format!(
                    "running as uid {}: {n} processes of other users are hidden (their environment is unreadable); run as root to see every rank",
                    // SAFETY: getuid has no preconditions.
                    unsafe { libc::getuid() }
                )),
            },
        );
        sources.insert(Source::SockDiag, self.sockets.status());
        for (src, st) in others {
            sources.insert(src, st);
        }
        for (name, st) in sources.iter() {
            match self.prev_sources.get(name) {
                Some(p) if p.is_ok() && !st.is_ok() => events.push(Event::new(
                    wall,
                    EventKind::SourceLost,
                    format!("{name} lost: {}", st.reason.as_deref().unwrap_or_default()),
                )),
                Some(p) if !p.is_ok() && st.is_ok() => events.push(Event::new(
                    wall,
                    EventKind::SourceRecovered,
                    format!("{name} recovered"),
                )),
                _ => {}
            }
        }
        self.prev_sources = sources.clone();
        sources
    }
}
