//! Raw TCP RTT per rank. The kernel keeps a histogram per socket; each tick
//! reads the histograms of the ranks' own sockets (known from the core's
//! socket inventory), takes the interval's difference, and gives each rank
//! p50/p99/max and each socket its own p50 (which `kitty_core::links` turns
//! into the rank's link RTT).

use crate::hist::{Hist, RawHist};
use crate::load::{self, objects, ProbeError};
use crate::map_batch::{pod, MapBatch};
use aya::maps::{HashMap as BpfHashMap, MapData};
use aya::Ebpf;
use kitty_core::model::{Frame, HistKind, Sig};
// Seeded per process, and several times faster than SipHash on these keys.
use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};
use std::net::{IpAddr, SocketAddr};

/// Must match `struct sock_key` in bpf/rtt.bpf.c.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct SockKey {
    pub netns: u32,
    pub family: u16,
    pub lport: u16,
    pub rport: u16,
    pub _pad: u16,
    pub raddr: [u8; 16],
}
// SAFETY: repr(C) plain data with explicit padding.
unsafe impl aya::Pod for SockKey {}

/// Every field, in four words (the derived hash wrote six fields and the
/// address's sixteen bytes one call each: most of a lookup).
impl std::hash::Hash for SockKey {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        h.write_u64(
            u64::from(self.netns) | u64::from(self.family) << 32 | u64::from(self.lport) << 48,
        );
        h.write_u32(u32::from(self.rport) | u32::from(self._pad) << 16);
        h.write_u128(u128::from_ne_bytes(self.raddr));
    }
}

impl SockKey {
    /// The key the kernel computes for a socket with these endpoints.
    pub fn new(netns: u64, local: &SocketAddr, remote: &SocketAddr) -> SockKey {
        let mut raddr = [0u8; 16];
        let family = match remote.ip() {
            IpAddr::V4(a) => {
                raddr[..4].copy_from_slice(&a.octets());
                libc::AF_INET as u16
            }
            IpAddr::V6(a) => {
                raddr.copy_from_slice(&a.octets());
                libc::AF_INET6 as u16
            }
        };
        SockKey {
            netns: netns as u32,
            family,
            lport: local.port(),
            rport: remote.port(),
            _pad: 0,
            raddr,
        }
    }
}

/// The attach strategies, best first (the README's "eBPF probes" section says why).
const STRATEGIES: &[(&str, &str, &str)] = &[
    ("fentry", "fentry_rtt_estimator", "tcp_rtt_estimator"),
    ("kprobe", "kprobe_rtt_estimator", "tcp_rtt_estimator"),
    ("fentry", "fentry_ack_update_rtt", "tcp_ack_update_rtt"),
    ("kprobe", "kprobe_ack_update_rtt", "tcp_ack_update_rtt"),
    ("tp_btf", "tp_tcp_probe", "tcp_probe"),
];

pub struct RttProbe {
    _ebpf: Ebpf,
    map: BpfHashMap<MapData, SockKey, RawHist>,
    /// The map read whole, one `bpf()` call a tick; where this kernel has
    /// no batch lookups (before 5.6), a lookup per socket. With 8 x 64
    /// talking sockets the lookups were ~1.7 ms of a 2.5 ms enrich.
    batch: Option<MapBatch>,
    /// The kernel's port filter, and the ports set in it.
    ports: aya::maps::Array<MapData, u8>,
    ports_set: HashSet<u16>,
    pub strategy: String,
    /// Why the better strategies did not attach.
    pub tried: Vec<String>,
    /// Each socket's last reading and the tick it was read (the map is
    /// kept from tick to tick; sockets not read this tick leave it).
    prev: HashMap<SockKey, (RawHist, u64)>,
    /// Each connected socket's key by (namespace, inode), and the tick it
    /// was last seen: its endpoints parsed from the frame's text once, not
    /// every tick.
    keys: HashMap<(u64, u64), (SockKey, u64)>,
    tick: u64,
    /// Last p50 per rank pid and its age in ticks, to bridge a tick without
    /// an ACK on a very slow link.
    held: HashMap<u32, (f64, u32)>,
    /// A tick's working sets, kept from tick to tick with their room: the
    /// ports and sockets wanted, the entries not wanted, a socket's
    /// difference and each rank's sum (histograms of 256 buckets, ten of
    /// them zeroed and let go every tick before).
    scratch: Scratch,
}

