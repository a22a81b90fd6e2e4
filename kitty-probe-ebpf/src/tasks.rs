//! The task iterator (`iter/task`, bpf/tasks.bpf.c): every watched thread's
//! scheduler and CPU counters, for the sampler (it is a [`TaskCounters`],
//! not an enricher: it replaces procfs reads instead of adding to a frame).
//! On Linux 6.7+ one walk a tick reads every watched process
//! (`kitty_tasks_walk`: each found by its pid, its threads by the
//! open-coded task iterator; kfuncs, linked by [`crate::kfuncs`]), in
//! ranges of processes whose rows fit the iterator's buffer; a process
//! with more threads, or one not read before, on a link of its own. Before
//! 6.7 the program is linked once per watched process (the kernel then
//! visits only that process's threads); a kernel before 6.1, which links
//! task iterators only to the whole node, gets one link that walks every
//! task, the filter map picking the watched ones. Each read opens an
//! iterator on a link and reads the rows ([`IterLink`]). Another program
//! walks one watched process's open files (`iter/task_file`, linked per
//! process only) for the sampler's fd inventory
//! ([`TaskCounters::open_files`]), and a third reads the TCP sockets those
//! walks found, each tick (`tcp_socks.rs`).

use crate::iter_link::{IterLink, Target};
use crate::load::{self, objects, ProbeError};
use crate::tcp_socks::TcpSocks;
use crate::watched::WatchedSet;
use aya::maps::{Array, MapData};
use aya::programs::{Iter, ProgramFd};
use aya::Ebpf;
use kitty_core::sources::clock_ticks;
use kitty_core::sources::rdma::uverbs_of_link;
use kitty_core::sources::tasks::{
    state_letter, FdInventory, NodeProcess, Placement, ProcessPart, TaskCounters, TaskRow,
    TcpSockets,
};
use std::collections::{BTreeMap, BTreeSet};
use std::os::fd::AsFd;
use std::sync::Arc;

const PROGRAM: &str = "kitty_tasks";
/// Every watched process in one walk (Linux 6.7+: kfuncs).
const WALK_PROGRAM: &str = "kitty_tasks_walk";
/// The kfuncs `kitty_tasks_walk` calls, in its placeholders' order.
const WALK_KFUNCS: [&str; 5] = [
    "bpf_task_from_pid",
    "bpf_task_release",
    "bpf_iter_task_new",
    "bpf_iter_task_next",
    "bpf_iter_task_destroy",
];
/// Rows one walk may give: the kernel's iterator buffer is 32 KB (190
/// rows of 168 bytes) for all of a read's rows, so a walk's processes are
/// chosen by their threads at the last tick, with room for 30 new ones.
const WALK_ROWS: usize = 160;
/// The processes a walk can list (`WALK_MAX` in bpf/tasks.bpf.c).
const WALK_MAX: usize = 1024;
/// The inode of the kernel's first pid namespace (`PROC_PID_INIT_INO`):
/// the walk finds processes by their pid there, as kitty sees them only
/// when it runs in it.
const INIT_PID_NS: &str = "pid:[4026531836]";
/// Every thread's CPU time, for the neighbours scan.
const NODE_PROGRAM: &str = "kitty_node_cpu";

/// Every open file of one process, for the fd inventory.
const FILES_PROGRAM: &str = "kitty_task_files";

/// Must match `struct file_row` in bpf/tasks.bpf.c: fd, kind, ino, then
/// a socket's `struct socket_kind` (family, type, protocol: u16 each;
/// state, known: u8 each; its address, u64) or anything else's name[16],
/// dir[16].
const FILE_ROW: usize = 48;
/// `kind`: a socket (by inode), or anything else (by its names).
const FILE_SOCKET: u32 = 1;

/// Whether a socket row is a TCP socket that can be in the kernel's
/// established hash (sock_diag finds it): IPv4 or IPv6, a stream, TCP, not
/// listening and not closed (a socket not yet connected, or done). None
/// when the row could not say.
fn connectable_tcp(row: &[u8]) -> Option<bool> {
    const AF_INET: u16 = 2;
    const AF_INET6: u16 = 10;
    const SOCK_STREAM: u16 = 1;
    const IPPROTO_TCP: u16 = 6;
    const TCP_CLOSE: u8 = 7;
    const TCP_LISTEN: u8 = 10;
    let u16_at = |o: usize| u16::from_ne_bytes([row[o], row[o + 1]]);
    let (family, kind, protocol, state, known) =
        (u16_at(16), u16_at(18), u16_at(20), row[22], row[23]);
    (known == 1).then_some(
        matches!(family, AF_INET | AF_INET6)
            && kind == SOCK_STREAM
            && protocol == IPPROTO_TCP
            && !matches!(state, TCP_CLOSE | TCP_LISTEN),
    )
}

/// Must match `struct cpu_row` in bpf/tasks.bpf.c: tid, tgid, exec_ns,
/// dead_exec_ns, leader_start_ns, comm[16].
const CPU_ROW: usize = 48;

