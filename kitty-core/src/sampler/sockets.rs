//! The sockets phase: per network namespace, the watched ranks' TCP sockets
//! (from the task iterator's run over them, sock_diag for the rest, or
//! /proc/<pid>/net/tcp as the fallback) and the namespace's own TCP
//! counters (net/snmp, net/netstat), read once per namespace.

use super::procs::Sample;
use crate::model::rates::rate;
use crate::model::{NetnsFrame, Sig, Signals, SourceStatus, Text};
use crate::sources::kept::{Every, KeptFiles, Records};
use crate::sources::netstat::parse_kept;
use crate::sources::sockdiag::{SockDiag, Wanted};
use crate::sources::tasks::TcpSockets;
use crate::sources::tcp_table::{read_tables, SocketTable};
use crate::sources::Roots;
use std::collections::{BTreeMap, HashMap};

pub(super) struct SocketReader {
    use_sock_diag: bool,
    sockdiag: SockDiag,
    error: Option<String>,
    /// Each namespace's counters, read every [`NETNS_EVERY_NS`].
    netns: HashMap<u64, Every<NetnsRead>>,
}

/// How often a namespace's TCP counters (net/snmp, net/netstat) are read.
/// They are context (the exporter's `kitty_netns_*`, snapshots): no verdict
/// rests on them, and each read makes the kernel sum ~200 counters over
/// every CPU and print both files, per namespace (a pod per rank is a
/// namespace per rank). Between reads a frame carries the last reading;
/// its rates are over the time between the two reads, so counters
/// integrated frame by frame (the exporter's) still add up.
const NETNS_EVERY_NS: u64 = 2_000_000_000;

/// A namespace's reading: its counters, and their rates since the one
/// before.
pub(super) struct NetnsRead {
    counters: BTreeMap<Text, u64>,
    signals: Signals,
}

