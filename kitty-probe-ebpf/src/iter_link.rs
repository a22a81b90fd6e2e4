//! A BPF iterator program's link, read once per tick: the task iterator
//! (the threads of one watched process, or every task of the node) and the
//! open-files iterator. aya 0.14's `Iter::attach` makes links without a
//! target and hands out one iterator file per link, so this module makes
//! the link with the raw `bpf()` syscall (`BPF_LINK_CREATE`, with the
//! process's pid as iterator info) and opens an iterator on it per read
//! (`BPF_ITER_CREATE`, which aya has no call for).

use crate::load::ProbeError;
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

const BPF_LINK_CREATE: libc::c_long = 28;
const BPF_ITER_CREATE: libc::c_long = 33;
const BPF_TRACE_ITER: u32 = 28;

/// `bpf(cmd, attr)` on a zeroed attribute block (larger than any field we
/// set: the kernel reads what it knows and wants the rest zero).
fn bpf_fd(cmd: libc::c_long, attr: &mut [u64; 16]) -> std::io::Result<OwnedFd> {
    // SAFETY: attr is a valid, writable, zero-initialised bpf_attr-sized
    // block; the kernel reads at most its size; on success the result is a
    // new fd we own.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr.as_mut_ptr(),
            std::mem::size_of_val(attr) as libc::c_uint,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new fd the kernel just returned, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// What an iterator link walks.
#[derive(Clone, Copy)]
pub enum Target {
    /// Everything of its kind: every task of the node.
    All,
    /// The threads of one process (`iter/task`, Linux 6.1+: its pid as
    /// kitty's pid namespace numbers it; an older kernel refuses the link).
    Process(u32),
    /// One task, by its thread id (Linux 6.1+).
    Thread(u32),
}

/// A loaded iterator program's link.
pub struct IterLink {
    link: OwnedFd,
    buf: Vec<u8>,
}

impl IterLink {
    /// Links the loaded iterator program to what it walks.
    pub fn new(prog: BorrowedFd<'_>, target: Target) -> Result<IterLink, ProbeError> {
        // union bpf_iter_link_info: { task: { tid, pid, pid_fd } } here
        // (16 bytes).
        let mut info = [0u32; 4];
        let mut attr = [0u64; 16];
        // link_create: prog_fd, target_fd (0 for iterators), attach_type,
        // flags, then iter_info (a pointer) and iter_info_len.
        attr[0] = prog.as_raw_fd() as u32 as u64;
        attr[1] = BPF_TRACE_ITER as u64;
        match target {
            Target::All => {}
            Target::Process(pid) => info[1] = pid,
            Target::Thread(tid) => info[0] = tid,
        }
        if !matches!(target, Target::All) {
            attr[2] = info.as_ptr() as u64;
            attr[3] = std::mem::size_of_val(&info) as u64;
        }
        let link = bpf_fd(BPF_LINK_CREATE, &mut attr)
            .map_err(|e| ProbeError::Kernel(format!("iterator link: {e}")))?;
        Ok(IterLink {
            link,
            buf: Vec::new(),
        })
    }

    /// One walk: what the program wrote, in rows of `row` bytes.
    pub fn read(&mut self, row: usize) -> Result<std::slice::ChunksExact<'_, u8>, ProbeError> {
        let n = self.walk(None)?;
        Ok(self.buf[..n].chunks_exact(row))
    }

    /// [`IterLink::read`] of a program that ends its walk with a row whose
    /// first 8 bytes are zero (tid and tgid 0, which no task has): the
    /// rows before it, read without the read() that would find the end.
    pub fn read_marked(
        &mut self,
        row: usize,
    ) -> Result<std::slice::ChunksExact<'_, u8>, ProbeError> {
        let n = self.walk(Some(row))?;
        Ok(self.buf[..n].chunks_exact(row))
    }

    /// Opens an iterator on the link and reads it into the buffer (see
    /// [`read_all`]); returns how many bytes it holds.
    fn walk(&mut self, marked: Option<usize>) -> Result<usize, ProbeError> {
        let mut attr = [0u64; 16];
        attr[0] = self.link.as_fd().as_raw_fd() as u32 as u64;
        let fd = bpf_fd(BPF_ITER_CREATE, &mut attr)
            .map_err(|e| ProbeError::Kernel(format!("iterator: {e}")))?;
        read_all(&File::from(fd), &mut self.buf, marked)
            .map_err(|e| ProbeError::Kernel(format!("reading the iterator: {e}")))
    }
}