/// Must match `struct row` in bpf/tasks.bpf.c.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct Row {
    tid: u32,
    tgid: u32,
    run_delay_ns: u64,
    run_count: u64,
    exec_ns: u64,
    nr_migrations: u64,
    nvcsw: u64,
    nivcsw: u64,
    state: u32,
    exit_state: u32,
    comm: [u8; 16],
    leader_start_ns: u64,
    read_bytes: u64,
    write_bytes: u64,
    dead_read_bytes: u64,
    dead_write_bytes: u64,
    dead_exec_ns: u64,
    rss_pages: u64,
    known: u32,
    netns: u32,
    css_set: u64,
    open_fds: u64,
    cpus_sig: u64,
}

/// `known` bits: the kernel accounts I/O per task; its RSS layout is known
const KNOWN_IO: u32 = 1;
const KNOWN_RSS: u32 = 2;
/// ... and it counted the process's open fds (leader rows).
const KNOWN_FDS: u32 = 4;
/// ... and it read the allowed CPUs' mask (leader rows).
const KNOWN_CPUS: u32 = 8;
/// The row carries the process-wide part (leader rows only: the other
/// threads' would be the same numbers, each read behind another pointer
/// of a cold `task_struct`).
const KNOWN_PROCESS: u32 = 16;

const ROW: usize = std::mem::size_of::<Row>();

/// Native-endian integers at a byte offset of a row, as the kernel wrote them.
fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_ne_bytes(b[o..o + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_ne_bytes(b[o..o + 8].try_into().unwrap())
}

/// A task's 16-byte `comm`, up to its NUL, as a string of its own.
fn comm_text(comm: &[u8]) -> String {
    comm_str(comm).into_owned()
}

/// A task's 16-byte `comm`, up to its NUL (borrowed when it is UTF-8).
fn comm_str(comm: &[u8]) -> std::borrow::Cow<'_, str> {
    let end = comm.iter().position(|c| *c == 0).unwrap_or(comm.len());
    String::from_utf8_lossy(&comm[..end])
}

impl Row {
    /// A row from the iterator's bytes (native endian, as the kernel wrote it).
    fn from_bytes(b: &[u8]) -> Row {
        let (u32_at, u64_at) = (|o| u32_at(b, o), |o| u64_at(b, o));
        let mut comm = [0u8; 16];
        comm.copy_from_slice(&b[64..80]);
        Row {
            tid: u32_at(0),
            tgid: u32_at(4),
            run_delay_ns: u64_at(8),
            run_count: u64_at(16),
            exec_ns: u64_at(24),
            nr_migrations: u64_at(32),
            nvcsw: u64_at(40),
            nivcsw: u64_at(48),
            state: u32_at(56),
            exit_state: u32_at(60),
            comm,
            leader_start_ns: u64_at(80),
            read_bytes: u64_at(88),
            write_bytes: u64_at(96),
            dead_read_bytes: u64_at(104),
            dead_write_bytes: u64_at(112),
            dead_exec_ns: u64_at(120),
            rss_pages: u64_at(128),
            known: u32_at(136),
            netns: u32_at(140),
            css_set: u64_at(144),
            open_fds: u64_at(152),
            cpus_sig: u64_at(160),
        }
    }

    /// The row, with its name made (shared) from its `comm`.
    fn into_task_row(self, comm: Arc<str>, ns_per_tick: u64) -> TaskRow {
        TaskRow {
            tid: self.tid,
            tgid: self.tgid,
            // A thread name is the watched process's to choose: kept raw here
            // like procfs's `comm`, sanitised where it is shown. Shared: the
            // process's sample takes it from here without a copy.
            comm,
            run_delay_ns: self.run_delay_ns,
            run_count: self.run_count,
            exec_ns: self.exec_ns,
            nr_migrations: self.nr_migrations,
            nvcsw: self.nvcsw,
            nivcsw: self.nivcsw,
            // /proc/<pid>/stat's starttime: boot-time ns in clock ticks.
            start_ticks: self.leader_start_ns / ns_per_tick,
            state: state_letter(self.state, self.exit_state),
            io_bytes: (self.known & KNOWN_IO != 0).then_some((self.read_bytes, self.write_bytes)),
            process: if self.known & KNOWN_PROCESS == 0 {
                ProcessPart::default()
            } else {
                ProcessPart {
                    dead_exec_ns: self.dead_exec_ns,
                    dead_io_bytes: (self.known & KNOWN_IO != 0)
                        .then_some((self.dead_read_bytes, self.dead_write_bytes)),
                    rss_pages: (self.known & KNOWN_RSS != 0).then_some(self.rss_pages),
                    open_fds: (self.known & KNOWN_FDS != 0).then_some(self.open_fds),
                    affinity_sig: (self.known & KNOWN_CPUS != 0).then_some(self.cpus_sig),
                    // Zero: no namespace (exiting) or no node; unknown then.
                    placement: (self.netns != 0 && self.css_set != 0).then_some(Placement {
                        cgroups: self.css_set,
                        netns: self.netns as u64,
                    }),
                }
            },
        }
    }
}

pub struct TaskIter {
    _ebpf: Ebpf,
    prog: ProgramFd,
    walk: Walk,
    /// Why the watched processes are not walked in one walk, where that
    /// was tried.
    not_together: Option<String>,
    /// `kitty_node_cpu` over every task, or why it did not load.
    node: Result<IterLink, String>,
    /// `kitty_task_files`, linked per watched process when first walked,
    /// or why not (the fd scan then reads /proc/<pid>/fd).
    files: Result<FileWalk, String>,
    /// `kitty_tcp_walk` over the TCP sockets the file walks found, or why
    /// not (the socket phase then asks sock_diag).
    sockets: Result<TcpSocks, String>,
    watched: WatchedSet,
    ns_per_tick: u64,
    /// The last walk's names, in its order (one a row): a thread that kept
    /// its name shares the one made then.
    names: Names,
}

