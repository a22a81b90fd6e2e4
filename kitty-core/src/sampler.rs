//! The sampler: reads every procfs/sock_diag source once per tick and turns
//! two consecutive raw samples into a [`Frame`] with rates.

use crate::frame::*;
use crate::signals::{rate, TcpDeltas};
use crate::sources::cgroup::{parse_throttled_ns, CgroupMounts};
use crate::sources::discovery::{discover_skipping, WatchRule, Watched};
use crate::sources::host::{read_host, HostSample};
use crate::sources::netstat::{parse_pairs, KEPT};
use crate::sources::process::{read_process, FdReuse, ProcSample, ReadError, Reuse};
use crate::sources::sockdiag::SockDiag;
use crate::sources::tcp_table::{read_tables, SocketRaw};
use crate::sources::Roots;
use std::collections::{BTreeMap, HashMap};
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
    /// Poll NVML (None: GPU telemetry off, `--no-gpu`).
    pub nvml: Option<NvmlConfig>,
}

#[derive(Debug, Clone, Default)]
pub struct NvmlConfig {
    /// libnvidia-ml.so.1 to load instead of the system's (`--nvml-lib`).
    pub lib_path: Option<std::path::PathBuf>,
}

impl Default for SamplerConfig {
    fn default() -> Self {
        SamplerConfig {
            roots: Roots::default(),
            rule: WatchRule::default(),
            interval: Duration::from_millis(500),
            discovery_every: Duration::from_secs(5),
            node: hostname(),
            sock_diag: true,
            nvml: Some(NvmlConfig::default()),
        }
    }
}

/// How often discovery looks again at processes it already found unwatched.
const FULL_DISCOVERY_EVERY: Duration = Duration::from_secs(60);

/// How often the per-thread `sched` files (migrations) are read.
const SCHED_EVERY: Duration = Duration::from_secs(2);

pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// What the previous tick left for rate computation.
struct ProcPrev {
    sample: ProcSample,
    /// Monotonic ns of the last full fd scan.
    fd_scan_ns: u64,
    /// Last read of the migration counters (monotonic ns, total) and the rate
    /// it gave, carried between reads.
    migrations: Option<(u64, u64)>,
    migrations_rate: Option<f64>,
    cfs_ns: Option<u64>,
    tcp: HashMap<u64, TcpInfo>,
}

pub struct Sampler {
    cfg: SamplerConfig,
    watched: Vec<Watched>,
    since_discovery: Option<u64>,
    /// Pids found unwatched, not examined again until the next full pass.
    unwatched: std::collections::HashSet<u32>,
    full_discovery_at: Option<u64>,
    mounts: CgroupMounts,
    sockdiag: SockDiag,
    sockdiag_error: Option<String>,
    prev_mono: Option<u64>,
    prev_procs: HashMap<ProcKey, ProcPrev>,
    prev_host: Option<HostFrame>,
    prev_netns: HashMap<u64, BTreeMap<String, u64>>,
    prev_sources: BTreeMap<String, SourceStatus>,
    seq: u64,
    page_size: u64,
    discovery_error: Option<String>,
}

pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

pub fn wall_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

impl Sampler {
    pub fn new(cfg: SamplerConfig) -> Self {
        let mounts = CgroupMounts::load(&cfg.roots);
        // SAFETY: sysconf has no preconditions.
        let page_size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as u64;
        Sampler {
            cfg,
            watched: Vec::new(),
            since_discovery: None,
            unwatched: Default::default(),
            full_discovery_at: None,
            mounts,
            sockdiag: SockDiag::default(),
            sockdiag_error: None,
            prev_mono: None,
            prev_procs: HashMap::new(),
            prev_host: None,
            prev_netns: HashMap::new(),
            prev_sources: BTreeMap::new(),
            seq: 0,
            page_size,
            discovery_error: None,
        }
    }

    pub fn config(&self) -> &SamplerConfig {
        &self.cfg
    }

