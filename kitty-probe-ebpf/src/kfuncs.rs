//! Kernel functions (kfuncs) in kitty's BPF programs, linked by kitty:
//! aya 0.14 cannot link a call to an `extern __ksym` function (it takes it
//! for a call into the object's own code and fails), so a program calls a
//! kfunc by the instruction itself, written in its C as a placeholder
//! (`BPF_CALL` with `src_reg` = `BPF_PSEUDO_KFUNC_CALL` and the id
//! `0x7fff0000 + n`, n counting from 1), and [`link`] writes the
//! function's id in the kernel's BTF over each placeholder before the
//! object is loaded. aya leaves such an instruction alone (it is no call
//! of its own). A function this kernel lacks leaves its placeholder, which
//! the verifier refuses: only the programs calling it fail to load.

use crate::load::ProbeError;
use aya::Btf;
use aya_obj::btf::BtfKind;

/// The first placeholder id: the n-th function of a list (from 1) is
/// called as `PLACEHOLDER + n`.
const PLACEHOLDER: u32 = 0x7fff_0000;

/// `BPF_JMP | BPF_CALL`, and the register byte of a kfunc call (src_reg
/// `BPF_PSEUDO_KFUNC_CALL` = 2, dst_reg 0).
const CALL: u8 = 0x85;
const KFUNC_REGS: u8 = 0x20;

/// ELF: a section of instructions (`SHF_EXECINSTR`).
const SHF_EXECINSTR: u64 = 0x4;

/// `object` (a BPF ELF object) with every placeholder call of the n-th of
/// `names` (from 1) made a call of that kernel function; how many calls
/// were linked. An error when the kernel's BTF has no such function (a
/// kernel too old for it) or the object is not a 64-bit ELF.
pub fn link(object: &[u8], names: &[&str], btf: &Btf) -> Result<(Object, usize), ProbeError> {
    let ids = names
        .iter()
        .map(|n| {
            btf.id_by_type_name_kind(n, BtfKind::Func)
                .map_err(|_| ProbeError::Kernel(format!("no kernel function {n} (kfunc)")))
        })
        .collect::<Result<Vec<u32>, _>>()?;
    let mut out = Object::of(object);
    let mut linked = 0;
    for code in instruction_sections(object)? {
        for at in code.step_by(8) {
            let insn = &mut out.bytes_mut()[at..at + 8];
            if insn[0] != CALL || insn[1] != KFUNC_REGS || insn[2..4] != [0, 0] {
                continue;
            }
            let imm = u32::from_le_bytes([insn[4], insn[5], insn[6], insn[7]]);
            let Some(n) = imm.checked_sub(PLACEHOLDER).filter(|n| *n >= 1) else {
                continue;
            };
            if let Some(id) = ids.get(n as usize - 1) {
                insn[4..8].copy_from_slice(&id.to_le_bytes());
                linked += 1;
            }
        }
    }
    Ok((out, linked))
}

/// An object's bytes, 8-byte aligned as the loader reads them (the
/// committed objects are included aligned, `include_bytes_aligned!`).
pub struct Object {
    words: Vec<u64>,
    len: usize,
}

