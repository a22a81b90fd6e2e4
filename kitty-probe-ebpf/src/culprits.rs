//! Who ran instead of each watched process: the run-queue probe's culprit
//! slots (per watched index, a task and every wait charged to it), read in
//! place each tick as the charges since the tick before; a slot whose task
//! was not charged for a while is freed for another.

use crate::load::ProbeError;
use crate::mapped::MappedArray;
use std::collections::{BTreeMap, HashMap};

/// Must match CULPRIT_SLOTS and `struct culprit` in bpf/runq.bpf.c.
pub const SLOTS: usize = 32;
/// The last slot: the waits of tasks that found no slot free.
const REST: usize = SLOTS - 1;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Culprit {
    /// The task's tgid + 1 (1: the CPU was idle); 0: free.
    pub who: u32,
    pub cpu: u32,
    /// Every wait charged since the slot was zeroed (the kernel only adds).
    pub wait_ns: u64,
}
// SAFETY: repr(C) plain data without padding.
unsafe impl aya::Pod for Culprit {}

/// A slot freed when its task was not charged for this long: its slot goes
/// to the next new task, and one idle for 10 s is unlikely to be charged
/// again in the moment it is freed (a charge landing then goes to the
/// slot's next task).
const FREE_AFTER_NS: u64 = 10_000_000_000;

/// A task's waits charged since the last read: (its tgid, wait ns, the CPU
/// of the last one).
pub type TaskWait = (u32, u64, u32);

/// A watched process's charges since the last read.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Charges {
    /// By task, each task once.
    pub by_task: Vec<TaskWait>,
    /// Waits charged to no task (every slot was taken).
    pub rest_ns: u64,
}

impl Charges {
    /// Every wait charged, the rest included.
    pub fn total_ns(&self) -> u64 {
        self.by_task.iter().map(|c| c.1).sum::<u64>() + self.rest_ns
    }
}

/// What the last read of a slot saw.
#[derive(Clone, Copy, Default)]
struct Seen {
    wait_ns: u64,
    /// When its task was last charged (`mono` ns).
    charged_at: u64,
}

/// The kernel's culprit slots, mapped, and what was last read of each
/// watched process's.
pub struct CulpritSlots {
    slots: MappedArray<Culprit>,
    /// By watched pid.
    seen: HashMap<u32, [Seen; SLOTS]>,
}

impl CulpritSlots {
    /// Maps the run-queue object's `culprits` array.
    pub fn map(ebpf: &mut aya::Ebpf) -> Result<Self, ProbeError> {
        Ok(CulpritSlots {
            slots: MappedArray::of(ebpf, "culprits")?,
            seen: HashMap::new(),
        })
    }

    /// Empties index `idx`'s slots before a new process is given it.
    pub fn zero(&mut self, idx: u32) {
        for s in 0..SLOTS as u32 {
            self.slots.set(idx * SLOTS as u32 + s, Culprit::default());
        }
    }

    /// How many of index `idx`'s slots hold a task now (for the tests).
    pub fn used(&self, idx: u32) -> usize {
        (0..REST as u32)
            .filter_map(|s| self.slots.get(idx * SLOTS as u32 + s))
            .filter(|c| c.who != 0)
            .count()
    }

    /// Each watched process's (pid -> index) charges since the last read,
    /// at `now` (`mono` ns); frees the slots of tasks idle too long.
    pub fn read(&mut self, watched: &BTreeMap<u32, u32>, now: u64) -> HashMap<u32, Charges> {
        self.seen.retain(|pid, _| watched.contains_key(pid));
        let mut out = HashMap::new();
        for (&pid, &idx) in watched {
            let base = idx * SLOTS as u32;
            let mut table = [Culprit::default(); SLOTS];
            for (s, c) in table.iter_mut().enumerate() {
                *c = self.slots.get(base + s as u32).unwrap_or_default();
            }
            let seen = self.seen.entry(pid).or_insert([Seen::default(); SLOTS]);
            let (charges, stale) = read_slots(&table, seen, now);
            for s in stale {
                // Only this side sets a slot free, and only the kernel
                // claims a free one: the swap fails if the slot is free
                // already, never because the kernel changed its task.
                if let Some(who) = self.slots.atomic_u32(base + s as u32, 0) {
                    let _ = who.compare_exchange(
                        table[s].who,
                        0,
                        std::sync::atomic::Ordering::Relaxed,
                        std::sync::atomic::Ordering::Relaxed,
                    );
                }
            }
            if charges.total_ns() > 0 {
                out.insert(pid, charges);
            }
        }
        out
    }
}

