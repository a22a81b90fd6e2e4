//! The delay line: copies frames from one TAP device to another, each held
//! for the link's current delay. Frames leave in arrival order; a change of
//! delay applies to frames that arrive after it.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A real link buffers, then drops: at most this many frames in flight.
const MAX_QUEUED: usize = 20_000;

pub fn spawn(
    from: File,
    to: File,
    delay_us: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
) -> JoinHandle<()> {
    std::thread::Builder::new()
        .name("faultlab-relay".into())
        .spawn(move || run(from, to, &delay_us, &stop))
        .expect("spawn relay")
}

fn run(mut from: File, mut to: File, delay_us: &AtomicU64, stop: &AtomicBool) {
    let mut queue: VecDeque<(Instant, Vec<u8>)> = VecDeque::new();
    let mut buf = vec![0u8; 65536];
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        while queue.front().is_some_and(|(due, _)| *due <= now) {
            let (_, frame) = queue.pop_front().expect("front exists");
            let _ = to.write(&frame);
        }
        let wait = queue
            .front()
            .map(|(due, _)| due.saturating_duration_since(now))
            .unwrap_or(Duration::from_millis(100))
            .min(Duration::from_millis(100));
        if !readable(&from, wait) {
            continue;
        }
        loop {
            match from.read(&mut buf) {
                Ok(n) if n > 0 => {
                    let d = delay_us.load(Ordering::Relaxed);
                    if d == 0 && queue.is_empty() {
                        let _ = to.write(&buf[..n]);
                    } else if queue.len() < MAX_QUEUED {
                        queue.push_back((
                            Instant::now() + Duration::from_micros(d),
                            buf[..n].to_vec(),
                        ));
                    }
                }
                _ => break,
            }
        }
    }
}

fn readable(f: &File, wait: Duration) -> bool {
    let mut p = libc::pollfd {
        fd: f.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ts = libc::timespec {
        tv_sec: wait.as_secs() as libc::time_t,
        tv_nsec: wait.subsec_nanos() as libc::c_long,
    };
    // SAFETY: one valid pollfd, a valid timespec, no signal mask.
    let n = unsafe { libc::ppoll(&mut p, 1, &ts, std::ptr::null()) };
    n > 0 && p.revents & libc::POLLIN != 0
}
