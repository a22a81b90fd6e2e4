//! Run-queue latency per watched process (p50/p99/max per tick, and the
//! interval's histogram for the detail view), and who ran instead: the
//! kernel charges each wait to the tasks that held the CPU meanwhile; this
//! takes the tick's charges (reads and empties the map) per rank, as a
//! share of the rank's wait.

use crate::hist::{Hist, RawHist};
use crate::load::{self, objects, ProbeError};
use crate::map_batch::MapBatch;
use crate::watched::SlotFilter;
use aya::maps::{HashMap as BpfHashMap, MapData};
use aya::Ebpf;
use kitty_core::model::rates::hundredths;
use kitty_core::model::{Frame, HistKind, RanInstead, Sig, Text};
use std::collections::{BTreeSet, HashMap};

/// Must match `struct culprit_key` / `struct culprit` in bpf/runq.bpf.c.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct CulpritKey {
    rank: u32,
    tgid: u32,
}
// SAFETY: repr(C) plain data without padding.
unsafe impl aya::Pod for CulpritKey {}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct Culprit {
    wait_ns: u64,
    cpu: u32,
    _pad: u32,
}
// SAFETY: repr(C) plain data with explicit padding.
unsafe impl aya::Pod for Culprit {}

/// The ways the culprit map can be taken (read and emptied), cheapest
/// first.
#[derive(Clone, Copy, Debug)]
pub enum CulpritRead {
    /// One `bpf(BPF_MAP_LOOKUP_AND_DELETE_BATCH)` call (Linux 5.6+).
    Batch,
    /// Three `bpf()` calls an entry: its key, its value, its deletion
    /// (always there).
    Lookups,
}

/// (rank, task, wait ns): a charge as the tests compare them.
pub type Charge = (u32, u32, u64);

/// A culprit entry from its key's and value's bytes.
fn culprit_of(key: &[u8], value: &[u8]) -> (CulpritKey, Culprit) {
    let u32_at = |b: &[u8], o: usize| u32::from_ne_bytes(b[o..o + 4].try_into().unwrap());
    (
        CulpritKey {
            rank: u32_at(key, 0),
            tgid: u32_at(key, 4),
        },
        Culprit {
            wait_ns: u64::from_ne_bytes(value[0..8].try_into().unwrap()),
            cpu: u32_at(value, 8),
            _pad: 0,
        },
    )
}

/// How a culprit is shown: its comm and container.
#[derive(Clone, Default)]
struct Named {
    comm: Text,
    pod_uid: Option<Text>,
    container_id: Option<Text>,
    /// When it was last charged (`Frame::mono_ns`).
    used_ns: u64,
}

/// A culprit's name is read again when it was not charged for this long:
/// its pid may since belong to another process.
const NAME_KEPT_NS: u64 = 10_000_000_000;

/// Forgets the names of culprits not charged for `NAME_KEPT_NS`.
fn forget_unused(names: &mut HashMap<u32, Named>, now: u64) {
    names.retain(|_, n| now.saturating_sub(n.used_ns) <= NAME_KEPT_NS);
}

/// Culprits kept per rank and tick.
const KEEP: usize = 5;

pub struct RunqProbe {
    _ebpf: Ebpf,
    /// The filter, and each watched process's histogram by its index.
    watched: SlotFilter,
    culprits: BpfHashMap<MapData, CulpritKey, Culprit>,
    /// The tick's charges taken in one batch call (else why, and three
    /// bpf() calls per entry through `culprits`).
    culprit_batch: Result<MapBatch, ProbeError>,
    prev: HashMap<u32, RawHist>,
    /// Culprit names and containers, by pid (read once while charged).
    names: HashMap<u32, Named>,
}

impl RunqProbe {
    pub fn start() -> Result<RunqProbe, ProbeError> {
        let mut ebpf = load::load_object(objects::RUNQ, &[])?;
        load::attach_all(&mut ebpf, &[("runq_switch", "sched_switch")])?;
        let watched = SlotFilter::take(&mut ebpf)?;
        let raw = ebpf
            .take_map("culprits")
            .ok_or_else(|| ProbeError::Missing("map culprits".into()))?;
        let aya::maps::Map::HashMap(data) = &raw else {
            return Err(ProbeError::Missing("culprits as a hash map".into()));
        };
        let culprit_batch = MapBatch::taking(data);
        let culprits = BpfHashMap::try_from(raw).map_err(|e| load::reason(&e))?;
        Ok(RunqProbe {
            _ebpf: ebpf,
            watched,
            culprits,
            culprit_batch,
            prev: HashMap::new(),
            names: HashMap::new(),
        })
    }

    fn name(&mut self, pid: u32, now: u64) -> Named {
        if pid == 0 {
            return Named {
                comm: Text::new("(idle)"),
                ..Default::default()
            };
        }
        let n = self.names.entry(pid).or_insert_with(|| {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .map(|s| Text::new(s.trim_end_matches('\n')))
                .unwrap_or_else(|_| Text::new("?"));
            let c = kitty_core::sources::labels::container_from_cgroup(
                &std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default(),
            );
            Named {
                comm,
                pod_uid: c.pod_uid.as_deref().map(Text::new),
                container_id: c.container_id.as_deref().map(Text::new),
                used_ns: now,
            }
        });
        n.used_ns = now;
        n.clone()
    }

