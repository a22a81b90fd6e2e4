//! The watched processes of the tick benchmarks: children that each hold
//! `sockets` connected TCP sockets and run `threads` threads that wait, so
//! that a tick has real procfs, sock_diag and per-thread work to do.
#![allow(dead_code)]

use std::net::{TcpListener, TcpStream};

/// The children (killed with the parent) and the server ends of their
/// sockets, to keep open while the bench runs. Call before this process
/// starts any thread: a child spawns its threads after fork.
pub fn spawn(procs: usize, sockets: usize, threads: usize) -> (Vec<u32>, Vec<TcpStream>) {
    spawn_talking(procs, sockets, threads, None)
}

/// [`spawn`], each child also sending a byte on each of its sockets every
/// `talk` (so that each is ACKed: the RTT probe's samples).
pub fn spawn_talking(
    procs: usize,
    sockets: usize,
    threads: usize,
    talk: Option<std::time::Duration>,
) -> (Vec<u32>, Vec<TcpStream>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let mut children = Vec::new();
    let mut keep = Vec::new();
    for _ in 0..procs {
        let socks: Vec<TcpStream> = (0..sockets)
            .map(|_| TcpStream::connect(addr).unwrap())
            .collect();
        for _ in 0..sockets {
            keep.push(listener.accept().unwrap().0);
        }
        // SAFETY: this process is single-threaded here (see above), so the
        // child is a whole copy of it and may start threads.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            use std::os::fd::AsRawFd;
            // SAFETY: closing inherited fds and setting the death signal.
            unsafe {
                for k in &keep {
                    libc::close(k.as_raw_fd());
                }
                libc::close(listener.as_raw_fd());
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            }
            for _ in 1..threads {
                std::thread::spawn(|| loop {
                    std::thread::park();
                });
            }
            if let Some(every) = talk {
                use std::io::Write;
                let mut socks = socks;
                loop {
                    for s in &mut socks {
                        let _ = s.write_all(b"x");
                    }
                    std::thread::sleep(every);
                }
            }
            loop {
                // SAFETY: pause has no preconditions.
                unsafe { libc::pause() };
            }
        }
        drop(socks);
        children.push(pid as u32);
    }
    (children, keep)
}

/// A sampler configuration watching exactly these processes.
pub fn watching(children: &[u32]) -> kitty_core::sampler::SamplerConfig {
    kitty_core::sampler::SamplerConfig {
        rule: kitty_core::sources::discovery::WatchRule {
            key: "KITTY_BENCH_NEVER_SET".into(),
            value: "1".into(),
            pids: children.to_vec(),
        },
        ..Default::default()
    }
}

/// Ends the children.
pub fn kill(children: &[u32]) {
    for pid in children {
        // SAFETY: killing our own children.
        unsafe { libc::kill(*pid as i32, libc::SIGKILL) };
    }
}
