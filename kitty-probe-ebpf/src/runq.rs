//! Run-queue latency per watched process: p50/p99/max per tick and the
//! interval's histogram for the detail view.

use crate::hist::{Hist, RawHist};
use crate::load::{self, objects, ProbeError};
use crate::watched::SlotFilter;
use aya::maps::{HashMap as BpfHashMap, MapData};
use aya::Ebpf;
use kitty_core::model::{Frame, HistKind, Sig};
use std::collections::{BTreeSet, HashMap};

pub struct RunqProbe {
    _ebpf: Ebpf,
    watched: SlotFilter,
    hists: BpfHashMap<MapData, u32, RawHist>,
    prev: HashMap<u32, RawHist>,
}

impl RunqProbe {
    pub fn start() -> Result<RunqProbe, ProbeError> {
        let mut ebpf = load::load_object(objects::RUNQ, &[])?;
        load::attach_all(
            &mut ebpf,
            &[
                ("runq_wakeup", "sched_wakeup"),
                ("runq_wakeup_new", "sched_wakeup_new"),
                ("runq_switch", "sched_switch"),
            ],
        )?;
        let overflow = load::take_map(&mut ebpf, "watched")?;
        let slots = load::take_map(&mut ebpf, "watch_slots")?;
        let hists = load::take_map(&mut ebpf, "runq_hist")?;
        Ok(RunqProbe {
            _ebpf: ebpf,
            watched: SlotFilter::new(slots, overflow),
            hists,
            prev: HashMap::new(),
        })
    }

    pub fn enrich(&mut self, frame: &mut Frame) {
        let pids: BTreeSet<u32> = frame.ranks.iter().map(|r| r.key.pid).collect();
        self.watched.sync(&pids);
        let gone: Vec<u32> = self
            .prev
            .keys()
            .filter(|p| !pids.contains(p))
            .copied()
            .collect();
        for pid in gone {
            let _ = self.hists.remove(&pid);
            self.prev.remove(&pid);
        }
        for r in frame.ranks.iter_mut() {
            let pid = r.key.pid;
            let Ok(raw) = self.hists.get(&pid, 0) else {
                continue;
            };
            let d = Hist::delta(&raw, self.prev.get(&pid));
            self.prev.insert(pid, raw);
            if let Some(p50) = d.quantile(0.5) {
                r.signals.set(Sig::RunqP50Us, p50);
                r.signals
                    .set(Sig::RunqP99Us, d.quantile(0.99).unwrap_or(p50));
                r.signals.set_opt(Sig::RunqMaxUs, d.max_in_interval());
                r.histograms.insert(HistKind::RunqUs, d.nonzero());
            }
        }
    }
}
