//! Run-queue latency per watched process (p50/p99/max per tick, and the
//! interval's histogram for the detail view), and who ran instead: the
//! kernel charges each wait to the tasks that held the CPU meanwhile; this
//! takes the tick's charges per rank (`culprits`), as a share of the
//! rank's wait.

use crate::culprits::CulpritSlots;
use crate::hist::{Hist, RawHist};
use crate::load::{self, objects, ProbeError};
use crate::watched::SlotFilter;
use aya::Ebpf;
use kitty_core::model::rates::hundredths;
use kitty_core::model::{Frame, HistKind, RanInstead, Sig, Text};
use std::collections::{BTreeSet, HashMap};

/// (rank, task, wait ns): a charge as the tests compare them.
pub type Charge = (u32, u32, u64);

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
    /// Who ran instead, per watched index, read in place.
    culprits: CulpritSlots,
    prev: HashMap<u32, RawHist>,
    /// Culprit names and containers, by pid (read once while charged).
    names: HashMap<u32, Named>,
}

impl RunqProbe {
    pub fn start() -> Result<RunqProbe, ProbeError> {
        let mut ebpf = load::load_object(objects::RUNQ, &[])?;
        load::attach_all(&mut ebpf, &[("runq_switch", "sched_switch")])?;
        let watched = SlotFilter::take(&mut ebpf)?;
        let culprits = CulpritSlots::map(&mut ebpf)?;
        Ok(RunqProbe {
            _ebpf: ebpf,
            watched,
            culprits,
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
        let culprits = &mut self.culprits;
        self.watched.sync(&pids, |idx| culprits.zero(idx));
        self.prev.retain(|pid, _| pids.contains(pid));
        let secs = frame.interval_ms.max(1) as f64 / 1000.0;
        let mut waits = self.culprits.read(self.watched.indices(), frame.mono_ns);
        for r in frame.ranks.iter_mut() {
            let pid = r.key.pid;
            if let Some(mine) = waits.remove(&pid) {
                // A rank's own threads waiting for each other are not
                // another task: the shares are of the waits for others
                // (those charged to no task included).
                let mut list = mine.by_task;
                list.retain(|w| w.0 != pid);
                let total = list.iter().map(|w| w.1).sum::<u64>() + mine.rest_ns;
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
        "tp_btf/sched_switch (sched_info.last_queued), culprits read in place".into()
    }

    /// The waits of a watched process counted so far, in us, and how many
    /// (for the test that they add up to the kernel's run delay).
    #[doc(hidden)]
    pub fn waits_of(&self, pid: u32) -> Option<(u64, u64)> {
        let h = self.watched.hist_of(pid)?;
        Some((h.sum_us, h.count))
    }

    /// How many culprit slots of a watched process hold a task now (for
    /// the tests).
    #[doc(hidden)]
    pub fn culprit_slots_used(&self, pid: u32) -> Option<usize> {
        Some(self.culprits.used(*self.watched.indices().get(&pid)?))
    }

    /// The charges since the last read (this or a tick's), sorted, the
    /// waits charged to no task as task `u32::MAX` (for the tests).
    #[doc(hidden)]
    pub fn charges(&mut self, now_ns: u64) -> Vec<Charge> {
        let mut v: Vec<Charge> = Vec::new();
        for (rank, c) in self.culprits.read(self.watched.indices(), now_ns) {
            v.extend(c.by_task.iter().map(|&(tgid, ns, _)| (rank, tgid, ns)));
            if c.rest_ns > 0 {
                v.push((rank, u32::MAX, c.rest_ns));
            }
        }
        v.sort();
        v
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
