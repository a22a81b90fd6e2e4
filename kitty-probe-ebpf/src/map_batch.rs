//! A hash map read whole with `bpf(BPF_MAP_LOOKUP_BATCH)`: one syscall a tick for
//! every entry, where aya's per-entry walk costs two `bpf()` calls an entry
//! (`get_next_key`, then `lookup`) and the kernel refuses map iterator
//! programs (seen on one 6.18 VM). aya 0.14 has no batch calls, so this
//! makes the ones it needs with the raw syscall.

use crate::load::ProbeError;
use aya::maps::{MapData, MapType};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

const BPF_MAP_LOOKUP_BATCH: libc::c_long = 24;

/// Entries the buffers have room for at first: they grow as a map is
/// found fuller, so a large per-CPU map on a many-CPU node costs memory
/// for the entries it has, not for those it could hold.
const FIRST_SLOTS: usize = 64;

/// Where a value's parts lie in its bytes.
#[derive(Debug, Clone, Copy)]
pub struct Parts {
    size: usize,
    step: usize,
}

impl Parts {
    pub fn of(self, value: &[u8]) -> impl Iterator<Item = &[u8]> {
        value
            .chunks(self.step.max(1))
            .map(move |c| &c[..self.size.min(c.len())])
    }
}

/// A plain-data value from the bytes the kernel wrote; None if too few.
pub fn pod<T: aya::Pod>(bytes: &[u8]) -> Option<T> {
    // SAFETY: T is plain data (any bytes are a value of it), and as many
    // bytes as it has are there; the read needs no alignment.
    (bytes.len() >= std::mem::size_of::<T>())
        .then(|| unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<T>()) })
}

/// The map's entries in rows: its keys and its values, side by side.
pub struct MapBatch {
    map: OwnedFd,
    key_size: usize,
    value_size: usize,
    /// Bytes an entry's value takes in the values buffer: the value, or
    /// in a per-CPU map, every possible CPU's value, each 8-byte aligned.
    stride: usize,
    /// Whether each value is one per possible CPU.
    per_cpu: bool,
    max_entries: usize,
    /// Entries the buffers have room for now.
    slots: usize,
    keys: Vec<u8>,
    values: Vec<u8>,
}

impl MapBatch {
    /// For a hash map, per-CPU or not, LRU or not; checks with one read
    /// that this kernel has batch lookups for it (5.6 and later).
    pub fn new(map: &MapData) -> Result<MapBatch, ProbeError> {
        let kernel =
            |what: &str, e: &dyn std::fmt::Display| ProbeError::Kernel(format!("{what}: {e}"));
        let info = map.info().map_err(|e| kernel("map info", &e))?;
        let fd = map
            .fd()
            .as_fd()
            .try_clone_to_owned()
            .map_err(|e| kernel("map fd", &e))?;
        let value_size = info.value_size() as usize;
        let per_cpu = matches!(
            info.map_type(),
            Ok(MapType::PerCpuHash | MapType::LruPerCpuHash)
        );
        let stride = if per_cpu {
            let cpus = aya::util::nr_cpus().map_err(|(what, e)| kernel(what, &e))?;
            value_size.next_multiple_of(8) * cpus
        } else {
            value_size
        };
        let max_entries = info.max_entries() as usize;
        let mut b = MapBatch {
            map: fd,
            key_size: info.key_size() as usize,
            value_size,
            stride,
            per_cpu,
            max_entries,
            slots: FIRST_SLOTS.min(max_entries),
            keys: Vec::new(),
            values: Vec::new(),
        };
        let _ = b.read()?;
        Ok(b)
    }

    /// How a value splits into its parts: one per possible CPU in a
    /// per-CPU map, else the value itself.
    pub fn parts(&self) -> Parts {
        Parts {
            size: self.value_size,
            step: if self.per_cpu {
                self.value_size.next_multiple_of(8)
            } else {
                self.stride
            },
        }
    }

    /// Every entry now: (key bytes, value bytes). Entries written
    /// during the walk may or may not be in it, as with any walk of a live
    /// map.
    pub fn read(&mut self) -> Result<impl ExactSizeIterator<Item = (&[u8], &[u8])>, ProbeError> {
        let (ks, vs) = (self.key_size, self.stride);
        let mut n = 0usize;
        // The kernel's position between calls (a bucket index for hash
        // maps: 4 bytes; 8 here leave room).
        let (mut at, mut next) = (0u64, 0u64);
        let mut first = true;
        loop {
            if n == self.slots {
                if self.slots >= self.max_entries {
                    break;
                }
                self.slots = (self.slots * 2).min(self.max_entries);
            }
            self.keys.resize(self.slots * ks, 0);
            self.values.resize(self.slots * vs, 0);
            let room = self.slots - n;
            // union bpf_attr, batch: in_batch, out_batch, keys, values
            // (pointers), count and map_fd (u32 each), elem_flags, flags.
            let mut attr = [0u64; 8];
            attr[0] = if first { 0 } else { &at as *const u64 as u64 };
            attr[1] = &mut next as *mut u64 as u64;
            attr[2] = self.keys[n * ks..].as_mut_ptr() as u64;
            attr[3] = self.values[n * vs..].as_mut_ptr() as u64;
            attr[4] = room as u64 | (self.map.as_raw_fd() as u32 as u64) << 32;
            // SAFETY: attr is a zeroed bpf_attr prefix of the batch fields;
            // the key and value buffers have room for `room` entries, the
            // positions for 8 bytes each; the kernel writes no more.
            let rc = unsafe {
                libc::syscall(
                    libc::SYS_bpf,
                    BPF_MAP_LOOKUP_BATCH,
                    attr.as_mut_ptr(),
                    std::mem::size_of_val(&attr) as libc::c_uint,
                )
            };
            // The kernel writes back how many it copied, also at the end.
            n += (attr[4] as u32 as usize).min(room);
            if rc < 0 {
                let e = std::io::Error::last_os_error();
                match e.raw_os_error() {
                    // The end of the map (the usual return of the last call).
                    Some(libc::ENOENT) => break,
                    // The next bucket holds more than there is room for
                    // (nothing was copied): more room, the same position.
                    Some(libc::ENOSPC) if self.slots < self.max_entries => {
                        self.slots = (self.slots * 2).min(self.max_entries);
                        continue;
                    }
                    _ => return Err(ProbeError::Kernel(format!("batch lookup: {e}"))),
                }
            }
            at = next;
            first = false;
        }
        Ok(self.keys[..n * ks]
            .chunks_exact(ks)
            .zip(self.values[..n * vs].chunks_exact(vs)))
    }
}
