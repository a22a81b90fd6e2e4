//! Keeps a BPF `watched` map (tgid -> 1) in step with the ranks of the frame,
//! so that the kernel side times and reports only the watched processes.

use aya::maps::{HashMap as BpfHashMap, MapData};
use std::collections::BTreeSet;

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

/// Must match WATCH_SLOTS / COLLIDED in bpf/runq.bpf.c.
const WATCH_SLOTS: u32 = 1 << 18;
const COLLIDED: u32 = u32::MAX;

/// The run-queue probe's filter: an array slot per (tgid mod WATCH_SLOTS)
/// holding the watched tgid, cheap to check on every context switch; slots
/// two watched tgids share say COLLIDED and the `watched` hash decides.
pub struct SlotFilter {
    slots: aya::maps::Array<MapData, u32>,
    /// The tgids of colliding slots.
    overflow: WatchedSet,
    written: std::collections::HashMap<u32, u32>,
}

impl SlotFilter {
    pub fn new(
        slots: aya::maps::Array<MapData, u32>,
        overflow: BpfHashMap<MapData, u32, u8>,
    ) -> Self {
        SlotFilter {
            slots,
            overflow: WatchedSet::new(overflow),
            written: Default::default(),
        }
    }

    pub fn sync(&mut self, pids: &BTreeSet<u32>) {
        let mut want: std::collections::HashMap<u32, u32> = Default::default();
        let mut collided = BTreeSet::new();
        for &pid in pids {
            let slot = pid & (WATCH_SLOTS - 1);
            match want.get(&slot) {
                None => {
                    want.insert(slot, pid);
                }
                Some(&other) => {
                    if other != COLLIDED {
                        collided.insert(other);
                    }
                    collided.insert(pid);
                    want.insert(slot, COLLIDED);
                }
            }
        }
        self.overflow.sync(&collided);
        for (slot, v) in &want {
            if self.written.get(slot) != Some(v) {
                let _ = self.slots.set(*slot, *v, 0);
            }
        }
        for slot in self.written.keys() {
            if !want.contains_key(slot) {
                let _ = self.slots.set(*slot, 0, 0);
            }
        }
        self.written = want;
    }
}