/// The open-files program and its links, one per watched process.
struct FileWalk {
    prog: ProgramFd,
    links: BTreeMap<u32, IterLink>,
    /// Each process's connectable TCP sockets at its last walk: (the
    /// socket's address, its inode), for the socket run.
    tcp: BTreeMap<u32, Vec<(u64, u64)>>,
}

impl FileWalk {
    /// Loads `kitty_task_files` and walks kitty's own files once (a kernel
    /// that loads it but cannot run it is found here). Linked per process
    /// only: over every task of the node it would walk every open file.
    fn start(ebpf: &mut Ebpf, btf: &aya::Btf, per_process: bool) -> Result<FileWalk, String> {
        if !per_process {
            return Err("no per-process iterator links (Linux 6.1+)".into());
        }
        let p: &mut Iter = load::program(ebpf, FILES_PROGRAM).map_err(|e| e.to_string())?;
        p.load("task_file", btf)
            .map_err(|e| load::reason(&e).at("iter/task_file").to_string())?;
        let prog = p
            .fd()
            .and_then(|fd| fd.try_clone().map_err(Into::into))
            .map_err(|e| load::reason(&e).to_string())?;
        let mut walk = FileWalk {
            prog,
            links: BTreeMap::new(),
            tcp: BTreeMap::new(),
        };
        walk.inventory(std::process::id())
            .map_err(|e| e.at("iter/task_file").to_string())?;
        walk.links.clear();
        walk.tcp.clear();
        Ok(walk)
    }

    /// The open files of `tgid`: one read of its link (made on first use).
    fn inventory(&mut self, tgid: u32) -> Result<FdInventory, ProbeError> {
        let link = match self.links.entry(tgid) {
            std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::btree_map::Entry::Vacant(v) => {
                v.insert(IterLink::new(self.prog.as_fd(), Target::Process(tgid))?)
            }
        };
        let tcp = self.tcp.entry(tgid).or_default();
        Ok(inventory(link.read(FILE_ROW)?, tcp))
    }
}

/// The fd inventory of one walk's rows: every row an open fd, a socket's
/// inode (and whether it is a connectable TCP socket), a verbs device by
/// the same rule as an fd link's target; the connectable TCP sockets'
/// (address, inode) into `tcp`, sorted by inode, each once (none when a
/// socket could not be told apart).
fn inventory(rows: std::slice::ChunksExact<'_, u8>, tcp: &mut Vec<(u64, u64)>) -> FdInventory {
    tcp.clear();
    let mut inv = FdInventory {
        tcp_inodes: Some(Vec::new()),
        ..Default::default()
    };
    for b in rows {
        inv.count += 1;
        if u32_at(b, 4) == FILE_SOCKET {
            let inode = u64_at(b, 8);
            inv.socket_inodes.push(inode);
            match connectable_tcp(b) {
                Some(true) => {
                    inv.tcp_inodes.iter_mut().for_each(|t| t.push(inode));
                    tcp.push((u64_at(b, 24), inode));
                }
                Some(false) => {}
                // One socket the walk could not tell: all of them asked.
                None => inv.tcp_inodes = None,
            }
        } else if b[16..32].starts_with(b"uverbs") {
            // Text only for a likely device: most of a rank's fds are not.
            let (name, dir) = (comm_text(&b[16..32]), comm_text(&b[32..48]));
            if let Some(n) = uverbs_of_link(&format!("/{dir}/{name}")) {
                inv.uverbs.push(n);
            }
        }
    }
    if inv.tcp_inodes.is_none() {
        // sock_diag answers for every socket of this process's namespace:
        // none of them is worth the run's time.
        tcp.clear();
    }
    tcp.sort_unstable_by_key(|(_, ino)| *ino);
    tcp.dedup_by_key(|(_, ino)| *ino);
    inv.deduped()
}

/// Which walk a [`TaskIter`] is started for: the best this kernel has, or
/// one made to compare with it.
#[derive(Clone, Copy, PartialEq)]
enum How {
    Together,
    PerProcess,
    Node,
}

/// How a read reaches the watched threads.
enum Walk {
    /// One link per watched process, made when it is first read: a walk
    /// costs its own threads, whatever else runs on the node (the walk of
    /// every task cost ~140 ns for each other task: 0.57 ms a tick among
    /// 4,000 idle threads, against 10 us among ~100).
    PerProcess(BTreeMap<u32, IterLink>),
    /// One link over every task of the node (kernels before 6.1).
    Node(IterLink),
    /// Every watched process in one walk, a link per process for those
    /// it cannot take (Linux 6.7+).
    Together(Box<Together>),
}

/// `kitty_tasks_walk`, linked to kitty's own main thread, and what it is
/// told to walk: `walk_tgids[from..to]`.
struct Together {
    link: IterLink,
    tgids: Array<MapData, u32>,
    range: Array<MapData, u64>,
    /// What `walk_tgids` holds, and the range set last.
    listed: Vec<u32>,
    range_set: Option<(u32, u32)>,
    /// Each process's rows at the last tick: a process is walked with
    /// others once its rows are known and few enough.
    rows_of: BTreeMap<u32, usize>,
    /// Links of the processes walked on their own: new ones (their
    /// threads not known yet), large ones, and a walk's that failed.
    alone: BTreeMap<u32, IterLink>,
    /// The last read's walks of ranges, and of processes on their own
    /// (for the tests).
    last_walks: (usize, usize),
}