    fn rediscover(&mut self, now: u64, events: &mut Vec<Event>, wall: u64) {
        let due = match self.since_discovery {
            None => true,
            Some(t) => now.saturating_sub(t) >= self.cfg.discovery_every.as_nanos() as u64,
        };
        if !due {
            return;
        }
        self.since_discovery = Some(now);
        // Once a minute every process is examined again (pids are reused).
        if self
            .full_discovery_at
            .is_none_or(|t| now.saturating_sub(t) >= FULL_DISCOVERY_EVERY.as_nanos() as u64)
        {
            self.unwatched.clear();
            self.full_discovery_at = Some(now);
        }
        match discover_skipping(&self.cfg.roots, &self.cfg.rule, &self.unwatched) {
            Ok((found, unwatched)) => {
                self.unwatched.extend(unwatched);
                self.discovery_error = None;
                for w in &found {
                    if !self.watched.iter().any(|o| o.key == w.key) {
                        events.push(Event {
                            wall_ns: wall,
                            kind: EventKind::RankAppeared,
                            message: format!(
                                "{} appeared (pid {}, {})",
                                label_of(&w.labels, w.key.pid),
                                w.key.pid,
                                w.comm
                            ),
                        });
                    }
                }
                // Processes that vanished are reported when their read fails.
                let keep: Vec<Watched> = self
                    .watched
                    .iter()
                    .filter(|o| !found.iter().any(|w| w.key == o.key))
                    .cloned()
                    .collect();
                self.watched = found;
                self.watched.extend(keep);
            }
            Err(e) => {
                self.discovery_error = Some(format!(
                    "cannot list {}: {e}",
                    self.cfg.roots.proc.display()
                ))
            }
        }
    }