/// One process's slots as read now against what was seen before: the
/// charges since (a task in two slots summed, which a slot freed and
/// claimed again can give), and the slots to free.
fn read_slots(
    table: &[Culprit; SLOTS],
    seen: &mut [Seen; SLOTS],
    now: u64,
) -> (Charges, Vec<usize>) {
    let mut charges = Charges::default();
    let mut stale = Vec::new();
    for (s, (c, was)) in table.iter().zip(seen.iter_mut()).enumerate() {
        // The kernel only adds: less than before means zeroed since.
        let d = c.wait_ns.checked_sub(was.wait_ns).unwrap_or(c.wait_ns);
        was.wait_ns = c.wait_ns;
        if d > 0 {
            was.charged_at = now;
            if s == REST {
                charges.rest_ns += d;
            } else if c.who != 0 {
                charges.by_task.push((c.who - 1, d, c.cpu));
            }
        } else if c.who != 0 && s != REST && now.saturating_sub(was.charged_at) > FREE_AFTER_NS {
            stale.push(s);
        }
    }
    // By task, a task in two slots summed with the CPU of its later slot:
    // one vector where a tree of tasks took a node and then a vector, for
    // every watched process every tick (the sort is stable).
    let list = &mut charges.by_task;
    list.sort_by_key(|w| w.0);
    list.dedup_by(|later, kept| {
        let same = later.0 == kept.0;
        if same {
            kept.1 += later.1;
            kept.2 = later.2;
        }
        same
    });
    (charges, stale)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(tgid: u32, wait_ns: u64, cpu: u32) -> Culprit {
        Culprit {
            who: tgid + 1,
            cpu,
            wait_ns,
        }
    }

    /// A process's slots, all free, and nothing read of them yet.
    fn empty() -> ([Culprit; SLOTS], [Seen; SLOTS]) {
        ([Culprit::default(); SLOTS], [Seen::default(); SLOTS])
    }

    #[test]
    fn a_read_gives_what_was_charged_since_the_last_one() {
        let (mut table, mut seen) = empty();
        table[3] = slot(0, 500, 1); // idle
        table[7] = slot(42, 1_000, 0);
        let (c, stale) = read_slots(&table, &mut seen, 1);
        assert_eq!(c.by_task, [(0, 500, 1), (42, 1_000, 0)]);
        assert!(stale.is_empty());
        table[7].wait_ns = 1_600;
        table[7].cpu = 1;
        table[REST].wait_ns = 70;
        let (c, _) = read_slots(&table, &mut seen, 2);
        assert_eq!(c.by_task, [(42, 600, 1)], "idle was not charged again");
        assert_eq!(c.rest_ns, 70);
        assert_eq!(c.total_ns(), 670);
    }

    #[test]
    fn a_task_in_two_slots_is_one_charge() {
        let (mut table, mut seen) = empty();
        table[1] = slot(9, 100, 0);
        table[2] = slot(9, 50, 1);
        let (c, _) = read_slots(&table, &mut seen, 1);
        assert_eq!(c.by_task, [(9, 150, 1)]);
        // Another task between its two slots: each task once, by tgid,
        // with the CPU of its later slot.
        table[3] = slot(4, 30, 0);
        table[5] = slot(9, 20, 0);
        let (c, _) = read_slots(&table, &mut seen, 2);
        assert_eq!(c.by_task, [(4, 30, 0), (9, 20, 0)]);
        table[1].wait_ns += 5;
        table[3].wait_ns += 7;
        table[5].wait_ns += 1;
        table[2].wait_ns += 2;
        let (c, _) = read_slots(&table, &mut seen, 3);
        assert_eq!(c.by_task, [(4, 7, 0), (9, 8, 0)]);
    }

    #[test]
    fn a_slot_idle_too_long_is_freed_and_its_next_task_charged_from_then() {
        let (mut table, mut seen) = empty();
        table[4] = slot(77, 2_000, 0);
        read_slots(&table, &mut seen, 1);
        let (c, stale) = read_slots(&table, &mut seen, FREE_AFTER_NS);
        assert_eq!((c.total_ns(), stale.len()), (0, 0), "not idle long enough");
        let (_, stale) = read_slots(&table, &mut seen, FREE_AFTER_NS + 2);
        assert_eq!(stale, [4]);
        // Freed, then claimed by another task that waits 300 ns more: the
        // slot's total goes on from the old task's.
        table[4] = slot(88, 2_300, 1);
        let (c, _) = read_slots(&table, &mut seen, FREE_AFTER_NS + 3);
        assert_eq!(c.by_task, [(88, 300, 1)]);
    }

    #[test]
    fn a_zeroed_slot_counts_from_zero() {
        let (mut table, mut seen) = empty();
        table[0] = slot(5, 9_000, 0);
        read_slots(&table, &mut seen, 1);
        table[0] = slot(6, 400, 0);
        let (c, _) = read_slots(&table, &mut seen, 2);
        assert_eq!(c.by_task, [(6, 400, 0)]);
    }

    #[test]
    fn the_layout_matches_the_kernel_side() {
        let src = include_str!("bpf/runq.bpf.c");
        assert!(src.contains(&format!("#define CULPRIT_SLOTS {SLOTS}")));
        assert!(src.contains("#define CULPRIT_PROBES (CULPRIT_SLOTS - 1)"));
        assert!(src.contains("struct culprit {\n\tu32 who;"));
        assert_eq!(std::mem::size_of::<Culprit>(), 16);
    }
}