/// What a tick reads, in the processes' order: a range of `walk_tgids`
/// in one walk, or a process on its own link.
enum Step {
    Range(u32, u32),
    Alone(u32),
}

impl Together {
    /// Loads and links the walk (kfunc calls linked to this kernel's
    /// functions), and walks kitty itself once: any step a kernel cannot
    /// take is found here.
    fn start(ebpf: &mut Ebpf, btf: &aya::Btf) -> Result<Together, ProbeError> {
        let ns = std::fs::read_link("/proc/self/ns/pid").unwrap_or_default();
        if ns.as_os_str() != INIT_PID_NS {
            return Err(ProbeError::Kernel(
                "kitty is not in the first pid namespace (the walk finds processes by their pid there)"
                    .into(),
            ));
        }
        let p: &mut Iter = load::program(ebpf, WALK_PROGRAM)?;
        p.load("task", btf)
            .map_err(|e| load::reason(&e).at("iter/task (one walk)"))?;
        let prog = p.fd().map_err(|e| load::reason(&e))?;
        let link = IterLink::new(prog.as_fd(), Target::Thread(std::process::id()))?;
        let mut t = Together {
            link,
            tgids: load::take_map(ebpf, "walk_tgids")?,
            range: load::take_map(ebpf, "walk_range")?,
            listed: Vec::new(),
            range_set: None,
            rows_of: BTreeMap::new(),
            alone: BTreeMap::new(),
            last_walks: (0, 0),
        };
        let me = std::process::id();
        t.list(&[me])?;
        t.set_range(0, 1)?;
        let rows = t.link.read_marked(ROW)?;
        if !rows.into_iter().any(|b| u32_at(b, 4) == me) {
            return Err(ProbeError::Kernel(
                "the walk gave none of kitty's own threads".into(),
            ));
        }
        Ok(t)
    }

    /// `walk_tgids` made `tgids` (only the places that changed).
    fn list(&mut self, tgids: &[u32]) -> Result<(), ProbeError> {
        let kernel = |e: aya::maps::MapError| ProbeError::Kernel(format!("walk_tgids: {e}"));
        for (i, &g) in tgids.iter().enumerate() {
            if self.listed.get(i) != Some(&g) {
                self.tgids.set(i as u32, g, 0).map_err(kernel)?;
            }
        }
        self.listed.clear();
        self.listed.extend_from_slice(tgids);
        Ok(())
    }

    fn set_range(&mut self, from: u32, to: u32) -> Result<(), ProbeError> {
        if self.range_set != Some((from, to)) {
            self.range_set = None;
            self.range
                .set(0, from as u64 | (to as u64) << 32, 0)
                .map_err(|e| ProbeError::Kernel(format!("walk_range: {e}")))?;
            self.range_set = Some((from, to));
        }
        Ok(())
    }

    /// This tick's rows into `take`: each range in one walk (a range whose
    /// walk fails, process by process on their own links), the others on
    /// their links; each process's rows counted for the next tick's plan.
    fn read(
        &mut self,
        tgids: &BTreeSet<u32>,
        prog: &ProgramFd,
        take: &mut dyn FnMut(&[u8]),
    ) -> Result<(), ProbeError> {
        let steps = self.plan(tgids)?;
        self.last_walks = (0, 0);
        for step in steps {
            match step {
                Step::Range(from, to) => {
                    self.last_walks.0 += 1;
                    if self.walk_range(from, to, take).is_err() {
                        // More rows than the iterator's buffer holds
                        // (threads started since the last tick), or a
                        // failed read, which gave no rows (the kernel keeps
                        // a walk's rows only when all fit).
                        for at in from..to {
                            let tgid = self.listed[at as usize];
                            self.alone(prog, tgid, take)?;
                        }
                    }
                }
                Step::Alone(tgid) => self.alone(prog, tgid, take)?,
            }
        }
        Ok(())
    }

    /// `walk_tgids[from..to]` in one walk, their rows counted afresh (a
    /// gone process counts 0).
    fn walk_range(
        &mut self,
        from: u32,
        to: u32,
        take: &mut dyn FnMut(&[u8]),
    ) -> Result<(), ProbeError> {
        for tgid in &self.listed[from as usize..to as usize] {
            self.rows_of.insert(*tgid, 0);
        }
        self.set_range(from, to)?;
        for b in self.link.read_marked(ROW)? {
            *self.rows_of.entry(u32_at(b, 4)).or_default() += 1;
            take(b);
        }
        Ok(())
    }

    /// One process on its own link, its rows counted afresh.
    fn alone(
        &mut self,
        prog: &ProgramFd,
        tgid: u32,
        take: &mut dyn FnMut(&[u8]),
    ) -> Result<(), ProbeError> {
        self.last_walks.1 += 1;
        let rows_of = &mut self.rows_of;
        rows_of.insert(tgid, 0);
        walk_alone(&mut self.alone, prog, tgid, &mut |b| {
            *rows_of.entry(u32_at(b, 4)).or_default() += 1;
            take(b);
        })
    }

