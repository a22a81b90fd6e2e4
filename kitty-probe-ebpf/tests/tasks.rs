//! The task iterator and procfs agree, thread by thread, on a live process
//! (this test's own: parked threads whose counters hold still while both
//! read them, and the running test thread, whose counters only grow).
mod support;
use kitty_core::engine::stages::thread_cpu_ns;
use kitty_core::sources::process::{read_process, Reuse};
use kitty_core::sources::tasks::TaskCounters;
use kitty_probe_ebpf::tasks::TaskIter;
use std::path::Path;
use std::sync::mpsc;

fn status_field(tid: u32, key: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/self/task/{tid}/status")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.trim().parse().ok())
        .unwrap()
}

#[test]
fn iterator_and_procfs_agree_on_a_live_process() {
    if !support::can_load_bpf() {
        return;
    }
    // Four threads that burn a little CPU, sleep and yield (so they have run
    // delay, switches and maybe migrations), then park.
    let (ready_tx, ready_rx) = mpsc::channel();
    let (stop_tx, stop_rx) = mpsc::channel::<()>();
    let stop_rx = std::sync::Arc::new(std::sync::Mutex::new(stop_rx));
    let mut handles = Vec::new();
    for i in 0..4 {
        let (ready, stop) = (ready_tx.clone(), stop_rx.clone());
        handles.push(
            std::thread::Builder::new()
                .name(format!("kitty-t{i}"))
                .spawn(move || {
                    // 30 ms of wall time, and at least 3 ms of its own CPU
                    // (a loaded machine gave it 88 us of 30 ms once).
                    let until = std::time::Instant::now() + std::time::Duration::from_millis(30);
                    let mut x = 0u64;
                    while std::time::Instant::now() < until || thread_cpu_ns() < 3_000_000 {
                        x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                        std::thread::yield_now();
                    }
                    std::thread::sleep(std::time::Duration::from_millis(5));
                    // SAFETY: gettid has no preconditions.
                    let tid = unsafe { libc::gettid() } as u32;
                    ready.send((tid, x)).unwrap();
                    let _ = stop.lock().unwrap().recv();
                })
                .unwrap(),
        );
    }
    let parked: Vec<u32> = (0..4).map(|_| ready_rx.recv().unwrap().0).collect();
    // A thread that runs 40 ms, writes 64 KiB to disk and exits: its time
    // and I/O are the process's (stat and io count them), kept in the
    // process's signal struct.
    let file =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("tasks-io-{}", std::process::id()));
    let written = file.clone();
    std::thread::spawn(move || {
        // 40 ms of its own CPU, not of the clock: on a machine busy with
        // other tests it may get less than half of the CPU while it spins.
        while thread_cpu_ns() < 40_000_000 {
            std::hint::black_box(0u64);
        }
        let f = std::fs::File::create(&written).unwrap();
        std::io::Write::write_all(&mut &f, &[7u8; 64 << 10]).unwrap();
        f.sync_all().unwrap();
    })
    .join()
    .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(50)); // all parked

    let own = std::process::id();
    let mut it = TaskIter::start().expect("the task iterator loads here");
    assert_eq!(
        it.strategy(),
        "one iter/task walk of every watched process (kfuncs), open files by iter/task_file, TCP sockets read in one run"
    );
    // The first read walks the process on its own link (its threads not
    // known yet); this second one in the one walk of every process.
    let _ = it.read(&[own].into_iter().collect()).unwrap();
    let rows = it.read(&[own].into_iter().collect()).unwrap();
    let procfs = read_process(Path::new("/proc/self"), 4096, Reuse::default()).unwrap();

    let row_tids: std::collections::BTreeSet<u32> = rows.iter().map(|r| r.tid).collect();
    let proc_tids: std::collections::BTreeSet<u32> = procfs.per_thread.keys().copied().collect();
    assert_eq!(row_tids, proc_tids, "the same threads");
    assert!(rows.iter().all(|r| r.tgid == own));
    assert!(
        rows.iter().all(|r| r.start_ticks == procfs.start_time),
        "start in /proc/<pid>/stat's clock ticks: {} vs {:?}",
        procfs.start_time,
        rows.iter().map(|r| r.start_ticks).collect::<Vec<_>>()
    );
    for tid in &parked {
        let r = rows.iter().find(|r| r.tid == *tid).unwrap();
        let p = &procfs.per_thread[tid];
        eprintln!(
            "{tid} {}: run delay {} / {} ns, ran {} / {} ns, {} runs, migrations {}, switches {} + {}",
            r.comm, r.run_delay_ns, p.run_delay_ns, r.exec_ns, p.exec_ns, r.run_count,
            r.nr_migrations, r.nvcsw, r.nivcsw
        );
        assert_eq!(r.comm, p.comm);
        assert!(r.comm.starts_with("kitty-t"));
        assert_eq!(r.run_delay_ns, p.run_delay_ns, "run delay of parked {tid}");
        assert_eq!(r.exec_ns, p.exec_ns, "CPU time of parked {tid}");
        assert!(
            r.exec_ns > 1_000_000,
            "it ran (30 ms of yields): {}",
            r.exec_ns
        );
        assert!(r.run_count > 1);
        let sched = std::fs::read_to_string(format!("/proc/self/task/{tid}/sched")).unwrap();
        assert_eq!(
            Some(r.nr_migrations),
            kitty_core::sources::sched::parse_nr_migrations(&sched)
        );
        assert_eq!(r.nvcsw, status_field(*tid, "voluntary_ctxt_switches:"));
        assert_eq!(r.nivcsw, status_field(*tid, "nonvoluntary_ctxt_switches:"));
        assert_eq!(r.state, 'S', "parked on a channel");
    }
    // What stat and io say of the whole process, from the rows: on the
    // leader's row only; procfs read after the iterator, so only grown.
    let part = kitty_core::sources::tasks::leader(&rows)
        .expect("the leader's row")
        .process;
    assert!(rows
        .iter()
        .all(|r| r.tid == r.tgid || r.process == Default::default()));
    eprintln!(
        "process part: {part:?}; procfs rss {:?}, cpu {} ticks",
        procfs.rss_bytes, procfs.cpu_ticks
    );
    assert!(
        part.dead_exec_ns >= 30_000_000,
        "the exited thread's 40 ms: {}",
        part.dead_exec_ns
    );
    let ns_per_tick = 1_000_000_000 / kitty_core::sources::clock_ticks();
    let ticks = (part.dead_exec_ns + rows.iter().map(|r| r.exec_ns).sum::<u64>()) / ns_per_tick;
    assert!(
        ticks <= procfs.cpu_ticks + 1 && procfs.cpu_ticks <= ticks + 50,
        "CPU time: rows {ticks} ticks, stat {}",
        procfs.cpu_ticks
    );
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64;
    let rss = part.rss_pages.expect("this kernel's RSS layout is known") * page;
    let stat_rss = procfs.rss_bytes.unwrap();
    assert!(
        rss.abs_diff(stat_rss) <= stat_rss / 10,
        "RSS: rows {rss}, procfs {stat_rss}"
    );
    let io = rows
        .iter()
        .map(|r| r.io_bytes.expect("per-task I/O accounting here"));
    let (read, write) = io.fold(part.dead_io_bytes.unwrap(), |a, b| (a.0 + b.0, a.1 + b.1));
    let _ = std::fs::remove_file(&file);
    // Page-cache writes are accounted when dirtied, on a disk (not tmpfs).
    let on_tmpfs = std::process::Command::new("stat")
        .args(["-f", "-c", "%T"])
        .arg(env!("CARGO_TARGET_TMPDIR"))
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("tmpfs"));
    if !on_tmpfs {
        assert!(
            part.dead_io_bytes.unwrap().1 >= 64 << 10,
            "the exited thread's 64 KiB: {:?}",
            part.dead_io_bytes
        );
    }
    assert!(
        read <= procfs.io_read_bytes.unwrap() && write <= procfs.io_write_bytes.unwrap(),
        "I/O: rows {read} / {write}, io {:?} / {:?}",
        procfs.io_read_bytes,
        procfs.io_write_bytes
    );
    // The whole process: procfs read after the iterator, so only the running
    // threads' counters may have grown, and not by much.
    assert!(procfs.exec_ns >= rows.iter().map(|r| r.exec_ns).sum::<u64>());
    assert!(procfs.run_delay_ns >= rows.iter().map(|r| r.run_delay_ns).sum::<u64>());
    assert!(procfs.nr_migrations >= rows.iter().map(|r| r.nr_migrations).sum::<u64>());

    // An unwatched process gives no rows: the filter is in the kernel.
    assert!(it
        .read(&[1].into_iter().collect())
        .unwrap()
        .iter()
        .all(|r| r.tgid == 1));
    assert!(it.read(&Default::default()).unwrap().is_empty());

    drop(stop_tx);
    for h in handles {
        h.join().unwrap();
    }
}

