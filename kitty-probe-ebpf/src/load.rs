//! Loading and attaching, with failures turned into one-line reasons for
//! `doctor` and the TUI header. Nothing is pinned: every program and link
//! belongs to a file descriptor of this process, so the kernel releases all
//! of it when kitty exits, by any path (kill -9 included).

use aya::programs::{BtfTracePoint, FEntry, KProbe};
use aya::{Btf, Ebpf, EbpfLoader};
use std::sync::{Arc, Mutex};

/// Why a probe did not load or attach, in words an operator can act on.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProbeError {
    #[error("no kernel BTF (/sys/kernel/btf/vmlinux): {0}")]
    NoBtf(String),
    #[error("permission denied: needs root, or CAP_BPF and CAP_PERFMON")]
    Denied,
    #[error("the kernel refused the program (not permitted for this attach type here)")]
    Refused,
    #[error("function not in the kernel's BTF (inlined or absent)")]
    NotInBtf,
    #[error("this kernel has no kprobe support")]
    NoKprobes,
    #[error("{0} missing from the object")]
    Missing(String),
    /// Anything else the loader or the kernel said (one line).
    #[error("{0}")]
    Kernel(String),
    /// A named hook and why it failed.
    #[error("{hook}: {why}")]
    Hook { hook: String, why: Box<ProbeError> },
    #[error("no strategy attached: {0}")]
    NoStrategy(String),
}

impl ProbeError {
    /// The same error, said of one hook.
    pub fn at(self, hook: impl Into<String>) -> ProbeError {
        ProbeError::Hook {
            hook: hook.into(),
            why: Box::new(self),
        }
    }
}

pub type Result<T> = std::result::Result<T, ProbeError>;

/// The committed objects, built by `just ebpf` (scripts/build-bpf.sh).
pub mod objects {
    pub static RTT: &[u8] = aya::include_bytes_aligned!("bpf/rtt.bpf.o");
    pub static RUNQ: &[u8] = aya::include_bytes_aligned!("bpf/runq.bpf.o");
    pub static FLOW: &[u8] = aya::include_bytes_aligned!("bpf/flow.bpf.o");
    pub static EVENTS: &[u8] = aya::include_bytes_aligned!("bpf/events.bpf.o");
    pub static PROFILE: &[u8] = aya::include_bytes_aligned!("bpf/profile.bpf.o");
    pub static OFFCPU: &[u8] = aya::include_bytes_aligned!("bpf/offcpu.bpf.o");
    pub static TASKS: &[u8] = aya::include_bytes_aligned!("bpf/tasks.bpf.o");
}

/// The kernel's BTF (parsed: ~15 MB, ~20 ms here) and the loaders that
/// read the objects' CO-RE relocations against it, kept while probes
/// start and dropped by [`release_kernel_btf`]: a probe that runs needs
/// none of them, and keeping them was most of kitty's memory with the
/// probes (42 MB against 7 without).
struct Parsed {
    // Declared first, so dropped first: they borrow `btf`.
    loader: Mutex<EbpfLoader<'static>>,
    /// A second loader, for the first object with globals (a loader keeps
    /// the globals it was given, so such an object cannot share `loader`).
    spare: Mutex<Option<EbpfLoader<'static>>>,
    btf: Arc<Btf>,
}

static PARSED: Mutex<Option<Arc<Parsed>>> = Mutex::new(None);

/// A loader that has let go of the kernel BTF it parsed for itself:
/// `EbpfLoader::new` always parses one (there is no other constructor).
/// Made before kitty's own copy exists, the two are never held together:
/// that was the peak of a start with the probes (43 MB).
fn bare_loader() -> EbpfLoader<'static> {
    let mut l = EbpfLoader::new();
    l.btf(None);
    l
}

/// The parsed BTF and shared loaders, parsing them when none is kept.
fn parsed() -> Result<Arc<Parsed>> {
    let mut kept = PARSED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = &*kept {
        return Ok(p.clone());
    }
    let (mut loader, mut spare) = (bare_loader(), bare_loader());
    let btf = Arc::new(Btf::from_sys_fs().map_err(|e| ProbeError::NoBtf(e.to_string()))?);
    // SAFETY: the loaders borrow the `Btf` inside `btf`'s allocation, which
    // this `Parsed` keeps alive (its own strong count) for as long as they
    // live: they are dropped before `btf` (field order), `spare` leaves the
    // struct only for a caller that holds this `Parsed` longer than it (see
    // `load_object`), and neither the loaders nor the `Ebpf` objects they
    // return (no lifetime) keep the reference beyond them.
    let borrowed: &'static Btf = unsafe { &*Arc::as_ptr(&btf) };
    loader.btf(Some(borrowed));
    spare.btf(Some(borrowed));
    let p = Arc::new(Parsed {
        loader: Mutex::new(loader),
        spare: Mutex::new(Some(spare)),
        btf,
    });
    *kept = Some(p.clone());
    Ok(p)
}

/// The kernel's BTF, parsed once while probes start (see [`Parsed`]).
pub fn kernel_btf() -> Result<Arc<Btf>> {
    parsed().map(|p| p.btf.clone())
}

/// Whether the parsed BTF is kept now (for tests).
pub fn kernel_btf_kept() -> bool {
    PARSED.lock().unwrap_or_else(|e| e.into_inner()).is_some()
}

/// Drops the parsed BTF and the shared loader once the probes have loaded
/// and attached (the first tick's enrich, a profile once attached) and
/// gives the freed memory back to the system; a later load parses again.
pub fn release_kernel_btf() {
    let kept = PARSED.lock().unwrap_or_else(|e| e.into_inner()).take();
    if kept.is_some() {
        drop(kept);
        // glibc keeps freed heap for reuse: the parse's many small blocks
        // stayed resident (30 MB) without this.
        #[cfg(target_env = "gnu")]
        // SAFETY: malloc_trim only returns free memory to the kernel.
        unsafe {
            libc::malloc_trim(0);
        }
    }
}

