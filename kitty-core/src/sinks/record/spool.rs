//! A recording written on the sampling thread (`record`), as the tick's
//! last stage ([`crate::engine::Pipeline::finish_with`]): each frame is
//! encoded while it is still in that CPU's caches and written there, with
//! no other thread woken (on the 8-rank ring, handing the frame or its
//! record to a thread of its own cost ~5 % more of `record`'s CPU). A
//! write slower than [`SLOW_WRITE`] (a busy disk) moves the writing to a
//! thread of its own ([`Spool`]) for the rest of the recording. That first
//! slow write holds the sampler for its own length: a tick is skipped only
//! if it lasts past the next one (the kernel's throttling of dirty pages
//! pauses a writer for at most 200 ms). After it the disk delays no tick
//! until [`ROOM`] records wait (then the sampler waits too, and the ticks
//! it missed are a sampling gap: no frame is dropped). A stream (a pipe,
//! whose reader may stall for long) is spooled from the start
//! ([`TickWriter::spool`]).

use super::encoder::RecordEncoder;
use super::writer::RecordFile;
use super::RecordError;
use crate::model::Frame;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A write that took longer moves the file to a thread of its own.
pub const SLOW_WRITE: Duration = Duration::from_millis(50);

/// Records that may wait for the disk: two minutes at 500 ms.
pub const ROOM: usize = 256;

/// How a recording ended: its file (every record written), or the first
/// error (nothing was written after it).
type Ended = Result<RecordFile, RecordError>;

/// Writes each frame it is given, on the caller's thread while writes are
/// quick. Dropping it (when sampling ends) waits for the records a spool
/// holds and leaves the outcome in its [`Outcome`].
pub struct TickWriter {
    /// How errors name the recording.
    name: String,
    encoder: RecordEncoder,
    out: Out,
    slow: Duration,
    outcome: Outcome,
}

enum Out {
    Here(RecordFile),
    Spooled(Spool),
    Ended,
}

/// Where a [`TickWriter`] leaves how the recording ended.
#[derive(Clone, Default)]
pub struct Outcome(Arc<Mutex<Option<Ended>>>);

impl Outcome {
    fn set(&self, ended: Ended) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(ended);
    }

    /// The file with every record written, or the first error; once the
    /// writer is dropped.
    pub fn take(&self) -> Ended {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .unwrap_or_else(|| {
                Err(RecordError::Io(
                    "the recording".into(),
                    std::io::Error::other("its writer ended without an outcome"),
                ))
            })
    }
}

impl TickWriter {
    /// A writer of `file` (its header written) that moves to a thread of
    /// its own after a write slower than `slow` ([`SLOW_WRITE`]).
    pub fn new(file: RecordFile, encoder: RecordEncoder, slow: Duration) -> (TickWriter, Outcome) {
        let outcome = Outcome::default();
        let w = TickWriter {
            name: file.name().to_string(),
            encoder,
            out: Out::Here(file),
            slow,
            outcome: outcome.clone(),
        };
        (w, outcome)
    }

    /// Whether it writes on a thread of its own now.
    pub fn spooled(&self) -> bool {
        matches!(self.out, Out::Spooled(_))
    }

    /// Encodes and writes (or hands over) one frame; false once the
    /// recording has failed (stop sampling).
    pub fn take(&mut self, frame: &mut Frame) -> bool {
        let rec = match self.encoder.encode(frame) {
            Ok(rec) => rec,
            Err(e) => {
                self.end(Some(RecordError::Io(self.name.clone(), e)));
                return false;
            }
        };
        match &mut self.out {
            Out::Here(file) => {
                let started = Instant::now();
                if let Err(e) = file.write_record(&rec) {
                    self.end(Some(e));
                    return false;
                }
                if started.elapsed() > self.slow {
                    self.spool();
                }
                true
            }
            Out::Spooled(s) => s.send(rec),
            Out::Ended => false,
        }
    }

    /// Moves the writing to a thread of its own now, for the rest of the
    /// recording (kept here if no thread starts). For a stream: a pipe's
    /// reader may stall for as long as it likes, and the first slow write
    /// would hold the sampler that long.
    pub fn spool(&mut self) {
        let Out::Here(file) = std::mem::replace(&mut self.out, Out::Ended) else {
            return;
        };
        self.out = match Spool::start(file) {
            Ok(s) => Out::Spooled(s),
            Err(file) => Out::Here(file),
        };
    }

    /// Ends the recording: what a spool holds is written, and the outcome
    /// is the file or the first error (`error`, else the spool's).
    fn end(&mut self, error: Option<RecordError>) {
        let ended = match std::mem::replace(&mut self.out, Out::Ended) {
            Out::Ended => return,
            Out::Here(file) => Ok(file),
            Out::Spooled(s) => s.finish(),
        };
        self.outcome.set(match error {
            Some(e) => Err(e),
            None => ended,
        });
    }
}

impl Drop for TickWriter {
    fn drop(&mut self) {
        self.end(None);
    }
}

/// A recording's file written on a thread of its own.
struct Spool {
    feed: SyncSender<Vec<u8>>,
    thread: JoinHandle<Ended>,
}

impl Spool {
    /// Starts the writing thread; the file back if it cannot.
    fn start(file: RecordFile) -> Result<Spool, RecordFile> {
        let (tx, rx) = sync_channel(ROOM);
        // The file goes over once the thread runs, so that it stays here
        // if the thread cannot start.
        let (give, given) = sync_channel::<RecordFile>(1);
        let spawned = std::thread::Builder::new()
            .name("kitty-writer".into())
            .spawn(move || match given.recv() {
                Ok(file) => write_all(file, rx),
                Err(_) => Err(RecordError::Io(
                    "the recording".into(),
                    std::io::Error::other("its file was never handed over"),
                )),
            });
        let Ok(thread) = spawned else {
            return Err(file);
        };
        give.send(file).map_err(|back| back.0)?;
        Ok(Spool { feed: tx, thread })
    }

    /// Hands a record over (waits while [`ROOM`] wait); false once the
    /// file has failed.
    fn send(&self, rec: Vec<u8>) -> bool {
        self.feed.send(rec).is_ok()
    }

    /// Waits until every record handed over is written.
    fn finish(self) -> Ended {
        drop(self.feed);
        self.thread.join().unwrap_or_else(|_| {
            Err(RecordError::Io(
                "the recording".into(),
                std::io::Error::other("its writing thread panicked"),
            ))
        })
    }
}

fn write_all(mut file: RecordFile, rx: Receiver<Vec<u8>>) -> Ended {
    for rec in rx {
        file.write_record(&rec)?;
    }
    Ok(file)
}
