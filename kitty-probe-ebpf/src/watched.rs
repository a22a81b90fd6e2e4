//! Keeps the probes' filters in step with the ranks of the frame, so that
//! the kernel side times and reports only the watched processes; the
//! run-queue probe's also gives each one the index of its histogram.

use crate::hist::RawHist;
use crate::mapped::MappedArray;
use aya::maps::{Array, HashMap as BpfHashMap, MapData};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// A BPF `watched` map (tgid -> 1) kept equal to a set of pids.
pub struct WatchedSet {
    map: BpfHashMap<MapData, u32, u8>,
    current: BTreeSet<u32>,
}

impl WatchedSet {
    pub fn new(map: BpfHashMap<MapData, u32, u8>) -> Self {
        WatchedSet {
            map,
            current: BTreeSet::new(),
        }
    }

    /// Adds the new pids and removes the gone ones.
    pub fn sync(&mut self, pids: &BTreeSet<u32>) {
        for pid in pids.difference(&self.current) {
            let _ = self.map.insert(pid, 1u8, 0);
        }
        for pid in self.current.difference(pids) {
            let _ = self.map.remove(pid);
        }
        self.current = pids.clone();
    }
}

/// Must match WATCH_SLOTS / MAX_WATCHED / COLLIDED / `struct slot` in
/// bpf/runq.bpf.c.
const WATCH_SLOTS: u32 = 1 << 12;
pub const MAX_WATCHED: u32 = 1024;
const COLLIDED: u32 = u32::MAX;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Slot {
    tgid: u32,
    idx: u32,
}
// SAFETY: repr(C) plain data without padding.
unsafe impl aya::Pod for Slot {}

/// The filter: an array slot per (tgid mod WATCH_SLOTS) holding the watched
/// tgid and its index, cheap to check on every context switch; slots two
/// watched tgids share say COLLIDED and the `watched` hash (tgid -> index)
/// decides. Indices are dense (0..MAX_WATCHED) and stay with a process while
/// it is watched; a process past MAX_WATCHED is not timed.
pub struct SlotFilter {
    slots: Array<MapData, Slot>,
    overflow: BpfHashMap<MapData, u32, u32>,
    /// The histograms, read in place (no `bpf()` call per process).
    hists: MappedArray<RawHist>,
    /// Watched tgid -> its index.
    idx: BTreeMap<u32, u32>,
    free: Vec<u32>,
    /// What the slots and the overflow hold now.
    written: Plan,
}

/// The run-queue object's `runq_hist` (made mappable), mapped.
fn mapped_hists(ebpf: &mut aya::Ebpf) -> Result<MappedArray<RawHist>, crate::load::ProbeError> {
    let map = ebpf
        .map("runq_hist")
        .ok_or_else(|| crate::load::ProbeError::Missing("map runq_hist".into()))?;
    let aya::maps::Map::Array(data) = map else {
        return Err(crate::load::ProbeError::Missing(
            "runq_hist as an array".into(),
        ));
    };
    MappedArray::new(data)
}

/// What the slots and the overflow hash hold: each used slot one watched
/// tgid, or COLLIDED where two or more share it (those tgids then in the
/// overflow).
#[derive(Default)]
struct Plan {
    slots: HashMap<u32, Slot>,
    overflow: BTreeSet<u32>,
}

impl SlotFilter {
    /// Takes the filter's maps (`watch_slots`, `watched`, `runq_hist`)
    /// from the loaded run-queue object.
    pub fn take(ebpf: &mut aya::Ebpf) -> Result<Self, crate::load::ProbeError> {
        Ok(SlotFilter {
            slots: crate::load::take_map(ebpf, "watch_slots")?,
            overflow: crate::load::take_map(ebpf, "watched")?,
            hists: mapped_hists(ebpf)?,
            idx: BTreeMap::new(),
            free: (0..MAX_WATCHED).rev().collect(),
            written: Plan::default(),
        })
    }

    /// A watched process's histogram as the kernel has it now.
    pub fn hist_of(&self, tgid: u32) -> Option<RawHist> {
        self.hists.get(*self.idx.get(&tgid)?)
    }

    /// The watched processes' indices, by pid.
    pub fn indices(&self) -> &BTreeMap<u32, u32> {
        &self.idx
    }