/// The network namespace inode of a process, as the sampler reads it.
fn netns_of(pid: u32) -> u64 {
    kitty_core::sources::process::read_netns(Path::new(&format!("/proc/{pid}"))).unwrap()
}

#[test]
fn the_rows_say_where_a_process_is_and_when_it_moves() {
    if !support::can_load_bpf() {
        return;
    }
    // A process in a network namespace of its own (so its inode is not
    // this test's by chance), then moved to another cgroup.
    let mut child = std::process::Command::new("unshare")
        .args(["-n", "sleep", "30"])
        .spawn()
        .unwrap();
    let pid = child.id();
    // unshare execs sleep in the new namespace under the same pid.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap() != "sleep\n" {
        assert!(std::time::Instant::now() < deadline, "unshare did not exec");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let mut it = TaskIter::start().expect("the task iterator loads here");
    let watched = [pid].into_iter().collect();
    let placement = |it: &mut TaskIter| {
        let rows = it.read(&watched).unwrap();
        let leader = rows.iter().find(|r| r.tid == pid).expect("its row");
        leader.process.placement.expect("a live process has both")
    };
    let before = placement(&mut it);
    assert_eq!(before.netns, netns_of(pid), "ns/net's inode");
    assert_ne!(
        before.netns,
        netns_of(std::process::id()),
        "its own namespace"
    );
    assert_eq!(placement(&mut it), before, "nothing moved");

    // The unified hierarchy where it is the only one, else a v1 one (this
    // machine kind mounts v1 controllers beside an empty v2).
    let base = [
        "/sys/fs/cgroup/cgroup.controllers",
        "/sys/fs/cgroup/cpu/tasks",
    ]
    .iter()
    .map(Path::new)
    .find(|p| p.exists())
    .and_then(Path::parent)
    .expect("a cgroup hierarchy to move it in");
    let dir = base.join(format!("kitty-placement-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("cgroup.procs"), pid.to_string()).unwrap();
    let moved = placement(&mut it);
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir(&dir);
    assert_ne!(moved.cgroups, before.cgroups, "moved to {}", dir.display());
    assert_eq!(moved.netns, before.netns);
}

/// Restricts a process to the CPUs in `cpus`.
fn set_affinity(pid: u32, cpus: &[usize]) {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET and
    // sched_setaffinity only touch the set passed.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus {
            libc::CPU_SET(c, &mut set);
        }
        let r = libc::sched_setaffinity(pid as i32, std::mem::size_of_val(&set), &set);
        assert_eq!(
            r,
            0,
            "sched_setaffinity: {}",
            std::io::Error::last_os_error()
        );
    }
}