    /// This tick's steps: the processes whose rows are known and few
    /// walked together, in ranges of at most [`WALK_ROWS`] rows; the
    /// others each on its own link. In `tgids`' order.
    fn plan(&mut self, tgids: &BTreeSet<u32>) -> Result<Vec<Step>, ProbeError> {
        self.rows_of.retain(|t, _| tgids.contains(t));
        self.alone.retain(|t, _| tgids.contains(t));
        let together: Vec<u32> = tgids
            .iter()
            .copied()
            .filter(|t| self.rows_of.get(t).is_some_and(|n| *n <= WALK_ROWS))
            .take(WALK_MAX)
            .collect();
        self.list(&together)?;
        let mut steps = Vec::new();
        let (mut at, mut from, mut rows) = (0u32, 0u32, 0usize);
        for &tgid in tgids {
            if together.get(at as usize) == Some(&tgid) {
                let n = self.rows_of[&tgid];
                if rows + n > WALK_ROWS && at > from {
                    steps.push(Step::Range(from, at));
                    (from, rows) = (at, 0);
                }
                rows += n;
                at += 1;
            } else {
                if at > from {
                    steps.push(Step::Range(from, at));
                    (from, rows) = (at, 0);
                }
                steps.push(Step::Alone(tgid));
            }
        }
        if at > from {
            steps.push(Step::Range(from, at));
        }
        Ok(steps)
    }
}

impl TaskIter {
    /// Loads the iterator program (nothing runs until a read), linked per
    /// watched process where the kernel can (Linux 6.1+), else over every
    /// task.
    pub fn start() -> Result<TaskIter, ProbeError> {
        Self::start_walking(How::Together)
    }

    /// As [`TaskIter::start`], a link per watched process whatever the
    /// kernel can do: what a kernel before 6.7 gets (the tests compare
    /// the walks).
    pub fn start_per_process() -> Result<TaskIter, ProbeError> {
        Self::start_walking(How::PerProcess)
    }

    /// As [`TaskIter::start`], walking every task of the node whatever the
    /// kernel can do: what a kernel before 6.1 gets (the tests compare the
    /// two walks).
    pub fn start_node_wide() -> Result<TaskIter, ProbeError> {
        Self::start_walking(How::Node)
    }

    fn start_walking(how: How) -> Result<TaskIter, ProbeError> {
        let per_process = how != How::Node;
        let btf = load::kernel_btf()?;
        // The walk's kfunc calls linked to this kernel's functions, if it
        // has them; else the object as it is (the walk then fails to load
        // and the links per process serve).
        let linked =
            (how == How::Together).then(|| crate::kfuncs::link(objects::TASKS, &WALK_KFUNCS, &btf));
        let mut not_together = None;
        let object = match &linked {
            Some(Ok((object, _))) => object.bytes(),
            Some(Err(e)) => {
                not_together = Some(e.to_string());
                objects::TASKS
            }
            None => objects::TASKS,
        };
        let mut ebpf = load::load_object(object, &[])?;
        let p: &mut Iter = load::program(&mut ebpf, PROGRAM)?;
        p.load("task", &btf)
            .map_err(|e| load::reason(&e).at("iter/task"))?;
        let prog = p
            .fd()
            .and_then(|fd| fd.try_clone().map_err(Into::into))
            .map_err(|e| load::reason(&e))?;
        // A link to kitty's own process tells whether this kernel walks one
        // process (Linux 6.1+; an older one refuses the link's task info);
        // one walk now finds a kernel that loads the program but cannot run
        // it, here rather than on the first tick.
        let own = per_process
            .then(|| IterLink::new(prog.as_fd(), Target::Process(std::process::id())).ok())
            .flatten();
        let walk = match own {
            Some(mut own) => {
                let _rows = own.read_marked(ROW).map_err(|e| e.at("iter/task"))?;
                let together = match (how, &not_together) {
                    (How::Together, None) => Some(Together::start(&mut ebpf, &btf)),
                    _ => None,
                };
                match together {
                    Some(Ok(t)) => Walk::Together(Box::new(t)),
                    Some(Err(e)) => {
                        not_together = Some(e.to_string());
                        Walk::PerProcess(BTreeMap::new())
                    }
                    None => Walk::PerProcess(BTreeMap::new()),
                }
            }
            None => {
                let mut all =
                    IterLink::new(prog.as_fd(), Target::All).map_err(|e| e.at("iter/task"))?;
                let _rows = all.read_marked(ROW).map_err(|e| e.at("iter/task"))?;
                Walk::Node(all)
            }
        };
        // The neighbours scan's walk is a bonus: without it the scan
        // reads each process's stat file as before.
        let node = load::program::<Iter>(&mut ebpf, NODE_PROGRAM)
            .and_then(|p| {
                p.load("task", &btf)
                    .map_err(|e| load::reason(&e).at("iter/task"))?;
                let fd = p.fd().map_err(|e| load::reason(&e))?;
                IterLink::new(fd.as_fd(), Target::All)
            })
            .map_err(|e| e.to_string());
        let linked_per_process = matches!(walk, Walk::PerProcess(_) | Walk::Together(_));
        let files = FileWalk::start(&mut ebpf, &btf, linked_per_process);
        let sockets = match &files {
            Ok(_) => TcpSocks::start(&mut ebpf, &btf).map_err(|e| e.to_string()),
            Err(_) => Err("no open-files walk to find them".into()),
        };
        let watched = WatchedSet::new(load::take_map(&mut ebpf, "watched")?);
        Ok(TaskIter {
            _ebpf: ebpf,
            prog,
            walk,
            not_together: not_together.filter(|_| how == How::Together),
            node,
            files,
            sockets,
            watched,
            ns_per_tick: 1_000_000_000 / clock_ticks(),
            names: Names::default(),
        })
    }