    /// Takes one sample and returns the frame (rates against the previous tick).
    pub fn tick(&mut self) -> Frame {
        let mono = mono_ns();
        let wall = wall_ns();
        let mut events = Vec::new();
        self.rediscover(mono, &mut events, wall);
        let dt_s = self
            .prev_mono
            .map(|p| (mono.saturating_sub(p)) as f64 / 1e9)
            .filter(|d| *d > 0.0);

        // Processes.
        let mut samples: Vec<(Watched, ProcSample, Option<u64>, String)> = Vec::new();
        let mut gone = Vec::new();
        for w in &self.watched {
            let dir = self.cfg.roots.pid_dir(w.key.pid);
            // Reuse the fd scan while the fd count holds, but rescan at least
            // every discovery period so a swapped socket is not missed for long.
            let prev = self.prev_procs.get(&w.key);
            let reuse = prev
                .filter(|p| {
                    mono.saturating_sub(p.fd_scan_ns) < self.cfg.discovery_every.as_nanos() as u64
                })
                .and_then(|p| {
                    p.sample.fds.map(|count| FdReuse {
                        count,
                        socket_inodes: &p.sample.socket_inodes,
                    })
                });
            let sched_due = prev
                .and_then(|p| p.migrations)
                .is_none_or(|(t, _)| mono.saturating_sub(t) >= SCHED_EVERY.as_nanos() as u64);
            let reuse = Reuse {
                fds: reuse,
                threads: prev.map(|p| &p.sample.per_thread),
                skip_sched: !sched_due,
            };
            match read_process(&dir, self.page_size, reuse) {
                Ok(s) if s.start_time == w.key.start_time => {
                    samples.push((w.clone(), s, w.netns, w.cgroup.clone()));
                }
                // Same pid, new start time: the watched process is gone and the pid reused.
                Ok(_) | Err(ReadError::Gone) => gone.push(w.clone()),
                Err(ReadError::Other(_)) => gone.push(w.clone()),
            }
        }
        for w in gone {
            self.watched.retain(|o| o.key != w.key);
            events.push(Event {
                wall_ns: wall,
                kind: EventKind::RankExited,
                message: format!(
                    "{} exited (pid {})",
                    label_of(&w.labels, w.key.pid),
                    w.key.pid
                ),
            });
        }

        // Sockets and TCP counters, once per network namespace.
        let mut tables: HashMap<u64, HashMap<u64, SocketRaw>> = HashMap::new();
        let mut netns_pids: BTreeMap<u64, Vec<u32>> = BTreeMap::new();
        for (w, _, netns, _) in &samples {
            if let Some(ns) = netns {
                netns_pids.entry(*ns).or_default().push(w.key.pid);
            }
        }
        let mut sockdiag_err = None;
        for (ns, pids) in &netns_pids {
            let dir = self.cfg.roots.pid_dir(pids[0]);
            let wanted: Vec<u64> = samples
                .iter()
                .filter(|(_, _, n, _)| *n == Some(*ns))
                .flat_map(|(_, s, _, _)| s.socket_inodes.iter().copied())
                .collect();
            let table = if self.cfg.sock_diag {
                match self.sockdiag.sockets(*ns, &dir, &wanted) {
                    Ok(t) => t,
                    Err(e) => {
                        sockdiag_err = Some(e);
                        read_tables(&dir)
                    }
                }
            } else {
                read_tables(&dir)
            };
            tables.insert(*ns, table);
        }
        let live_ns: Vec<u64> = netns_pids.keys().copied().collect();
        self.sockdiag.retain(&live_ns);
        self.sockdiag_error = sockdiag_err;

        let mut netns_frames = Vec::new();
        let mut new_prev_netns = HashMap::new();
        for (ns, pids) in &netns_pids {
            let dir = self.cfg.roots.pid_dir(pids[0]);
            let mut all = BTreeMap::new();
            for f in ["net/snmp", "net/netstat"] {
                if let Ok(t) = std::fs::read_to_string(dir.join(f)) {
                    all.extend(parse_pairs(&t));
                }
            }
            let counters: BTreeMap<String, u64> = all
                .into_iter()
                .filter(|(k, _)| KEPT.contains(&k.as_str()))
                .collect();
            let mut signals = Signals::new();
            if let (Some(dt), Some(prev)) = (dt_s, self.prev_netns.get(ns)) {
                for (k, name) in [
                    ("Tcp.RetransSegs", "retrans_segs_per_s"),
                    ("Tcp.OutSegs", "out_segs_per_s"),
                    ("Tcp.InSegs", "in_segs_per_s"),
                    ("TcpExt.TCPTimeouts", "timeouts_per_s"),
                ] {
                    if let (Some(p), Some(c)) = (prev.get(k), counters.get(k)) {
                        if let Some(r) = rate(*p, *c, dt) {
                            signals.insert(name.into(), r);
                        }
                    }
                }
            }
            new_prev_netns.insert(*ns, counters.clone());
            netns_frames.push(NetnsFrame {
                inode: *ns,
                pids: pids.clone(),
                counters,
                signals,
            });
        }
        self.prev_netns = new_prev_netns;

        // Ranks.
        let mut ranks = Vec::new();
        let mut new_prev = HashMap::new();
        for (w, s, netns, cgroup) in samples {
            let cfs_ns = self.mounts.cpu_stat_path(&cgroup).and_then(|(path, v)| {
                std::fs::read_to_string(path)
                    .ok()
                    .and_then(|t| parse_throttled_ns(&t, v))
            });
            let table = netns.and_then(|ns| tables.get(&ns));
            let sockets_raw: Vec<&SocketRaw> = s
                .socket_inodes
                .iter()
                .filter_map(|i| table.and_then(|t| t.get(i)))
                .collect();
            let prev = self.prev_procs.get(&w.key);
            // Migrations: a new reading gives a rate over the time since the
            // last reading; between readings the last rate carries on.
            let (migrations, migrations_rate) = match (s.migrations_known, prev) {
                (true, Some(p)) => {
                    let rate = p.migrations.and_then(|(t, total)| {
                        rate(total, s.nr_migrations, mono.saturating_sub(t) as f64 / 1e9)
                    });
                    (Some((mono, s.nr_migrations)), rate)
                }
                (true, None) => (Some((mono, s.nr_migrations)), None),
                (false, Some(p)) => (p.migrations, p.migrations_rate),
                (false, None) => (None, None),
            };
            let rank = build_rank(RankInput {
                w: &w,
                s: &s,
                netns,
                cfs_ns,
                sockets: &sockets_raw,
                prev,
                dt_s,
                migrations_rate,
                migrations,
            });
            let tcp = sockets_raw
                .iter()
                .filter_map(|r| r.info.clone().map(|i| (r.inode, i)))
                .collect();
            let fd_scan_ns = match prev {
                Some(p) if !s.fds_rescanned => p.fd_scan_ns,
                _ => mono,
            };
            new_prev.insert(
                w.key,
                ProcPrev {
                    sample: s,
                    fd_scan_ns,
                    migrations,
                    migrations_rate,
                    cfs_ns,
                    tcp,
                },
            );
            ranks.push(rank);
        }
        self.prev_procs = new_prev;

        // Host.
        let host = build_host(&read_host(&self.cfg.roots), self.prev_host.as_ref(), dt_s);
        self.prev_host = Some(host.clone());

        let mut sources = BTreeMap::new();
        sources.insert(
            "procfs".to_string(),
            match &self.discovery_error {
                None => SourceStatus::ok(),
                Some(e) => SourceStatus::unavailable(e.clone()),
            },
        );
        sources.insert(
            "sock_diag".to_string(),
            if !self.cfg.sock_diag {
                SourceStatus::unavailable("disabled")
            } else {
                match &self.sockdiag_error {
                    None => SourceStatus::ok(),
                    Some(e) => SourceStatus::degraded(format!("{e}; using /proc/<pid>/net/tcp")),
                }
            },
        );
        for (name, st) in &sources {
            match self.prev_sources.get(name) {
                Some(p) if p.is_ok() && !st.is_ok() => events.push(Event {
                    wall_ns: wall,
                    kind: EventKind::SourceLost,
                    message: format!("{name} lost: {}", st.reason.clone().unwrap_or_default()),
                }),
                Some(p) if !p.is_ok() && st.is_ok() => events.push(Event {
                    wall_ns: wall,
                    kind: EventKind::SourceRecovered,
                    message: format!("{name} recovered"),
                }),
                _ => {}
            }
        }
        self.prev_sources = sources.clone();

        self.prev_mono = Some(mono);
        let frame = Frame {
            version: FRAME_VERSION,
            seq: self.seq,
            wall_ns: wall,
            mono_ns: mono,
            node: self.cfg.node.clone(),
            interval_ms: self.cfg.interval.as_millis() as u64,
            host,
            ranks,
            netns: netns_frames,
            gpus: Vec::new(),
            sources,
            events,
            verdicts: Vec::new(),
            job_step_ms: BTreeMap::new(),
            flows: Vec::new(),
        };
        self.seq += 1;
        frame
    }
}