#[derive(Default)]
struct Scratch {
    ports: HashSet<u16>,
    wanted: HashMap<SockKey, (usize, usize)>,
    unwanted: Vec<SockKey>,
    d: Hist,
    own: Vec<Hist>,
}

impl RttProbe {
    pub fn start() -> Result<RttProbe, ProbeError> {
        let mut ebpf = load::load_object(objects::RTT, &[])?;
        let mut tried = Vec::new();
        let mut strategy = None;
        for (kind, prog, func) in STRATEGIES {
            let r = match *kind {
                "fentry" => load::attach_fentry(&mut ebpf, prog, func),
                "kprobe" => load::attach_kprobe(&mut ebpf, prog, func),
                _ => load::attach_tp_btf(&mut ebpf, prog, func),
            };
            let name = if *kind == "tp_btf" {
                "tp_btf/tcp_probe + tcp_sock.rack.rtt_us".to_string()
            } else {
                format!("{kind}/{func}")
            };
            match r {
                Ok(()) => {
                    strategy = Some(name);
                    break;
                }
                Err(e) => tried.push(format!("{name}: {e}")),
            }
        }
        let strategy = strategy.ok_or_else(|| ProbeError::NoStrategy(tried.join("; ")))?;
        let map: BpfHashMap<MapData, SockKey, RawHist> = load::take_map(&mut ebpf, "rtt_hist")?;
        let batch = MapBatch::new(aya::maps::IterableMap::map(&map));
        let strategy = match &batch {
            Ok(_) => format!("{strategy}, histograms by batch lookup"),
            Err(e) => format!("{strategy}, a lookup per socket (no batch lookups: {e})"),
        };
        let batch = batch.ok();
        let ports = load::take_map(&mut ebpf, "watched_ports")?;
        Ok(RttProbe {
            _ebpf: ebpf,
            map,
            batch,
            ports,
            ports_set: HashSet::new(),
            strategy,
            tried,
            prev: HashMap::new(),
            keys: HashMap::new(),
            tick: 0,
            held: HashMap::new(),
            scratch: Scratch::default(),
        })
    }

    /// Keeps the kernel's port filter equal to the watched sockets' ports
    /// (`want` is left with the ports set before).
    fn sync_ports(&mut self, want: &mut HashSet<u16>) {
        for p in want.difference(&self.ports_set) {
            let _ = self.ports.set(*p as u32, 1, 0);
        }
        for p in self.ports_set.difference(want) {
            let _ = self.ports.set(*p as u32, 0, 0);
        }
        std::mem::swap(&mut self.ports_set, want);
    }

    /// A connected socket's key (None for one without a remote end, or
    /// text that is no address), parsed once per socket.
    fn key_of(&mut self, ns: u64, s: &kitty_core::model::SocketFrame) -> Option<SockKey> {
        if let Some((k, seen)) = self.keys.get_mut(&(ns, s.inode)) {
            *seen = self.tick;
            return Some(*k);
        }
        let local = s.local.parse::<SocketAddr>().ok()?;
        let remote = s.remote.parse::<SocketAddr>().ok()?;
        // Not kept while unconnected: the socket may connect later.
        if remote.port() == 0 {
            return None;
        }
        // A socket's endpoints are fixed once it is connected.
        let key = SockKey::new(ns, &local, &remote);
        self.keys.insert((ns, s.inode), (key, self.tick));
        Some(key)
    }