#[test]
fn the_leader_row_tells_when_the_allowed_cpus_change() {
    if !support::can_load_bpf() {
        return;
    }
    let online = std::thread::available_parallelism().map_or(1, |n| n.get());
    if online < 2 {
        eprintln!("skipped: one CPU, no other set of CPUs to move a process to");
        return;
    }
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut it = TaskIter::start().expect("the task iterator loads here");
    let watched = [pid].into_iter().collect();
    let sig = |it: &mut TaskIter| {
        let rows = it.read(&watched).unwrap();
        let leader = rows.iter().find(|r| r.tid == pid).expect("its row");
        leader
            .process
            .affinity_sig
            .expect("the leader's mask is read")
    };
    let all: Vec<usize> = (0..online).collect();
    set_affinity(pid, &all);
    let before = sig(&mut it);
    assert_eq!(sig(&mut it), before, "nothing changed");
    set_affinity(pid, &[1]);
    let one = sig(&mut it);
    set_affinity(pid, &[0]);
    let other = sig(&mut it);
    set_affinity(pid, &all);
    let back = sig(&mut it);
    let _ = child.kill();
    let _ = child.wait();
    assert_ne!(one, before, "all CPUs -> CPU 1");
    assert_ne!(other, one, "CPU 1 -> CPU 0: as many CPUs, another one");
    assert_eq!(back, before, "the same mask again, the same fingerprint");
}