/// inode -> socket, per network namespace.
pub(super) type Tables = HashMap<u64, SocketTable>;

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
            netns: HashMap::new(),
        }
    }

    /// Each namespace's wanted sockets: from `walked` (the task iterator's
    /// run over the watched TCP sockets) where the fd walks told the TCP
    /// ones apart, sock_diag for any it does not have, /proc/<pid>/net/tcp
    /// where sock_diag fails.
    pub fn read(
        &mut self,
        roots: &Roots,
        samples: &[Sample],
        mut walked: Option<TcpSockets>,
    ) -> Tables {
        let mut tables = HashMap::new();
        let mut err = None;
        let spaces = namespaces(samples);
        for (ns, pids) in &spaces {
            let dir = roots.pid_dir(pids[0]);
            let here = || samples.iter().filter(|(w, _)| w.netns == Some(*ns));
            // Only the TCP sockets sock_diag can find, where the fd walk
            // told them apart; every socket where it could not.
            let mut wanted: Vec<u64> = here()
                .flat_map(|(_, s)| s.tcp_inodes.as_ref().unwrap_or(&s.socket_inodes))
                .copied()
                .collect();
            let kinds = if here().all(|(_, s)| s.tcp_inodes.is_some()) {
                Wanted::ConnectableTcp
            } else {
                Wanted::AnySocket
            };
            let mut found = HashMap::new();
            if let Some(walked) = walked.as_mut().filter(|_| kinds == Wanted::ConnectableTcp) {
                // A socket the run has is done; one it does not have is
                // not connected any more (or was not listed): sock_diag
                // says which (a lookup that finds nothing, when closed).
                wanted.retain(|inode| match walked.remove(inode) {
                    Some(raw) => {
                        found.insert(*inode, raw);
                        false
                    }
                    None => true,
                });
            }
            let mut table = if wanted.is_empty() {
                SocketTable::default()
            } else if self.use_sock_diag {
                match self.sockdiag.sockets(*ns, &dir, &wanted, kinds) {
                    Ok(t) => t,
                    Err(e) => {
                        err = Some(e.to_string());
                        read_tables(&dir)
                    }
                }
            } else {
                read_tables(&dir)
            };
            table.extend(found);
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

    /// The namespaces' TCP counters and their rates, read every
    /// [`NETNS_EVERY_NS`].
    pub fn netns_frames(
        &mut self,
        roots: &Roots,
        samples: &[Sample],
        mono: u64,
        files: &mut KeptFiles,
    ) -> Vec<NetnsFrame> {
        const FILES: [&str; 2] = ["net/snmp", "net/netstat"];
        let mut frames = Vec::new();
        let mut next = HashMap::new();
        for (ns, pids) in namespaces(samples) {
            let dir = roots.pid_dir(pids[0]);
            let mut every = self
                .netns
                .remove(&ns)
                .unwrap_or_else(|| Every::new(NETNS_EVERY_NS));
            let paths = FILES.map(|f| dir.join(f));
            let keep = paths.iter().map(|p| (p.as_path(), ns));
            let read = every.at(mono, files, keep, |files, last| {
                let mut all = BTreeMap::new();
                for path in &paths {
                    // Kept under the namespace's inode: the file reads the
                    // namespace its process was in when it was opened.
                    if let Some(t) = files.read_keyed(path, ns, Records::One) {
                        all.extend(parse_kept(&t));
                    }
                }
                let counters = all.into_iter().map(|(k, v)| (Text::new(&k), v)).collect();
                let signals = last
                    .map(|(at, last)| rates(&last.counters, &counters, mono.saturating_sub(at)))
                    .unwrap_or_default();
                NetnsRead { counters, signals }
            });
            frames.push(NetnsFrame {
                inode: ns,
                pids,
                counters: read.counters.clone(),
                signals: read.signals.clone(),
            });
            next.insert(ns, every);
        }
        self.netns = next;
        frames
    }
}

/// The namespace's rates from the counters `dt_ns` ago to these.
fn rates(prev: &BTreeMap<Text, u64>, counters: &BTreeMap<Text, u64>, dt_ns: u64) -> Signals {
    let dt = dt_ns as f64 / 1e9;
    let mut signals = Signals::new();
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
    signals
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ProcKey;
    use crate::sources::discovery::Watched;
    use crate::sources::process::ProcSample;
    use crate::sources::tcp_table::SocketRaw;

    /// The watched process both tests sample: pid 42, in namespace 7.
    fn rank_42_in_netns_7() -> Watched {
        Watched {
            key: ProcKey {
                pid: 42,
                start_time: 1,
            },
            comm: Text::new("rank"),
            ppid: 1,
            labels: Default::default(),
            nccl: Vec::new(),
            nic_numa: Vec::new(),
            role: Default::default(),
            cgroup: String::new(),
            netns: Some(7),
        }
    }

    /// A proc root with one process whose namespace's counters are these.
    fn write_counters(root: &std::path::Path, out_segs: u64, retrans: u64, timeouts: u64) {
        let net = root.join("42/net");
        std::fs::create_dir_all(&net).unwrap();
        for (f, text) in [
            (
                "snmp",
                format!("Tcp: InSegs OutSegs RetransSegs\nTcp: 100 {out_segs} {retrans}\n"),
            ),
            (
                "netstat",
                format!("TcpExt: TCPTimeouts\nTcpExt: {timeouts}\n"),
            ),
        ] {
            std::fs::write(net.join(f), text).unwrap();
        }
    }

    #[test]
    fn the_walked_sockets_are_taken_and_only_the_others_asked_for() {
        let d = tempfile::tempdir().unwrap();
        let roots = Roots::new(d.path());
        std::fs::create_dir_all(d.path().join("42/net")).unwrap();
        let table = include_str!("../../tests/fixtures/proc/net_tcp");
        std::fs::write(d.path().join("42/net/tcp"), table).unwrap();
        let mut established: Vec<u64> = crate::sources::tcp_table::parse_table(table)
            .into_iter()
            .filter(|s| s.state == "ESTABLISHED" && s.inode > 0)
            .map(|s| s.inode)
            .collect();
        established.truncate(2);
        let [a, b] = established[..] else {
            panic!("the fixture has two established sockets")
        };
        let w = rank_42_in_netns_7();
        let sample = |tcp: Option<Vec<u64>>| ProcSample {
            socket_inodes: vec![a, b],
            tcp_inodes: tcp,
            ..ProcSample::default()
        };
        let walked_raw = |inode| SocketRaw {
            inode,
            local: "10.0.0.1:1".parse().unwrap(),
            remote: "10.0.0.2:2".parse().unwrap(),
            state: "ESTABLISHED",
            tx_queue: 0,
            rx_queue: 0,
            info: Some(Default::default()),
        };
        // /proc/<pid>/net/tcp answers for what the walk does not have (it
        // has no tcp_info).
        let mut r = SocketReader::new(false);
        let walked: TcpSockets = [(a, walked_raw(a))].into_iter().collect();
        let tcp = [(&w, sample(Some(vec![a, b])))];
        let t = &r.read(&roots, &tcp, Some(walked.clone()))[&7];
        assert_eq!(t[&a], walked_raw(a));
        assert!(t[&b].info.is_none() && t[&b].inode == b);
        // All walked: nothing else read (the table's other sockets absent).
        let walked: TcpSockets = [a, b].map(|i| (i, walked_raw(i))).into_iter().collect();
        let t = &r.read(&roots, &tcp, Some(walked.clone()))[&7];
        assert_eq!(t.len(), 2);
        assert!(t.values().all(|s| s.info.is_some()));
        // Sockets the fd scan could not tell apart (no walk of the open
        // files, so none of them listed): the walk is not asked.
        let any = [(&w, sample(None))];
        let t = &r.read(&roots, &any, Some(walked))[&7];
        assert!(t[&a].info.is_none() && t[&b].info.is_none());
    }

    #[test]
    fn a_namespaces_counters_are_read_every_two_seconds_and_carried_between() {
        let d = tempfile::tempdir().unwrap();
        let roots = Roots::new(d.path());
        let w = rank_42_in_netns_7();
        let samples = [(&w, ProcSample::default())];
        let (mut r, mut files) = (SocketReader::new(false), KeptFiles::default());
        let at = |r: &mut SocketReader, files: &mut KeptFiles, ms: u64| {
            let f = r.netns_frames(&roots, &samples, ms * 1_000_000, files);
            files.sweep();
            assert_eq!((f.len(), f[0].inode, f[0].pids.clone()), (1, 7, vec![42]));
            f.into_iter().next().unwrap()
        };
        let out = |f: &NetnsFrame| f.counters.get(&Text::new("Tcp.OutSegs")).copied();

        write_counters(d.path(), 1_000, 10, 1);
        let first = at(&mut r, &mut files, 0);
        assert_eq!(out(&first), Some(1_000));
        assert!(first.signals.get(Sig::OutSegsPerS).is_none(), "no rate yet");

        // Within two seconds: the files are not read again, the reading is
        // carried, and the files stay open.
        write_counters(d.path(), 3_000, 30, 2);
        let carried = at(&mut r, &mut files, 1_500);
        assert_eq!(carried, first);
        assert_eq!(files.len(), 2, "snmp and netstat kept open");

        // Two seconds on: read, with rates over the two seconds.
        let second = at(&mut r, &mut files, 2_000);
        assert_eq!(out(&second), Some(3_000));
        assert_eq!(second.signals.get(Sig::OutSegsPerS), Some(1_000.0));
        assert_eq!(second.signals.get(Sig::RetransSegsPerS), Some(10.0));
        assert_eq!(second.signals.get(Sig::TimeoutsPerS), Some(0.5));
        let carried = at(&mut r, &mut files, 2_500);
        assert_eq!(carried, second, "the rates carried with their counters");
    }
}