    /// Opens it for the sampler (`TaskSource::Iterator`).
    pub fn open() -> Result<Box<dyn TaskCounters>, String> {
        TaskIter::start()
            .map(|t| Box::new(t) as Box<dyn TaskCounters>)
            .map_err(|e| e.to_string())
    }

    /// Whether the neighbours scan walks every task (`kitty_node_cpu`), or
    /// why not (it then reads each process's stat file).
    pub fn node_walk(&self) -> Result<(), &str> {
        self.node.as_ref().map(|_| ()).map_err(String::as_str)
    }

    /// Whether the fd inventory walks each watched process's open files
    /// (`kitty_task_files`), or why not (it then reads /proc/<pid>/fd).
    pub fn file_walk(&self) -> Result<(), &str> {
        self.files.as_ref().map(|_| ()).map_err(String::as_str)
    }

    /// Whether the watched TCP sockets are read in one run a tick
    /// (`kitty_tcp_walk`), or why not (sock_diag then answers).
    pub fn socket_walk(&self) -> Result<(), &str> {
        self.sockets.as_ref().map(|_| ()).map_err(String::as_str)
    }

    /// The last read's walks of several processes at once and of one
    /// process on its own link; None unless they are walked at once.
    #[doc(hidden)]
    pub fn last_walks(&self) -> Option<(usize, usize)> {
        match &self.walk {
            Walk::Together(t) => Some(t.last_walks),
            _ => None,
        }
    }

    /// [`TaskIter::walk_name`], and why the watched processes are not
    /// walked at once where that was tried.
    pub fn walk_said(&self) -> String {
        match &self.not_together {
            Some(why) => format!("{} (not in one walk: {why})", self.walk_name()),
            None => self.walk_name().to_string(),
        }
    }

    /// How the threads are walked: per process, or over every task.
    pub fn walk_name(&self) -> &'static str {
        match self.walk {
            Walk::PerProcess(_) => "iter/task per process",
            Walk::Node(_) => "iter/task over every task",
            Walk::Together(_) => "one iter/task walk of every watched process (kfuncs)",
        }
    }

    /// The rows of the watched processes' live threads: one walk of them
    /// all (in ranges), a walk of each one's threads (links made for new
    /// ones, dropped for gone ones), or one of every task; each row
    /// converted as it is read.
    fn walk(&mut self, tgids: &BTreeSet<u32>) -> Result<Vec<TaskRow>, ProbeError> {
        let ns_per_tick = self.ns_per_tick;
        let names = &mut self.names;
        names.start();
        // Room for as many rows as the last walk gave, made once (not
        // regrown by doubling, each step a copy, every tick).
        let mut rows = Vec::with_capacity(names.last.len());
        // Exited threads (zombies not yet reaped) are not in task/ either.
        let mut take = |b: &[u8]| {
            let r = Row::from_bytes(b);
            if r.exit_state == 0 {
                let comm = names.name(r.tid, &r.comm);
                rows.push(r.into_task_row(comm, ns_per_tick));
            }
        };
        match &mut self.walk {
            Walk::Node(all) => all.read_marked(ROW)?.for_each(take),
            Walk::PerProcess(links) => {
                links.retain(|tgid, _| tgids.contains(tgid));
                for &tgid in tgids {
                    walk_alone(links, &self.prog, tgid, &mut take)?;
                }
            }
            Walk::Together(t) => t.read(tgids, &self.prog, &mut take)?,
        }
        Ok(rows)
    }
}

/// One process's rows from its own link (made on first use).
fn walk_alone(
    links: &mut BTreeMap<u32, IterLink>,
    prog: &ProgramFd,
    tgid: u32,
    each: &mut dyn FnMut(&[u8]),
) -> Result<(), ProbeError> {
    let link = match links.entry(tgid) {
        std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
        std::collections::btree_map::Entry::Vacant(v) => {
            // A process gone since discovery (ESRCH) has no rows.
            match IterLink::new(prog.as_fd(), Target::Process(tgid)) {
                Ok(link) => v.insert(link),
                Err(_) => return Ok(()),
            }
        }
    };
    // Only its own: a kernel that ignored the link's target would walk
    // every task (the filter map holds every watched tgid).
    link.read_marked(ROW)?
        .filter(|b| u32_at(b, 4) == tgid)
        .for_each(each);
    Ok(())
}

/// The threads' names of the last walk, in its order, and this walk's as
/// it goes. A walk meets the threads in the order the last one did (the
/// kernel's thread list; the processes by pid), so a thread's name is
/// found at its place, not looked up: one `Arc<str>` made a thread while
/// its name stays, not one a tick (a cache hashed by tid cost as much in
/// cold lookups as the allocations it saved).
///
/// A name found at its place is moved from the last walk to this one (one
/// count taken a thread a tick, for its row, not three).
#[derive(Default)]
struct Names {
    last: Vec<(u32, [u8; 16], Option<Arc<str>>)>,
    now: Vec<(u32, [u8; 16], Option<Arc<str>>)>,
}