    /// Watches `pids` from now on: the gone leave the filter before their
    /// index is free, a new one's histogram is zeroed (and `fresh` called
    /// with its index, for what else is kept by index) before it enters.
    pub fn sync(&mut self, pids: &BTreeSet<u32>, mut fresh: impl FnMut(u32)) {
        let mut freed = Vec::new();
        self.idx.retain(|pid, i| {
            let keep = pids.contains(pid);
            if !keep {
                freed.push(*i);
            }
            keep
        });
        for &pid in pids {
            if self.idx.contains_key(&pid) {
                continue;
            }
            let Some(i) = self.free.pop() else { break };
            self.hists.set(i, RawHist::default());
            fresh(i);
            self.idx.insert(pid, i);
        }
        self.write(pids);
        // Only now that no slot names them may the indices go to others.
        self.free.extend(freed);
    }

    fn write(&mut self, pids: &BTreeSet<u32>) {
        let want = plan(&self.idx, pids);
        let was = &self.written;
        // The overflow first, so a slot turning COLLIDED finds its tgids.
        for pid in want.overflow.difference(&was.overflow) {
            let _ = self.overflow.insert(pid, self.idx[pid], 0);
        }
        for (slot, v) in &want.slots {
            if was.slots.get(slot) != Some(v) {
                let _ = self.slots.set(*slot, *v, 0);
            }
        }
        for slot in was.slots.keys() {
            if !want.slots.contains_key(slot) {
                let _ = self.slots.set(*slot, Slot::default(), 0);
            }
        }
        for pid in was.overflow.difference(&want.overflow) {
            let _ = self.overflow.remove(pid);
        }
        self.written = want;
    }
}

/// What the slots and the overflow should hold for `pids` with their
/// indices. A pid without an index (past MAX_WATCHED) is left out.
fn plan(idx: &BTreeMap<u32, u32>, pids: &BTreeSet<u32>) -> Plan {
    let mut want: HashMap<u32, Slot> = HashMap::new();
    let mut collided = BTreeSet::new();
    for &pid in pids {
        let Some(&idx) = idx.get(&pid) else {
            continue;
        };
        let slot = pid & (WATCH_SLOTS - 1);
        match want.get(&slot) {
            None => {
                want.insert(slot, Slot { tgid: pid, idx });
            }
            Some(other) => {
                if other.tgid != COLLIDED {
                    collided.insert(other.tgid);
                }
                collided.insert(pid);
                want.insert(
                    slot,
                    Slot {
                        tgid: COLLIDED,
                        idx: 0,
                    },
                );
            }
        }
    }
    Plan {
        slots: want,
        overflow: collided,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tgids_sharing_a_slot_go_to_the_overflow_with_their_index() {
        let a = 7;
        let b = 7 + WATCH_SLOTS;
        let c = 7 + 2 * WATCH_SLOTS;
        let d = 9;
        let idx: BTreeMap<u32, u32> = [(a, 0), (b, 1), (c, 2), (d, 3)].into();
        let p = plan(&idx, &[a, b, c, d, 99].into());
        assert_eq!(p.slots[&7].tgid, COLLIDED);
        assert_eq!(p.slots[&9], Slot { tgid: 9, idx: 3 });
        assert_eq!(p.overflow, [a, b, c].into());
        // 99 has no index (past MAX_WATCHED): not watched at all.
        assert!(!p.slots.contains_key(&99));
        let p = plan(&idx, &[a, d].into());
        assert_eq!(p.slots[&7], Slot { tgid: a, idx: 0 });
        assert!(p.overflow.is_empty());
    }

    #[test]
    fn the_layout_matches_the_kernel_side() {
        let src = include_str!("bpf/runq.bpf.c");
        let slots = format!(
            "#define WATCH_SLOTS (1 << {})",
            WATCH_SLOTS.trailing_zeros()
        );
        assert!(src.contains(&slots), "{slots}");
        assert!(src.contains(&format!("#define MAX_WATCHED {MAX_WATCHED}")));
        assert!(src.contains(&format!("#define COLLIDED {COLLIDED:#x}")));
        assert!(src.contains("struct slot {\n\tu32 tgid;"));
        assert_eq!(std::mem::size_of::<Slot>(), 8);
    }
}
