//! The sockets phase: per network namespace, the watched ranks' TCP sockets
//! (sock_diag, or /proc/<pid>/net/tcp as the fallback) and the namespace's
//! own TCP counters (net/snmp, net/netstat), read once per namespace.

use super::procs::Sample;
use crate::model::rates::rate;
use crate::model::{NetnsFrame, Sig, Signals, SourceStatus, Text};
use crate::sources::kept::KeptFiles;
use crate::sources::netstat::parse_kept;
use crate::sources::sockdiag::SockDiag;
use crate::sources::tcp_table::{read_tables, SocketRaw};
use crate::sources::Roots;
use std::collections::{BTreeMap, HashMap};

pub(super) struct SocketReader {
    use_sock_diag: bool,
    sockdiag: SockDiag,
    error: Option<String>,
    prev_netns: HashMap<u64, BTreeMap<Text, u64>>,
}

/// inode -> socket, per network namespace.
pub(super) type Tables = HashMap<u64, HashMap<u64, SocketRaw>>;

/// The namespaces of this tick's samples, with their processes' pids.
fn namespaces(samples: &[Sample]) -> BTreeMap<u64, Vec<u32>> {
    let mut out: BTreeMap<u64, Vec<u32>> = BTreeMap::new();
    for (w, _) in samples {
        if let Some(ns) = w.netns {
            out.entry(ns).or_default().push(w.key.pid);
        }
    }
    out
}

impl SocketReader {
    pub fn new(use_sock_diag: bool) -> Self {
        SocketReader {
            use_sock_diag,
            sockdiag: SockDiag::default(),
            error: None,
            prev_netns: HashMap::new(),
        }
    }

    pub fn read(&mut self, roots: &Roots, samples: &[Sample]) -> Tables {
        let mut tables = HashMap::new();
        let mut err = None;
        let spaces = namespaces(samples);
        for (ns, pids) in &spaces {
            let dir = roots.pid_dir(pids[0]);
            let wanted: Vec<u64> = samples
                .iter()
                .filter(|(w, _)| w.netns == Some(*ns))
                .flat_map(|(_, s)| s.socket_inodes.iter().copied())
                .collect();
            let table = if self.use_sock_diag {
                match self.sockdiag.sockets(*ns, &dir, &wanted) {
                    Ok(t) => t,
                    Err(e) => {
                        err = Some(e.to_string());
                        read_tables(&dir)
                    }
                }
            } else {
                read_tables(&dir)
            };
            tables.insert(*ns, table);
        }
        let live: Vec<u64> = spaces.keys().copied().collect();
        self.sockdiag.retain(&live);
        self.error = err;
        tables
    }

    pub fn status(&self) -> SourceStatus {
        if !self.use_sock_diag {
            return SourceStatus::unavailable("disabled");
        }
        match &self.error {
            None => SourceStatus::ok(),
            Some(e) => SourceStatus::degraded(format!("{e}; using /proc/<pid>/net/tcp")),
        }
    }

    /// The namespaces' TCP counters and their rates.
    pub fn netns_frames(
        &mut self,
        roots: &Roots,
        samples: &[Sample],
        dt_s: Option<f64>,
        files: &mut KeptFiles,
    ) -> Vec<NetnsFrame> {
        let mut frames = Vec::new();
        let mut next = HashMap::new();
        for (ns, pids) in namespaces(samples) {
            let dir = roots.pid_dir(pids[0]);
            let mut all = BTreeMap::new();
            for f in ["net/snmp", "net/netstat"] {
                // Kept under the namespace's inode: the file reads the
                // namespace its process was in when it was opened.
                if let Some(t) = files.read_keyed(&dir.join(f), ns) {
                    all.extend(parse_kept(&t));
                }
            }
            let counters: BTreeMap<Text, u64> =
                all.into_iter().map(|(k, v)| (Text::new(&k), v)).collect();
            let mut signals = Signals::new();
            if let (Some(dt), Some(prev)) = (dt_s, self.prev_netns.get(&ns)) {
                for (k, sig) in [
                    ("Tcp.RetransSegs", Sig::RetransSegsPerS),
                    ("Tcp.OutSegs", Sig::OutSegsPerS),
                    ("Tcp.InSegs", Sig::InSegsPerS),
                    ("TcpExt.TCPTimeouts", Sig::TimeoutsPerS),
                ] {
                    let k = Text::new(k);
                    if let (Some(p), Some(c)) = (prev.get(&k), counters.get(&k)) {
                        signals.set_opt(sig, rate(*p, *c, dt));
                    }
                }
            }
            next.insert(ns, counters.clone());
            frames.push(NetnsFrame {
                inode: ns,
                pids,
                counters,
                signals,
            });
        }
        self.prev_netns = next;
        frames
    }
}