/// Whether `row` is the end mark of [`IterLink::read_marked`].
fn is_end_mark(row: &[u8]) -> bool {
    row.len() >= 8 && row[..8] == [0; 8]
}

/// The least room offered to a read: a small process's rows fit in one;
/// the buffer doubles when a larger one's do not.
const READ_ROOM: usize = 4096;

/// Reads an iterator file to its end into `buf` with plain reads; returns
/// how many bytes it holds. `buf` only grows (zeroed once, not per read).
/// With `marked` (the row size of a program that marks its end, see
/// [`IterLink::read_marked`]), the end is also a read that ends with the
/// mark, which is left out of the count. A read returns whole rows (the
/// kernel takes back a row that does not fit), so the mark is the last
/// row of the read that holds it.
/// Not `read_to_end`: for a `File` it first asks the file's size and
/// position (`statx`, `lseek`: two syscalls that mean nothing for an
/// iterator), then, told the size is 0, probes with a 32-byte read.
fn read_all(mut f: &File, buf: &mut Vec<u8>, marked: Option<usize>) -> std::io::Result<usize> {
    let mut n = 0;
    loop {
        if buf.len() < n + READ_ROOM {
            buf.resize((buf.len() * 2).max(n + READ_ROOM), 0);
        }
        match f.read(&mut buf[n..]) {
            Ok(0) => return Ok(n),
            Ok(got) => {
                n += got;
                if let Some(row) = marked.filter(|&r| r > 0 && n >= r && n % r == 0) {
                    if is_end_mark(&buf[n - row..n]) {
                        return Ok(n - row);
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_all_reads_to_the_end_through_many_reads_and_reuses_its_buffer() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rows");
        let big: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&path, &big).unwrap();
        let mut buf = Vec::new();
        let n = read_all(&File::open(&path).unwrap(), &mut buf, None).unwrap();
        assert_eq!(&buf[..n], &big[..]);
        // A smaller file after it: only its bytes count.
        std::fs::write(&path, b"abc").unwrap();
        let n = read_all(&File::open(&path).unwrap(), &mut buf, None).unwrap();
        assert_eq!(&buf[..n], b"abc");
        assert!(buf.len() >= big.len(), "the buffer is kept");
    }

    #[test]
    fn a_marked_read_ends_at_the_mark_and_leaves_it_out() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rows");
        let row = |tid: u32, tgid: u32| {
            let mut r = vec![7u8; 24];
            r[..4].copy_from_slice(&tid.to_ne_bytes());
            r[4..8].copy_from_slice(&tgid.to_ne_bytes());
            r
        };
        let mut buf = Vec::new();
        // Two rows, then the mark.
        let rows = [row(5, 5), row(6, 5)].concat();
        std::fs::write(&path, [rows.clone(), row(0, 0)].concat()).unwrap();
        let n = read_all(&File::open(&path).unwrap(), &mut buf, Some(24)).unwrap();
        assert_eq!(&buf[..n], &rows[..]);
        // Only the mark: no rows.
        std::fs::write(&path, row(0, 0)).unwrap();
        assert_eq!(
            read_all(&File::open(&path).unwrap(), &mut buf, Some(24)).unwrap(),
            0
        );
        // No mark (a tid of 0 alone is not one): read to the end, all kept.
        let unmarked = [row(5, 5), row(0, 5)].concat();
        std::fs::write(&path, &unmarked).unwrap();
        let n = read_all(&File::open(&path).unwrap(), &mut buf, Some(24)).unwrap();
        assert_eq!(&buf[..n], &unmarked[..]);
    }
}