impl Names {
    /// A new walk: the one just ended becomes the last.
    fn start(&mut self) {
        std::mem::swap(&mut self.last, &mut self.now);
        self.now.clear();
    }

    /// The name of the walk's next thread: the last walk's at this place
    /// when it is the same thread with the same name, else made anew.
    fn name(&mut self, tid: u32, comm: &[u8; 16]) -> Arc<str> {
        let kept = match self.last.get_mut(self.now.len()) {
            Some((t, c, name)) if *t == tid && c == comm => name.take(),
            _ => None,
        };
        let name = kept.unwrap_or_else(|| Arc::from(comm_str(comm).as_ref()));
        self.now.push((tid, *comm, Some(name.clone())));
        name
    }
}

/// Sums one walk of every thread (`struct cpu_row`s) per process.
fn node_processes(rows: std::slice::ChunksExact<'_, u8>, ns_per_tick: u64) -> Vec<NodeProcess> {
    let mut by_tgid: BTreeMap<u32, NodeProcess> = BTreeMap::new();
    for b in rows {
        let (u32_at, u64_at) = (|o| u32_at(b, o), |o| u64_at(b, o));
        let (tid, tgid) = (u32_at(0), u32_at(4));
        let p = by_tgid.entry(tgid).or_insert_with(|| NodeProcess {
            pid: tgid,
            start_ticks: u64_at(24) / ns_per_tick,
            ..Default::default()
        });
        p.cpu_ns += u64_at(8) + u64_at(16);
        if tid == tgid {
            p.comm = comm_text(&b[32..48]);
        }
    }
    by_tgid.into_values().collect()
}

impl TaskCounters for TaskIter {
    fn strategy(&self) -> String {
        let walk = self.walk_said();
        let files = match &self.files {
            Ok(_) => "open files by iter/task_file".to_string(),
            Err(why) => format!("open files from /proc ({why})"),
        };
        match &self.sockets {
            Ok(_) => format!("{walk}, {files}, TCP sockets read in one run"),
            Err(why) => format!("{walk}, {files}, TCP sockets from sock_diag ({why})"),
        }
    }

    fn read(&mut self, tgids: &BTreeSet<u32>) -> Result<Vec<TaskRow>, String> {
        self.watched.sync(tgids);
        if let Ok(files) = &mut self.files {
            files.links.retain(|tgid, _| tgids.contains(tgid));
            files.tcp.retain(|tgid, _| tgids.contains(tgid));
        }
        self.walk(tgids).map_err(|e| e.to_string())
    }

    fn node_processes(&mut self) -> Option<Vec<NodeProcess>> {
        let rows = self.node.as_mut().ok()?.read(CPU_ROW).ok()?;
        Some(node_processes(rows, self.ns_per_tick))
    }

    fn open_files(&mut self, tgid: u32) -> Option<Result<FdInventory, String>> {
        let files = self.files.as_mut().ok()?;
        Some(files.inventory(tgid).map_err(|e| e.to_string()))
    }