impl Object {
    fn of(bytes: &[u8]) -> Object {
        let mut o = Object {
            words: vec![0; bytes.len().div_ceil(8)],
            len: bytes.len(),
        };
        o.bytes_mut().copy_from_slice(bytes);
        o
    }

    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `words` holds at least `len` initialised bytes, and u8
        // has no alignment or validity requirements.
        unsafe { std::slice::from_raw_parts(self.words.as_ptr().cast::<u8>(), self.len) }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`; the borrow of `self` is unique.
        unsafe { std::slice::from_raw_parts_mut(self.words.as_mut_ptr().cast::<u8>(), self.len) }
    }
}

/// The byte ranges of an ELF64 (little-endian, as BPF objects for this
/// machine are) object's instruction sections, each a whole number of
/// 8-byte instructions.
fn instruction_sections(elf: &[u8]) -> Result<Vec<std::ops::Range<usize>>, ProbeError> {
    let bad = || ProbeError::Kernel("the BPF object is not a 64-bit little-endian ELF".into());
    let u16_at = |o: usize| elf.get(o..o + 2).map(|b| u16::from_le_bytes([b[0], b[1]]));
    let u64_at = |o: usize| {
        elf.get(o..o + 8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
    };
    if elf.get(..6) != Some(&[0x7f, b'E', b'L', b'F', 2, 1][..]) {
        return Err(bad());
    }
    let shoff = u64_at(0x28).ok_or_else(bad)? as usize;
    let (entsize, count) = (
        u16_at(0x3a).ok_or_else(bad)? as usize,
        u16_at(0x3c).ok_or_else(bad)? as usize,
    );
    let mut code = Vec::new();
    for i in 0..count {
        let h = shoff + i * entsize;
        let flags = u64_at(h + 0x08).ok_or_else(bad)?;
        let (offset, size) = (
            u64_at(h + 0x18).ok_or_else(bad)? as usize,
            u64_at(h + 0x20).ok_or_else(bad)? as usize,
        );
        if flags & SHF_EXECINSTR == 0 || size == 0 {
            continue;
        }
        let end = offset
            .checked_add(size & !7)
            .filter(|e| *e <= elf.len())
            .ok_or_else(bad)?;
        code.push(offset..end);
    }
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::objects;

    fn placeholders(b: &[u8]) -> usize {
        b.chunks_exact(8)
            .filter(|i| {
                let imm = u32::from_le_bytes([i[4], i[5], i[6], i[7]]);
                i[0] == CALL
                    && i[1] == KFUNC_REGS
                    && (PLACEHOLDER + 1..PLACEHOLDER + 16).contains(&imm)
            })
            .count()
    }

    /// The task walk's object: each placeholder call (and nothing else)
    /// becomes a call of the kernel function by its BTF id; a function the
    /// kernel lacks, or bytes that are no ELF object, are refused.
    #[test]
    fn placeholder_calls_become_the_kernels_functions() {
        let Ok(btf) = Btf::from_sys_fs() else {
            eprintln!("skipped: no kernel BTF here (/sys/kernel/btf/vmlinux)");
            return;
        };
        let names = [
            "bpf_task_from_pid",
            "bpf_task_release",
            "bpf_iter_task_new",
            "bpf_iter_task_next",
            "bpf_iter_task_destroy",
        ];
        let Ok(ids) = names
            .iter()
            .map(|n| btf.id_by_type_name_kind(n, BtfKind::Func))
            .collect::<Result<Vec<u32>, _>>()
        else {
            eprintln!("skipped: this kernel has no open-coded task iterator (Linux 6.7+)");
            return;
        };
        let before = objects::TASKS;
        assert!(placeholders(before) >= names.len(), "the walk calls each");
        let (after, linked) = link(before, &names, &btf).unwrap();
        let after = after.bytes();
        assert_eq!(after.len(), before.len());
        assert_eq!(linked, placeholders(before));
        assert_eq!(placeholders(after), 0);
        let mut changed = 0;
        for (a, b) in after.chunks_exact(8).zip(before.chunks_exact(8)) {
            if a != b {
                changed += 1;
                assert_eq!(a[..4], b[..4], "only the id changes");
                let id = u32::from_le_bytes([a[4], a[5], a[6], a[7]]);
                let n = u32::from_le_bytes([b[4], b[5], b[6], b[7]]) - PLACEHOLDER;
                assert_eq!(id, ids[n as usize - 1]);
            }
        }
        assert_eq!(changed, linked);
        assert_eq!(
            after[before.len() / 8 * 8..],
            before[before.len() / 8 * 8..]
        );

        let missing = link(before, &["bpf_no_such_kfunc"], &btf).err().unwrap();
        assert!(
            missing.to_string().contains("bpf_no_such_kfunc"),
            "{missing}"
        );
        assert!(link(b"not an object at all", &names, &btf).is_err());
    }
}
