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

    /// Adds the new pids and removes the gone ones; returns the removed.
    pub fn sync(&mut self, pids: &BTreeSet<u32>) -> Vec<u32> {
        for pid in pids.difference(&self.current) {
            let _ = self.map.insert(pid, 1u8, 0);
        }
        let gone: Vec<u32> = self.current.difference(pids).copied().collect();
        for pid in &gone {
            let _ = self.map.remove(pid);
        }
        self.current = pids.clone();
        gone
    }
}
