//! A BPF array made with `BPF_F_MMAPABLE`, mapped into kitty: its values
//! read and written in place, where aya's `Array` costs a `bpf()` call per
//! value (a lookup per watched process per tick for the run-queue
//! histograms). aya 0.14 has no mapping of its own.

use crate::load::ProbeError;
use aya::maps::MapData;
use std::marker::PhantomData;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::AtomicU32;

/// The array's values as the kernel keeps them (the mapping keeps the map
/// alive on its own).
pub struct MappedArray<T> {
    base: *mut u8,
    len: usize,
    /// Bytes from one value to the next (the kernel rounds to 8).
    stride: usize,
    max_entries: u32,
    _of: PhantomData<T>,
}

// SAFETY: the mapping is plain shared memory owned by this value; reads and
// writes go through volatile copies of plain data.
unsafe impl<T: aya::Pod> Send for MappedArray<T> {}

impl<T: aya::Pod> MappedArray<T> {
    /// Maps the whole array; fails for a map that was not made mappable
    /// or whose values are not `T`'s size.
    pub fn new(map: &MapData) -> Result<Self, ProbeError> {
        let kernel =
            |what: &str, e: &dyn std::fmt::Display| ProbeError::Kernel(format!("{what}: {e}"));
        let info = map.info().map_err(|e| kernel("map info", &e))?;
        let value_size = info.value_size() as usize;
        if value_size != std::mem::size_of::<T>() {
            return Err(ProbeError::Kernel(format!(
                "mapped array: values of {value_size} bytes, expected {}",
                std::mem::size_of::<T>()
            )));
        }
        let stride = value_size.next_multiple_of(8);
        let max_entries = info.max_entries();
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
        let len = (stride * max_entries as usize).next_multiple_of(page);
        // SAFETY: a new shared mapping of the map's fd, of the size the
        // kernel gives an mmapable array (its values, rounded to pages);
        // the result is checked before use.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                map.fd().as_fd().as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(kernel("mmap", &std::io::Error::last_os_error()));
        }
        Ok(MappedArray {
            base: base.cast(),
            len,
            stride,
            max_entries,
            _of: PhantomData,
        })
    }

    /// Maps the loaded object's array `name` (see [`MappedArray::new`]).
    pub fn of(ebpf: &aya::Ebpf, name: &str) -> Result<Self, ProbeError> {
        match ebpf.map(name) {
            Some(aya::maps::Map::Array(data)) => Self::new(data),
            Some(_) => Err(ProbeError::Missing(format!("{name} as an array"))),
            None => Err(ProbeError::Missing(format!("map {name}"))),
        }
    }

    fn at(&self, i: u32) -> Option<*mut T> {
        if i >= self.max_entries {
            return None;
        }
        // SAFETY: i < max_entries, so the offset lies inside the mapping.
        Some(unsafe { self.base.add(i as usize * self.stride) }.cast())
    }

    /// The value at `i` now. The kernel may be adding to it meanwhile: a
    /// read may see one field before an update and the next after, as a
    /// `bpf()` lookup may.
    pub fn get(&self, i: u32) -> Option<T> {
        // SAFETY: inside the mapping, 8-byte aligned (page-aligned base, a
        // stride of a multiple of 8), T is plain data.
        self.at(i).map(|p| unsafe { std::ptr::read_volatile(p) })
    }

    /// The `u32` at byte `offset` of the value at `i`, for atomic
    /// operations shared with the kernel's on it (None when out of range
    /// or not a 4-byte aligned field).
    pub fn atomic_u32(&self, i: u32, offset: usize) -> Option<&AtomicU32> {
        if !offset.is_multiple_of(4) || offset + 4 > std::mem::size_of::<T>() {
            return None;
        }
        // SAFETY: inside the value at `i` (checked above), 4-byte aligned
        // (an 8-byte aligned value, a multiple of 4 into it); the mapping
        // lives as long as `self`, and the kernel accesses it atomically
        // too.
        self.at(i)
            .map(|p| unsafe { AtomicU32::from_ptr(p.cast::<u8>().add(offset).cast()) })
    }

    /// The first `n` values in place (at most all of them), for values
    /// the kernel is not writing meanwhile: those a program wrote in a run
    /// that has ended (an iterator read that returned). A plain copy where
    /// [`MappedArray::get`]'s volatile one goes a byte at a time for an
    /// array of bytes.
    pub fn written(&self, n: usize) -> &[T] {
        let n = n.min(self.max_entries as usize);
        if n == 0 || self.stride != std::mem::size_of::<T>() {
            return &[];
        }
        // SAFETY: n values from the page-aligned base, inside the mapping,
        // laid out as a slice (a stride of T's size); T is plain data; the
        // caller's kernel program is not running (the mapping lives as
        // long as `self`, which the slice borrows).
        unsafe { std::slice::from_raw_parts(self.base.cast::<T>(), n) }
    }

    /// Writes the value at `i` (false if out of range).
    pub fn set(&mut self, i: u32, v: T) -> bool {
        // SAFETY: as in `get`.
        self.at(i)
            .map(|p| unsafe { std::ptr::write_volatile(p, v) })
            .is_some()
    }
}

impl<T> Drop for MappedArray<T> {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}