fn label_of(l: &Labels, pid: u32) -> String {
    match l.rank {
        Some(r) => format!("rank {r}"),
        None => format!("pid {pid}"),
    }
}

/// Everything one rank's frame is built from.
struct RankInput<'a> {
    w: &'a Watched,
    s: &'a ProcSample,
    netns: Option<u64>,
    cfs_ns: Option<u64>,
    sockets: &'a [&'a SocketRaw],
    prev: Option<&'a ProcPrev>,
    dt_s: Option<f64>,
    migrations_rate: Option<f64>,
    migrations: Option<(u64, u64)>,
}

fn build_rank(input: RankInput) -> RankFrame {
    let RankInput {
        w,
        s,
        netns,
        cfs_ns,
        sockets,
        prev,
        dt_s,
        migrations_rate,
        migrations,
    } = input;
    let mut sig = Signals::new();
    let mut put = |k: &str, v: Option<f64>| {
        if let Some(v) = v.filter(|v| v.is_finite()) {
            sig.insert(k.to_string(), v);
        }
    };
    put("threads", Some(s.threads as f64));
    put("rss_bytes", s.rss_bytes.map(|v| v as f64));
    put("affinity_cpus", s.affinity_cpus.map(|v| v as f64));
    put("fds", s.fds.map(|v| v as f64));
    put("sockets", s.fds.map(|_| s.socket_inodes.len() as f64));
    put("tcp_sockets", Some(sockets.len() as f64));
    put(
        "tx_queue_bytes",
        Some(sockets.iter().map(|x| x.tx_queue).sum::<u64>() as f64),
    );
    put(
        "rx_queue_bytes",
        Some(sockets.iter().map(|x| x.rx_queue).sum::<u64>() as f64),
    );
    let infos: Vec<&TcpInfo> = sockets.iter().filter_map(|x| x.info.as_ref()).collect();
    if !infos.is_empty() {
        put(
            "notsent_bytes",
            Some(
                infos
                    .iter()
                    .filter_map(|i| i.notsent_bytes)
                    .map(|v| v as f64)
                    .sum(),
            ),
        );
        let est: Vec<&&SocketRaw> = sockets
            .iter()
            .filter(|x| x.state == "ESTABLISHED" && x.info.is_some())
            .collect();
        put(
            "srtt_max_us",
            est.iter()
                .filter_map(|x| x.info.as_ref())
                .map(|i| i.rtt_us as f64)
                .reduce(f64::max),
        );
        put(
            "min_rtt_us",
            infos
                .iter()
                .filter_map(|i| i.min_rtt_us)
                .filter(|v| *v > 0 && *v != u32::MAX)
                .map(|v| v as f64)
                .reduce(f64::min),
        );
        put(
            "delivery_rate_bytes_per_s",
            Some(
                infos
                    .iter()
                    .filter_map(|i| i.delivery_rate)
                    .map(|v| v as f64)
                    .sum(),
            ),
        );
    }

    let mut socket_frames = Vec::with_capacity(sockets.len());
    let mut deltas = TcpDeltas::default();
    for raw in sockets {
        let mut ssig = Signals::new();
        if let (Some(p), Some(info), Some(dt)) = (prev, &raw.info, dt_s) {
            let mut d = TcpDeltas::default();
            d.add(p.tcp.get(&raw.inode), info);
            d.write(dt, &mut ssig);
            deltas.add(p.tcp.get(&raw.inode), info);
        }
        socket_frames.push(SocketFrame {
            inode: raw.inode,
            local: raw.local.to_string(),
            remote: raw.remote.to_string(),
            state: raw.state.to_string(),
            tx_queue: raw.tx_queue,
            rx_queue: raw.rx_queue,
            info: raw.info.clone(),
            signals: ssig,
        });
    }

    let mut threads = Vec::new();
    if let (Some(p), Some(dt)) = (prev, dt_s) {
        let ps = &p.sample;
        put("cpu_pct", rate(ps.exec_ns, s.exec_ns, dt).map(|r| r / 1e7));
        put(
            "run_delay_ms_per_s",
            rate(ps.run_delay_ns, s.run_delay_ns, dt).map(|r| r / 1e6),
        );
        put("migrations_per_s", migrations_rate);
        put(
            "ctx_voluntary_per_s",
            rate(ps.ctx_voluntary, s.ctx_voluntary, dt),
        );
        put(
            "ctx_involuntary_per_s",
            rate(ps.ctx_involuntary, s.ctx_involuntary, dt),
        );
        if let (Some(a), Some(b)) = (ps.io_read_bytes, s.io_read_bytes) {
            put("io_read_bytes_per_s", rate(a, b, dt));
        }
        if let (Some(a), Some(b)) = (ps.io_write_bytes, s.io_write_bytes) {
            put("io_write_bytes_per_s", rate(a, b, dt));
        }
        if let (Some(a), Some(b)) = (p.cfs_ns, cfs_ns) {
            put("cfs_throttled_ms_per_s", rate(a, b, dt).map(|r| r / 1e6));
        }
        if !infos.is_empty() {
            deltas.write(dt, &mut sig);
        }
        for (tid, t) in &s.per_thread {
            let Some(pt) = ps.per_thread.get(tid) else {
                continue;
            };
            let rd = rate(pt.run_delay_ns, t.run_delay_ns, dt).unwrap_or(0.0) / 1e6;
            let cpu = rate(pt.exec_ns, t.exec_ns, dt).unwrap_or(0.0) / 1e7;
            threads.push(ThreadFrame {
                tid: *tid,
                comm: t.comm.clone(),
                run_delay_ms_per_s: rd,
                cpu_pct: cpu,
            });
        }
        threads.sort_by(|a, b| {
            b.run_delay_ms_per_s
                .total_cmp(&a.run_delay_ms_per_s)
                .then(b.cpu_pct.total_cmp(&a.cpu_pct))
        });
        threads.truncate(8);
    } else {
        // First sight of this process: gauges only, no rates yet.
    }

    let sum = |f: &dyn Fn(&TcpInfo) -> Option<u64>| -> Option<u64> {
        (!infos.is_empty()).then(|| infos.iter().filter_map(|i| f(i)).sum())
    };
    let counters = RankCounters {
        cpu_ticks: s.cpu_ticks,
        ctx_voluntary: s.ctx_voluntary,
        ctx_involuntary: s.ctx_involuntary,
        run_delay_ns: s.run_delay_ns,
        exec_ns: s.exec_ns,
        nr_migrations: migrations.map_or(0, |(_, total)| total),
        io_read_bytes: s.io_read_bytes,
        io_write_bytes: s.io_write_bytes,
        cfs_throttled_ns: cfs_ns,
        tcp_total_retrans: sum(&|i| Some(i.total_retrans as u64)),
        tcp_segs_out: sum(&|i| i.segs_out.map(u64::from)),
        tcp_segs_in: sum(&|i| i.segs_in.map(u64::from)),
        tcp_bytes_acked: sum(&|i| i.bytes_acked),
        tcp_bytes_received: sum(&|i| i.bytes_received),
    };

    RankFrame {
        key: w.key,
        comm: s.comm.clone(),
        labels: w.labels.clone(),
        state: s.state.to_string(),
        netns,
        gpu: None,
        counters,
        signals: sig,
        sockets: socket_frames,
        threads,
        histograms: BTreeMap::new(),
    }
}