    /// The keys the kernel's map holds now (for tests).
    #[doc(hidden)]
    pub fn keys_in_map(&self) -> Vec<SockKey> {
        self.map.keys().filter_map(Result::ok).collect()
    }

    /// Whether the map is read by one batch lookup a tick.
    pub fn reads_by_batch(&self) -> bool {
        self.batch.is_some()
    }

    pub fn enrich(&mut self, frame: &mut Frame) {
        // Last tick's readings; only the sockets seen now are kept for the next.
        self.tick += 1;
        let tick = self.tick;
        let mut sc = std::mem::take(&mut self.scratch);
        sc.ports.clear();
        sc.wanted.clear();
        sc.unwanted.clear();
        // The ranks' connected sockets by their key: where each one's
        // reading goes.
        for (i, r) in frame.ranks.iter().enumerate() {
            let Some(ns) = r.netns else { continue };
            for (j, s) in r.sockets.iter().enumerate() {
                if let Some(key) = self.key_of(ns, s) {
                    sc.ports.insert(key.lport);
                    sc.wanted.insert(key, (i, j));
                }
            }
        }
        // Per rank: the interval's histogram over its own connections.
        sc.own.resize_with(frame.ranks.len(), Hist::default);
        sc.own.iter_mut().for_each(Hist::clear);
        let Scratch {
            wanted,
            unwanted,
            d,
            own,
            ..
        } = &mut sc;
        let prev = &mut self.prev;
        let mut take = |(i, j): (usize, usize), key: SockKey, raw: RawHist| {
            let before = prev.insert(key, (raw, tick));
            d.set_delta(&raw, before.as_ref().map(|(b, _)| b));
            if let Some(p50) = d.quantile(0.5) {
                frame.ranks[i].sockets[j].signals.set(Sig::RttP50Us, p50);
            }
            own[i].merge(d);
        };
        match self.batch.as_mut().map(MapBatch::read) {
            Some(Ok(rows)) => {
                for (k, v) in rows {
                    let Some(key) = pod::<SockKey>(k) else {
                        continue;
                    };
                    match (wanted.get(&key), pod::<RawHist>(v)) {
                        (Some(&at), Some(raw)) => take(at, key, raw),
                        _ => unwanted.push(key),
                    }
                }
            }
            _ => {
                for (&key, &at) in wanted.iter() {
                    if let Ok(raw) = self.map.get(&key, 0) {
                        take(at, key, raw);
                    }
                }
            }
        }
        // Entries of sockets not watched now (closed since, or another
        // process's on a watched port) go: the map holds ~1 KB a socket
        // until its LRU evicts it, and a batch read copies every entry.
        // One that comes back starts again from zero (a new reading).
        for key in sc.unwanted.drain(..) {
            let _ = self.map.remove(&key);
        }
        self.prev.retain(|_, (_, t)| *t == tick);
        self.keys.retain(|_, (_, t)| *t == tick);
        self.sync_ports(&mut sc.ports);
        let own = &sc.own;
        for (i, r) in frame.ranks.iter_mut().enumerate() {
            let h = &own[i];
            let pid = r.key.pid;
            match h.percentiles() {
                Some([p50, p99, max]) => {
                    r.signals.set(Sig::RttP50Us, p50);
                    r.signals.set(Sig::RttP99Us, p99);
                    r.signals.set(Sig::RttMaxUs, max);
                    r.histograms.insert(HistKind::RttUs, h.nonzero());
                    self.held.insert(pid, (p50, 0));
                }
                None => {
                    // No delivered ACK this tick: keep the last median for up
                    // to 2 s so a very slow link does not blink out of view.
                    if let Some((v, age)) = self.held.get_mut(&pid) {
                        *age += 1;
                        if *age <= 4 {
                            r.signals.set(Sig::RttP50Us, *v);
                        }
                    }
                }
            }
        }
        self.held
            .retain(|pid, _| frame.ranks.iter().any(|r| r.key.pid == *pid));
        self.scratch = sc;
    }
}