    pub fn enrich(&mut self, frame: &mut Frame) {
        let pids: BTreeSet<u32> = frame.ranks.iter().map(|r| r.key.pid).collect();
        self.watched.sync(&pids);
        self.prev.retain(|pid, _| pids.contains(pid));
        let secs = frame.interval_ms.max(1) as f64 / 1000.0;
        let waits = self.take_culprits(&pids);
        for r in frame.ranks.iter_mut() {
            let pid = r.key.pid;
            if let Some(mine) = waits.get(&pid) {
                let total: u64 = mine.iter().map(|w| w.1).sum();
                let mut list: Vec<(u32, u64, u32)> = mine.clone();
                list.sort_by_key(|w| std::cmp::Reverse(w.1));
                list.truncate(KEEP);
                r.ran_instead = list
                    .into_iter()
                    .map(|(tgid, ns, cpu)| {
                        let n = self.name(tgid, frame.mono_ns);
                        RanInstead {
                            pid: tgid,
                            comm: n.comm,
                            // To 10 us a second and a whole percent: what
                            // the views and verdicts show, or finer; the
                            // noise digits were 6 % of a recording.
                            wait_ms_per_s: hundredths(ns as f64 / 1e6 / secs),
                            share_pct: (ns as f64 * 100.0 / total.max(1) as f64).round(),
                            cpu,
                            pod_uid: n.pod_uid,
                            container_id: n.container_id,
                        }
                    })
                    .collect();
            }
            let Some(raw) = self.watched.hist_of(pid) else {
                continue;
            };
            let d = Hist::delta(&raw, self.prev.get(&pid));
            self.prev.insert(pid, raw);
            if let Some([p50, p99, max]) = d.percentiles() {
                r.signals.set(Sig::RunqP50Us, p50);
                r.signals.set(Sig::RunqP99Us, p99);
                r.signals.set(Sig::RunqMaxUs, max);
                r.histograms.insert(HistKind::RunqUs, d.nonzero());
            }
        }
        forget_unused(&mut self.names, frame.mono_ns);
    }

    /// What it attached and how it reads the culprits, as `doctor` says.
    pub fn strategy(&self) -> String {
        let hooks = "tp_btf/sched_switch (sched_info.last_queued)";
        match &self.culprit_batch {
            Ok(_) => format!("{hooks}, culprits by lookup-and-delete batch"),
            // Still every signal, at three bpf() calls a culprit.
            Err(why) => format!("{hooks}, culprits by lookups (batch: {why})"),
        }
    }

    /// The charges since the last take, the cheapest way this kernel
    /// has (a failed batch falls back to lookups for that tick).
    fn culprit_entries(&mut self) -> Vec<(CulpritKey, Culprit)> {
        [CulpritRead::Batch, CulpritRead::Lookups]
            .into_iter()
            .find_map(|way| self.culprits_by(way))
            .unwrap_or_default()
    }

    /// The charges taken one way (the map is empty of them after), when
    /// this kernel has it.
    fn culprits_by(&mut self, way: CulpritRead) -> Option<Vec<(CulpritKey, Culprit)>> {
        Some(match way {
            CulpritRead::Batch => {
                let rows = self.culprit_batch.as_mut().ok()?.read().ok()?;
                rows.map(|(k, v)| culprit_of(k, v)).collect()
            }
            CulpritRead::Lookups => {
                let keys: Vec<CulpritKey> = self.culprits.keys().filter_map(Result::ok).collect();
                keys.into_iter()
                    .filter_map(|k| {
                        let c = self.culprits.get(&k, 0).ok()?;
                        let _ = self.culprits.remove(&k);
                        Some((k, c))
                    })
                    .collect()
            }
        })
    }

    /// The waits of a watched process counted so far, in us, and how many
    /// (for the test that they add up to the kernel's run delay).
    #[doc(hidden)]
    pub fn waits_of(&self, pid: u32) -> Option<(u64, u64)> {
        let h = self.watched.hist_of(pid)?;
        Some((h.sum_us, h.count))
    }

    /// The charges taken one way, sorted (for the tests of the ways);
    /// None where this kernel does not have that way.
    #[doc(hidden)]
    pub fn charges_by(&mut self, way: CulpritRead) -> Option<Vec<Charge>> {
        let mut v: Vec<Charge> = self
            .culprits_by(way)?
            .into_iter()
            .map(|(k, c)| (k.rank, k.tgid, c.wait_ns))
            .collect();
        v.sort();
        Some(v)
    }

    /// This tick's charges per rank: (culprit tgid, ns, cpu). Charges of
    /// a process no longer watched are dropped with the rest.
    fn take_culprits(&mut self, ranks: &BTreeSet<u32>) -> HashMap<u32, Vec<(u32, u64, u32)>> {
        let mut out: HashMap<u32, Vec<(u32, u64, u32)>> = HashMap::new();
        for (k, c) in self.culprit_entries() {
            if c.wait_ns > 0 && k.tgid != k.rank && ranks.contains(&k.rank) {
                out.entry(k.rank)
                    .or_default()
                    .push((k.tgid, c.wait_ns, c.cpu));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_culprit_not_charged_for_a_while_is_named_again() {
        let now = 100 * NAME_KEPT_NS;
        let named = |comm: &str, used_ns| Named {
            comm: Text::new(comm),
            used_ns,
            ..Default::default()
        };
        let mut names = HashMap::new();
        names.insert(10, named("hog", now));
        names.insert(11, named("recent", now - NAME_KEPT_NS));
        // Exited long ago: its pid may be another process's by now.
        names.insert(12, named("gone", now - NAME_KEPT_NS - 1));
        forget_unused(&mut names, now);
        let mut left: Vec<u32> = names.keys().copied().collect();
        left.sort();
        assert_eq!(left, [10, 11]);
    }
}