/// Kernels before 5.11 charge BPF memory to RLIMIT_MEMLOCK; raise it.
fn raise_memlock() {
    let r = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: setrlimit with a valid struct; failure is harmless here.
    unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &r) };
}

/// Loads an object (maps created, nothing attached yet). Objects without
/// globals share one loader (and its relocations' BTF); one with globals
/// gets its own (the loader keeps the globals it was given).
pub fn load_object(bytes: &[u8], globals: &[(&str, u64)]) -> Result<Ebpf> {
    raise_memlock();
    let parsed = parsed()?;
    if globals.is_empty() {
        let mut l = parsed.loader.lock().unwrap_or_else(|e| e.into_inner());
        return l.load(bytes).map_err(|e| reason(&e));
    }
    // Declared after `parsed`, so dropped before it (see `parsed`).
    let spare = parsed
        .spare
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take();
    let mut l = spare.unwrap_or_else(|| {
        // Another object with globals while the BTF is kept: this
        // loader's own parse is held beside kitty's for a moment.
        let mut l = EbpfLoader::new();
        l.btf(Some(&parsed.btf));
        l
    });
    for (name, v) in globals {
        l.override_global(name, v, true);
    }
    l.load(bytes).map_err(|e| reason(&e))
}

/// An aya error as a [`ProbeError`], with the usual causes recognised.
pub fn reason(e: &dyn std::error::Error) -> ProbeError {
    classify(&raw_reason(e))
}

/// The common failures in words an operator can act on.
fn classify(s: &str) -> ProbeError {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if s.contains("unknown BTF type") {
        return ProbeError::NotInBtf;
    }
    // aya's mark on an instruction whose CO-RE relocation found no such
    // field in this kernel (0xbad2310), which the verifier then rejects.
    if s.contains("unknown#195896080") {
        return ProbeError::Kernel(
            "a kernel field it reads is not in this kernel (CO-RE relocation failed)".into(),
        );
    }
    if s.contains("devices/kprobe/type") {
        return ProbeError::NoKprobes;
    }
    if s.contains("Operation not permitted") || s.contains("EPERM") {
        return if root {
            ProbeError::Refused
        } else {
            ProbeError::Denied
        };
    }
    ProbeError::Kernel(s.to_string())
}

fn raw_reason(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        src = inner.source();
    }
    // A verifier log is long: keep its last line, which says what failed.
    if let Some(at) = s.find("Verifier output:") {
        let log = &s[at..];
        let last = log
            .lines()
            .rev()
            .find(|l| {
                !l.trim().is_empty()
                    && !l.starts_with(':')
                    && !l.starts_with("verification time")
                    && !l.starts_with("processed ")
                    && !l.starts_with("stack depth")
            })
            .unwrap_or("")
            .to_string();
        s.truncate(at);
        s.push_str("verifier: ");
        s.push_str(&last);
    }
    s
}

/// Takes a map out of the object as its typed aya view.
pub fn take_map<T>(ebpf: &mut Ebpf, name: &str) -> Result<T>
where
    T: TryFrom<aya::maps::Map, Error = aya::maps::MapError>,
{
    let map = ebpf
        .take_map(name)
        .ok_or_else(|| ProbeError::Missing(format!("map {name}")))?;
    T::try_from(map).map_err(|e| reason(&e))
}

/// A program of the object, as its kind (not yet loaded).
pub fn program<'a, T>(ebpf: &'a mut Ebpf, name: &str) -> Result<&'a mut T>
where
    &'a mut T: TryFrom<&'a mut aya::programs::Program, Error = aya::programs::ProgramError>,
{
    ebpf.program_mut(name)
        .ok_or_else(|| ProbeError::Missing(format!("program {name}")))?
        .try_into()
        .map_err(|e| reason(&e))
}

/// Loads and attaches a tp_btf program by its function name.
pub fn attach_tp_btf(ebpf: &mut Ebpf, prog: &str, tracepoint: &str) -> Result<()> {
    let btf = kernel_btf()?;
    let p: &mut BtfTracePoint = program(ebpf, prog)?;
    p.load(tracepoint, &btf).map_err(|e| reason(&e))?;
    p.attach().map_err(|e| reason(&e))?;
    Ok(())
}

pub fn attach_fentry(ebpf: &mut Ebpf, prog: &str, function: &str) -> Result<()> {
    let btf = kernel_btf()?;
    let p: &mut FEntry = program(ebpf, prog)?;
    p.load(function, &btf).map_err(|e| reason(&e))?;
    if let Err(e) = p.attach() {
        // Not attached: do not leave it loaded in the kernel either.
        let _ = p.unload();
        return Err(reason(&e));
    }
    Ok(())
}

pub fn attach_kprobe(ebpf: &mut Ebpf, prog: &str, function: &str) -> Result<()> {
    let p: &mut KProbe = program(ebpf, prog)?;
    p.load().map_err(|e| reason(&e))?;
    if let Err(e) = p.attach(function, 0) {
        let _ = p.unload();
        return Err(reason(&e));
    }
    Ok(())
}

/// Several tp_btf programs that only make sense together.
pub fn attach_all(ebpf: &mut Ebpf, progs: &[(&str, &str)]) -> Result<()> {
    for (prog, tp) in progs {
        attach_tp_btf(ebpf, prog, tp).map_err(|e| e.at(format!("tp_btf/{tp}")))?;
    }
    Ok(())
}
