//! The task iterator's walk of a process's open files gives the fd
//! inventory that /proc/<pid>/fd and its links give: the count, the
//! sockets, the RDMA verbs devices, on a live process with more files than
//! one read of the walk holds; and the leader's task row counts the open
//! fds as stat of /proc/<pid>/fd does (a fd table of two read chunks).
mod support;
use kitty_core::sources::process::{read_process, Reuse};
use kitty_core::sources::tasks::TaskCounters;
use kitty_probe_ebpf::tasks::TaskIter;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

/// A process holding 600 plain files, TCP and Unix sockets (one of them
/// twice), a UDP socket, a TCP socket not connected, a bound Unix socket
/// and an O_PATH fd of its path (a file, not a socket), and a file named as
/// a verbs device (`infiniband/uverbs7`); it says the inodes of its
/// connected TCP sockets; on a line of its stdin it closes the device and
/// a Unix socket, and it exits when its stdin closes.
const HOLDER: &str = r#"
import os, socket, sys
d = sys.argv[1]
os.makedirs(d + "/infiniband", exist_ok=True)
open(d + "/infiniband/uverbs7", "w").close()
keep = [open(d + "/infiniband/uverbs7")]
keep += [open("/dev/null") for _ in range(600)]
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen()
c = socket.create_connection(l.getsockname()); a, _ = l.accept()
u1, u2 = socket.socketpair()
keep += [l, c, a, u1, u2, os.dup(c.fileno())]
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); unconnected = socket.socket()
bound = socket.socket(socket.AF_UNIX); bound.bind(d + "/sock")
keep += [udp, unconnected, bound, os.open(d + "/sock", os.O_PATH)]
print("ready", os.fstat(c.fileno()).st_ino, os.fstat(a.fileno()).st_ino, flush=True)
sys.stdin.readline()
keep[0].close(); u2.close()
print("closed", flush=True)
sys.stdin.read()
"#;

#[test]
fn the_file_walk_and_procfs_give_the_same_fd_inventory() {
    if !support::can_load_bpf() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new("python3")
        .args(["-c", HOLDER])
        .arg(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut said = || {
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        line.trim().to_string()
    };
    let ready = said();
    let mut connected: Vec<u64> = ready
        .strip_prefix("ready ")
        .expect("ready and two inodes")
        .split(' ')
        .map(|i| i.parse().unwrap())
        .collect();
    connected.sort();
    let pid = child.id();
    let procfs =
        || read_process(Path::new(&format!("/proc/{pid}")), 4096, Reuse::default()).unwrap();
    // What stat(/proc/<pid>/fd) says (Linux 6.2+), and the leader row's count.
    let stat_count = || std::fs::metadata(format!("/proc/{pid}/fd")).unwrap().len();
    let row_count = |it: &mut TaskIter| {
        let rows = it.read(&[pid].into()).unwrap();
        let leader = rows
            .iter()
            .find(|r| r.tid == pid)
            .expect("the leader's row");
        assert!(rows
            .iter()
            .filter(|r| r.tid != pid)
            .all(|r| r.process.open_fds.is_none()));
        leader.process.open_fds
    };

    let mut it = TaskIter::start().expect("the task iterator loads here");
    assert!(
        it.strategy().contains("iter/task_file"),
        "{}",
        it.strategy()
    );
    let walked = it
        .open_files(pid)
        .expect("the iterator walks open files here")
        .unwrap();
    let read = procfs();
    assert_eq!(Some(walked.count), read.fds);
    assert!(walked.count > 600, "{}", walked.count);
    assert_eq!(row_count(&mut it), Some(walked.count));
    assert_eq!(stat_count(), walked.count);
    assert_eq!(walked.socket_inodes, read.socket_inodes);
    assert_eq!(
        walked.socket_inodes.len(),
        8,
        "8 sockets, one of them twice; a socket's path opened is a file"
    );
    // Only the walk tells a socket's kind: of the eight, sock_diag can
    // find the two connected TCP sockets.
    assert_eq!(walked.tcp_inodes, Some(connected.clone()));
    assert_eq!(read.tcp_inodes, None);
    assert_eq!(walked.uverbs, read.uverbs);
    assert_eq!(walked.uverbs, [7]);

    // Walked again through the same link, after two closes.
    writeln!(child.stdin.as_mut().unwrap()).unwrap();
    assert_eq!(said(), "closed");
    let again = it.open_files(pid).unwrap().unwrap();
    let read = procfs();
    assert_eq!(Some(again.count), read.fds);
    assert_eq!(again.count, walked.count - 2);
    assert_eq!(row_count(&mut it), Some(again.count));
    assert_eq!(stat_count(), again.count);
    assert_eq!(again.socket_inodes, read.socket_inodes);
    assert_eq!(again.socket_inodes.len(), 7);
    assert_eq!(again.tcp_inodes, Some(connected));
    assert!(again.uverbs.is_empty());

    drop(child.stdin.take());
    child.wait().unwrap();
    // Gone: nothing walked (or an error), never another process's files.
    let gone = it.open_files(pid).unwrap();
    assert!(
        gone.is_err() || matches!(&gone, Ok(i) if i.count == 0),
        "{gone:?}"
    );
}