/// The walk of each watched process (Linux 6.1+) and the walk of every
/// task (older kernels) give the same rows; a watched process that exits,
/// or a pid nobody has, gives none and no error.
#[test]
fn the_walk_per_process_and_the_walk_of_every_task_agree() {
    if !support::can_load_bpf() {
        return;
    }
    // Sleepers: their counters hold still while both walks read them.
    let mut kids: Vec<std::process::Child> = (0..3)
        .map(|_| {
            std::process::Command::new("sleep")
                .arg("30")
                .spawn()
                .unwrap()
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(100));
    let mut per_process = TaskIter::start_per_process().expect("the task iterator loads here");
    let mut node_wide = TaskIter::start_node_wide().expect("the task iterator loads here");
    let mut together = TaskIter::start().expect("the task iterator loads here");
    assert_eq!(
        per_process.strategy(),
        "iter/task per process, open files by iter/task_file, TCP sockets read in one run"
    );
    // Linux 6.7+ (CI's kernel: 6.18) walks every watched process at once.
    assert_eq!(
        together.strategy(),
        "one iter/task walk of every watched process (kfuncs), open files by iter/task_file, TCP sockets read in one run"
    );
    // Open files are walked per process only (over the node, every file).
    assert_eq!(
        node_wide.strategy(),
        "iter/task over every task, open files from /proc (no per-process iterator links (Linux 6.1+)), TCP sockets from sock_diag (no open-files walk to find them)"
    );
    assert!(node_wide.open_files(std::process::id()).is_none());

    let mut watched: std::collections::BTreeSet<u32> = kids.iter().map(|k| k.id()).collect();
    // Above the kernel's largest pid (pid_max is at most 2^22).
    let nobody = (1 << 22) + 7;
    watched.insert(nobody);
    let key = |rows: Vec<kitty_core::sources::tasks::TaskRow>| {
        let mut v: Vec<_> = rows
            .into_iter()
            .map(|r| (r.tgid, r.tid, r.comm, r.start_ticks, r.exec_ns, r.run_count))
            .collect();
        v.sort();
        v
    };
    let a = key(per_process.read(&watched).unwrap());
    let b = key(node_wide.read(&watched).unwrap());
    assert_eq!(a.len(), 3, "one thread per sleeper: {a:?}");
    assert_eq!(a, b, "the same rows, the same counters");
    assert!(a.iter().all(|r| &*r.2 == "sleep"));
    // The first read walks each new process on its own link (its threads
    // not known yet); the second walks them all at once.
    assert_eq!(key(together.read(&watched).unwrap()), a);
    assert_eq!(key(together.read(&watched).unwrap()), a);

    // One sleeper exits and is reaped while still watched.
    let gone = kids.remove(1);
    let gone_pid = gone.id();
    let mut gone = gone;
    gone.kill().unwrap();
    gone.wait().unwrap();
    let a = key(per_process.read(&watched).unwrap());
    let b = key(node_wide.read(&watched).unwrap());
    assert_eq!(a, b);
    assert_eq!(key(together.read(&watched).unwrap()), a);
    assert_eq!(a.len(), 2);
    assert!(a.iter().all(|r| r.0 != gone_pid));
    watched.remove(&gone_pid);
    assert_eq!(key(per_process.read(&watched).unwrap()).len(), 2);
    for mut k in kids {
        let _ = k.kill();
        let _ = k.wait();
    }
}

/// A process of `n` threads that starts `more` when a line comes on its
/// stdin (python3, as CI has).
fn threads(n: usize, more: usize) -> std::process::Child {
    let script = "import sys, threading, time\n\
def idle():\n    time.sleep(120)\n\
def start(k):\n    [threading.Thread(target=idle, daemon=True).start() for _ in range(k)]\n\
start(int(sys.argv[1]) - 1)\n\
sys.stdin.readline()\n\
start(int(sys.argv[2]))\n\
time.sleep(120)\n";
    std::process::Command::new("python3")
        .args(["-c", script, &n.to_string(), &more.to_string()])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs")
}

/// The thread ids /proc lists for `pid`, once it has `n` (waits up to 10 s).
fn tids_of(pid: u32, n: usize) -> std::collections::BTreeSet<u32> {
    let list = || -> std::collections::BTreeSet<u32> {
        std::fs::read_dir(format!("/proc/{pid}/task"))
            .map(|d| {
                d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                    .collect()
            })
            .unwrap_or_default()
    };
    for _ in 0..200 {
        if list().len() >= n {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let tids = list();
    assert_eq!(tids.len(), n, "{pid} has its threads");
    tids
}

/// Many threads: the processes the iterator's buffer can hold walked
/// together in ranges (two of 120 threads: two walks), one too large for
/// a walk (250 threads) on its own link; one that grows past what a walk
/// holds since the last tick on its own link at once; every thread of
/// each, every read.
#[test]
fn many_threads_are_walked_in_ranges_and_a_large_process_alone() {
    if !support::can_load_bpf() {
        return;
    }
    let mut kids = [
        threads(120, 0),
        threads(120, 0),
        threads(250, 0),
        threads(60, 150),
    ];
    let sizes = [120, 120, 250, 60];
    let pids: Vec<u32> = kids.iter().map(|k| k.id()).collect();
    let mut it = TaskIter::start().expect("the task iterator loads here");
    let watched: std::collections::BTreeSet<u32> = pids.iter().copied().collect();
    let check = |it: &mut TaskIter, sizes: &[usize]| {
        let rows = it.read(&watched).unwrap();
        for (pid, n) in pids.iter().zip(sizes) {
            let got: std::collections::BTreeSet<u32> = rows
                .iter()
                .filter(|r| r.tgid == *pid)
                .map(|r| r.tid)
                .collect();
            assert_eq!(got, tids_of(*pid, *n), "every thread of {pid}");
        }
        assert_eq!(rows.len(), sizes.iter().sum::<usize>(), "no thread twice");
    };
    for (pid, n) in pids.iter().zip(&sizes) {
        tids_of(*pid, *n);
    }
    // First each on its own link (threads not known), then the 120s in
    // two walks, the 250 alone, the 60 in a walk of its own after them.
    check(&mut it, &sizes);
    assert_eq!(it.last_walks(), Some((0, 4)));
    check(&mut it, &sizes);
    assert_eq!(it.last_walks(), Some((3, 1)));
    // The 60 starts 150 more: its walk no longer fits the buffer, and it
    // is read on its own link in the same tick.
    std::io::Write::write_all(kids[3].stdin.as_mut().unwrap(), b"go\n").unwrap();
    let grown = [120, 120, 250, 210];
    tids_of(pids[3], 210);
    check(&mut it, &grown);
    assert_eq!(it.last_walks(), Some((3, 2)));
    check(&mut it, &grown);
    assert_eq!(it.last_walks(), Some((2, 2)));
    for k in &mut kids {
        let _ = k.kill();
        let _ = k.wait();
    }
}

/// The walk of every task for the neighbours scan: every process of the
/// node, each with the start, name and CPU time (all its threads, the
/// exited ones included) its stat file gives.
#[test]
fn the_node_walk_gives_each_process_what_its_stat_says() {
    if !support::can_load_bpf() {
        return;
    }
    // A child that burns ~150 ms of CPU in a thread that then exits, and
    // sleeps: its stat holds still while the walk reads it.
    let kid = std::process::Command::new("python3")
        .args([
            "-c",
            "import threading,time\n\
             def burn():\n    t=time.process_time()\n    while time.process_time()-t<0.15: pass\n\
             th=threading.Thread(target=burn); th.start(); th.join()\n\
             print('ready', flush=True); time.sleep(30)",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut kid = kid;
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(kid.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "ready");
    std::thread::sleep(std::time::Duration::from_millis(50));
    let mut it = TaskIter::start().expect("the task iterator loads here");
    let before: Vec<u32> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    assert_eq!(it.node_walk(), Ok(()), "the node walk loads here");
    let procs = it.node_processes().expect("the node walk reads here");
    let pids: std::collections::BTreeSet<u32> = procs.iter().map(|p| p.pid).collect();
    // This VM's init (pid 1, `process_api`) is not visited by the kernel's
    // task iterator, linked to it or walking every task (the watched-thread
    // walk neither, so nothing changed here); every other process is.
    let still: Vec<u32> = before
        .into_iter()
        .filter(|p| *p != 1 && Path::new(&format!("/proc/{p}")).exists())
        .collect();
    assert!(
        still.iter().all(|p| pids.contains(p)),
        "every live process: missing {:?}",
        still
            .iter()
            .filter(|p| !pids.contains(p))
            .collect::<Vec<_>>()
    );
    let p = procs.iter().find(|p| p.pid == kid.id()).unwrap();
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", kid.id())).unwrap();
    let after_comm: Vec<&str> = stat.rsplit_once(") ").unwrap().1.split(' ').collect();
    let (utime, stime, start): (u64, u64, u64) = (
        after_comm[11].parse().unwrap(),
        after_comm[12].parse().unwrap(),
        after_comm[19].parse().unwrap(),
    );
    assert_eq!(p.comm, "python3");
    assert_eq!(p.start_ticks, start);
    let ns_per_tick = 1_000_000_000 / kitty_core::sources::clock_ticks();
    let stat_ns = (utime + stime) * ns_per_tick;
    eprintln!("walk {} ns, stat {} ns", p.cpu_ns, stat_ns);
    assert!(
        p.cpu_ns >= 140_000_000,
        "the exited thread's 150 ms: {}",
        p.cpu_ns
    );
    assert!(
        p.cpu_ns.abs_diff(stat_ns) <= 2 * ns_per_tick,
        "walk {} ns, stat {} ns",
        p.cpu_ns,
        stat_ns
    );
    let _ = kid.kill();
    let _ = kid.wait();
}
