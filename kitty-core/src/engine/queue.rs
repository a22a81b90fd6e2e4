//! The queue between the sampling thread and one consumer, with the
//! consumer's delivery policy:
//!
//! - `Lossless` (recorders, exporters): a frame is never dropped. When the
//!   consumer falls behind, the queue fills and the sampler waits for room;
//!   the time it waited shows up as skipped ticks (a `sampling_gap` event),
//!   never as a lost frame.
//! - `Latest` (views): the queue keeps the newest few frames; when full the
//!   oldest is dropped so the view stays current. Every drop is counted and
//!   carried on the next delivered frame (`Frame::dropped_frames`).

use crate::model::Frame;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// What a consumer needs from the engine when it is slower than the interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// Every frame, in order; the sampler waits rather than drop one.
    Lossless,
    /// The newest frames; older undelivered ones are dropped and counted.
    Latest,
}

impl Delivery {
    fn capacity(self) -> usize {
        match self {
            // Two minutes at 500 ms: room for a slow disk's hiccups.
            Delivery::Lossless => 256,
            Delivery::Latest => 4,
        }
    }
}

#[derive(Default)]
struct State {
    items: VecDeque<Frame>,
    /// The producer is done (stopped, or its thread ended).
    closed: bool,
    /// The consumer went away.
    abandoned: bool,
    /// Frames dropped since the last one delivered.
    dropped: u64,
    /// The consumer was woken to look at its stop flag.
    interrupted: bool,
}

pub(super) struct Queue {
    policy: Delivery,
    state: Mutex<State>,
    ready: Condvar,
    room: Condvar,
}

/// What the consumer got.
pub enum Recv {
    Frame(Box<Frame>),
    /// Nothing within the wait.
    Timeout,
    /// The producer has stopped and everything was delivered.
    Closed,
}

impl Queue {
    pub fn new(policy: Delivery) -> Self {
        Queue {
            policy,
            state: Mutex::new(State::default()),
            ready: Condvar::new(),
            room: Condvar::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Hands a frame over; false when the consumer is gone or `stop` was set
    /// while waiting for room.
    pub fn push(&self, frame: Frame, stop: &AtomicBool) -> bool {
        let cap = self.policy.capacity();
        let mut s = self.lock();
        loop {
            if s.abandoned || stop.load(Ordering::SeqCst) {
                return false;
            }
            if s.items.len() < cap {
                break;
            }
            match self.policy {
                Delivery::Latest => {
                    s.items.pop_front();
                    s.dropped += 1;
                }
                Delivery::Lossless => {
                    s = self
                        .room
                        .wait_timeout(s, Duration::from_millis(50))
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
            }
        }
        s.items.push_back(frame);
        self.ready.notify_one();
        true
    }

    pub fn close(&self) {
        self.lock().closed = true;
        self.ready.notify_all();
    }

    /// Wakes the consumer's wait (now, or its next if it is not waiting):
    /// that wait returns `Timeout`.
    pub fn interrupt(&self) {
        self.lock().interrupted = true;
        self.ready.notify_all();
    }

    pub fn abandon(&self) {
        self.lock().abandoned = true;
        self.room.notify_all();
    }

    pub fn recv_timeout(&self, wait: Duration) -> Recv {
        let mut s = self.lock();
        if std::mem::take(&mut s.interrupted) && s.items.is_empty() {
            return Recv::Timeout;
        }
        if s.items.is_empty() && !s.closed {
            s = self
                .ready
                .wait_timeout(s, wait)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        match s.items.pop_front() {
            Some(mut f) => {
                f.dropped_frames = std::mem::take(&mut s.dropped);
                self.room.notify_one();
                Recv::Frame(Box::new(f))
            }
            None if s.closed => Recv::Closed,
            None => Recv::Timeout,
        }
    }
}