    fn tcp_sockets(&mut self) -> Option<Result<TcpSockets, String>> {
        let (files, socks) = (self.files.as_ref().ok()?, self.sockets.as_mut().ok()?);
        socks
            .read(files.tcp.values().flatten())
            .map_err(|e| e.to_string())
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A row as a walk makes it, named afresh.
    fn task_row(b: &[u8]) -> TaskRow {
        let r = Row::from_bytes(b);
        let name = Names::default().name(r.tid, &r.comm);
        r.into_task_row(name, 10_000_000)
    }

    #[test]
    fn a_thread_that_keeps_its_place_and_name_shares_the_name_made_before() {
        let comm = |s: &str| {
            let mut c = [0u8; 16];
            c[..s.len()].copy_from_slice(s.as_bytes());
            c
        };
        let mut names = Names::default();
        names.start();
        let (a, b) = (names.name(10, &comm("main")), names.name(11, &comm("nccl")));
        names.start();
        let again = names.name(10, &comm("main"));
        assert!(
            Arc::ptr_eq(&again, &a),
            "same thread, same place, same name"
        );
        // Held here twice and by this walk: the last walk's count moved.
        assert_eq!(Arc::strong_count(&a), 3);
        let renamed = names.name(11, &comm("loader"));
        assert_eq!(&*renamed, "loader");
        assert!(!Arc::ptr_eq(&renamed, &b));
        names.start();
        // A thread gone before them: each found at another place, made anew
        // (and right).
        let moved = names.name(11, &comm("loader"));
        assert_eq!(&*moved, "loader");
        assert!(!Arc::ptr_eq(&moved, &renamed));
        names.start();
        assert!(Arc::ptr_eq(&names.name(11, &comm("loader")), &moved));
    }

    /// A file row: a socket (family, type, protocol, state, whether the
    /// walk could tell them, its address), or a plain file.
    fn file_row(ino: u64, socket: Option<(u16, u16, u16, u8, u8, u64)>) -> Vec<u8> {
        let mut b = vec![0u8; FILE_ROW];
        b[8..16].copy_from_slice(&ino.to_ne_bytes());
        if let Some((family, kind, protocol, state, known, sk)) = socket {
            b[4..8].copy_from_slice(&FILE_SOCKET.to_ne_bytes());
            b[16..18].copy_from_slice(&family.to_ne_bytes());
            b[18..20].copy_from_slice(&kind.to_ne_bytes());
            b[20..22].copy_from_slice(&protocol.to_ne_bytes());
            (b[22], b[23]) = (state, known);
            b[24..32].copy_from_slice(&sk.to_ne_bytes());
        }
        b
    }

    #[test]
    fn the_connectable_tcp_sockets_are_listed_for_the_run_unless_one_socket_is_unknown() {
        const ESTABLISHED: u8 = 1;
        const LISTEN: u8 = 10;
        let tcp_v4 = |ino, state, sk| file_row(ino, Some((2, 1, 6, state, 1, sk)));
        let mut rows = [
            tcp_v4(30, ESTABLISHED, 0xa0),
            file_row(5, None),
            tcp_v4(20, ESTABLISHED, 0xb0),
            tcp_v4(40, LISTEN, 0xc0),
            file_row(50, Some((1, 1, 0, 0, 1, 0xd0))), // a unix socket
            tcp_v4(20, ESTABLISHED, 0xb0),             // a dup'ed fd
        ]
        .concat();
        let mut tcp = vec![(1, 1)];
        let inv = inventory(rows.chunks_exact(FILE_ROW), &mut tcp);
        assert_eq!(inv.count, 6);
        assert_eq!(inv.tcp_inodes, Some(vec![20, 30]));
        assert_eq!(tcp, [(0xb0, 20), (0xa0, 30)], "by inode, each once");
        // A socket the walk could not tell apart: sock_diag answers for
        // all of them, and the run is given none.
        rows.extend(file_row(60, Some((2, 1, 6, ESTABLISHED, 0, 0xe0))));
        let inv = inventory(rows.chunks_exact(FILE_ROW), &mut tcp);
        assert_eq!(inv.tcp_inodes, None);
        assert!(tcp.is_empty());
    }

    #[test]
    fn row_layout_matches_the_c_struct() {
        assert_eq!(ROW, 168, "struct row in tasks.bpf.c is 168 bytes");
        let mut b = vec![0u8; ROW];
        b[0..4].copy_from_slice(&7u32.to_ne_bytes());
        b[4..8].copy_from_slice(&5u32.to_ne_bytes());
        b[8..16].copy_from_slice(&123u64.to_ne_bytes());
        b[32..40].copy_from_slice(&9u64.to_ne_bytes());
        b[64..68].copy_from_slice(b"rank");
        b[80..88].copy_from_slice(&2_500_000_000u64.to_ne_bytes());
        b[56..60].copy_from_slice(&1u32.to_ne_bytes());
        b[88..96].copy_from_slice(&4096u64.to_ne_bytes());
        b[112..120].copy_from_slice(&8192u64.to_ne_bytes());
        b[120..128].copy_from_slice(&77u64.to_ne_bytes());
        b[128..136].copy_from_slice(&300u64.to_ne_bytes());
        b[136..140].copy_from_slice(&(KNOWN_IO | KNOWN_RSS | KNOWN_PROCESS).to_ne_bytes());
        b[140..144].copy_from_slice(&4026531840u32.to_ne_bytes());
        b[144..152].copy_from_slice(&4242u64.to_ne_bytes());
        b[152..160].copy_from_slice(&333u64.to_ne_bytes());
        b[160..168].copy_from_slice(&0xc0ffeeu64.to_ne_bytes());
        let r = task_row(&b);
        assert_eq!(r.state, 'S');
        assert_eq!(r.io_bytes, Some((4096, 0)));
        assert_eq!(
            r.process,
            ProcessPart {
                dead_exec_ns: 77,
                dead_io_bytes: Some((0, 8192)),
                rss_pages: Some(300),
                open_fds: None,
                affinity_sig: None,
                placement: Some(Placement {
                    cgroups: 4242,
                    netns: 4026531840
                }),
            }
        );
        // Not a leader's row: its own I/O, no process part.
        b[136..140].copy_from_slice(&(KNOWN_IO | KNOWN_RSS).to_ne_bytes());
        let thread = task_row(&b);
        assert_eq!(thread.io_bytes, Some((4096, 0)));
        assert_eq!(thread.process, ProcessPart::default());
        b[136..140].copy_from_slice(
            &(KNOWN_IO | KNOWN_RSS | KNOWN_FDS | KNOWN_CPUS | KNOWN_PROCESS).to_ne_bytes(),
        );
        let counted = task_row(&b);
        assert_eq!(counted.process.open_fds, Some(333));
        assert_eq!(counted.process.affinity_sig, Some(0xc0ffee));
        b[136..140].copy_from_slice(&KNOWN_PROCESS.to_ne_bytes());
        b[140..144].copy_from_slice(&0u32.to_ne_bytes());
        let unknown = task_row(&b);
        assert_eq!((unknown.io_bytes, unknown.process.rss_pages), (None, None));
        assert_eq!(unknown.process.placement, None, "no namespace: exiting");
        let r = task_row(&b);
        assert_eq!(
            (r.tid, r.tgid, r.run_delay_ns, r.nr_migrations),
            (7, 5, 123, 9)
        );
        assert_eq!(&*r.comm, "rank");
        assert_eq!(r.start_ticks, 250);
    }
}