fn build_host(h: &HostSample, prev: Option<&HostFrame>, dt_s: Option<f64>) -> HostFrame {
    let mut sig = Signals::new();
    let mut put = |k: &str, v: Option<f64>| {
        if let Some(v) = v.filter(|v| v.is_finite()) {
            sig.insert(k.to_string(), v);
        }
    };
    let util = |p: (u64, u64), c: (u64, u64)| -> Option<f64> {
        let dt = c.1.checked_sub(p.1)?;
        let db = c.0.checked_sub(p.0)?;
        (dt > 0).then(|| db as f64 * 100.0 / dt as f64)
    };
    let mut cpu_pct = Vec::new();
    if let Some(p) = prev {
        put("cpu_util_pct", util(p.counters.cpu_total, h.cpu_total));
        for (i, c) in h.cpu_each.iter().enumerate() {
            cpu_pct.push(
                p.counters
                    .cpu_each
                    .get(i)
                    .and_then(|pc| util(*pc, *c))
                    .unwrap_or(0.0),
            );
        }
    }
    put("procs_running", h.procs_running.map(|v| v as f64));
    put("procs_blocked", h.procs_blocked.map(|v| v as f64));
    put("load1", h.loadavg.map(|l| l[0]));
    put("mem_available_bytes", h.mem_available.map(|v| v as f64));
    if let (Some(t), Some(a)) = (h.mem_total, h.mem_available) {
        put(
            "mem_used_pct",
            (t > 0).then(|| (t.saturating_sub(a)) as f64 * 100.0 / t as f64),
        );
    }
    put("shm_used_bytes", h.shm_used.map(|v| v as f64));
    put("shm_total_bytes", h.shm_total.map(|v| v as f64));
    for (i, name) in ["psi_cpu_some_pct", "psi_memory_some_pct", "psi_io_some_pct"]
        .iter()
        .enumerate()
    {
        put(name, h.psi[i].map(|(avg, _)| avg));
    }
    let interfaces = h
        .interfaces
        .iter()
        .map(|(name, (rx, tx))| {
            let p = prev.and_then(|p| p.interfaces.iter().find(|i| &i.name == name));
            InterfaceFrame {
                name: name.clone(),
                rx_bytes: *rx,
                tx_bytes: *tx,
                rx_bytes_per_s: p.zip(dt_s).and_then(|(p, dt)| rate(p.rx_bytes, *rx, dt)),
                tx_bytes_per_s: p.zip(dt_s).and_then(|(p, dt)| rate(p.tx_bytes, *tx, dt)),
            }
        })
        .collect();
    HostFrame {
        signals: sig,
        cpu_pct,
        interfaces,
        counters: HostCounters {
            cpu_total: h.cpu_total,
            cpu_each: h.cpu_each.clone(),
            psi_some_us: [
                h.psi[0].map(|p| p.1),
                h.psi[1].map(|p| p.1),
                h.psi[2].map(|p| p.1),
            ],
        },
    }
}
