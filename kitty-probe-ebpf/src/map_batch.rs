//! A hash map read whole with `bpf(BPF_MAP_LOOKUP_BATCH)`: one syscall a
//! tick for every entry, where the kernel refuses map iterator programs
//! (seen on one 6.18 VM) and aya's per-entry walk costs two `bpf()` calls
//! an entry (`get_next_key`, then `lookup`). aya 0.14 has no batch calls,
//! so this makes the one it needs with the raw syscall.

use crate::load::ProbeError;
use aya::maps::MapData;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

const BPF_MAP_LOOKUP_BATCH: libc::c_long = 24;

/// The map's entries in rows: its keys and its values, side by side.
pub struct MapBatch {
    map: OwnedFd,
    key_size: usize,
    value_size: usize,
    /// Room for every entry the map can hold, so one call returns them all.
    slots: usize,
    keys: Vec<u8>,
    values: Vec<u8>,
}

impl MapBatch {
    /// For a hash map (not per-CPU); checks with one read that this kernel
    /// has batch lookups for it (5.6 and later).
    pub fn new(map: &MapData) -> Result<MapBatch, ProbeError> {
        let info = map
            .info()
            .map_err(|e| ProbeError::Kernel(format!("map info: {e}")))?;
        let fd = map
            .fd()
            .as_fd()
            .try_clone_to_owned()
            .map_err(|e| ProbeError::Kernel(format!("map fd: {e}")))?;
        let mut b = MapBatch {
            map: fd,
            key_size: info.key_size() as usize,
            value_size: info.value_size() as usize,
            slots: info.max_entries() as usize,
            keys: Vec::new(),
            values: Vec::new(),
        };
        let _ = b.read()?;
        Ok(b)
    }

    /// Every entry now: (key bytes, value bytes). Entries written during
    /// the walk may or may not be in it, as with any walk of a live map.
    pub fn read(&mut self) -> Result<impl Iterator<Item = (&[u8], &[u8])>, ProbeError> {
        let (ks, vs) = (self.key_size, self.value_size);
        self.keys.resize(self.slots * ks, 0);
        self.values.resize(self.slots * vs, 0);
        let mut n = 0usize;
        // The kernel's position between calls (a bucket index for hash
        // maps: 4 bytes; 8 here leave room).
        let (mut at, mut next) = (0u64, 0u64);
        let mut first = true;
        loop {
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
                    _ => return Err(ProbeError::Kernel(format!("batch lookup: {e}"))),
                }
            }
            if n >= self.slots {
                break;
            }
            at = next;
            first = false;
        }
        Ok(self.keys[..n * ks]
            .chunks_exact(ks)
            .zip(self.values[..n * vs].chunks_exact(vs)))
    }
}
