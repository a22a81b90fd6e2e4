//! Appends frames to a recording; each frame is flushed as it is written so
//! a crash loses at most the frame being written.

use super::stream::GroupCompressor;
use super::*;
use crate::model::Frame;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

/// Where a recording goes: a file (synced when finished) or a stream.
pub enum Sink {
    File(File),
    Stream(Box<dyn Write + Send>),
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Sink::File(f) => f.write(buf),
            Sink::Stream(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Sink::File(f) => f.flush(),
            Sink::Stream(s) => s.flush(),
        }
    }
}

pub struct Writer {
    out: BufWriter<Sink>,
    path: String,
    frames: u64,
    bytes: u64,
    /// Keeps the last frame written, to encode the next one against.
    columns: columns::Encoder,
    /// What the last record's rates are recomputed from on replay, while
    /// the next record may be a delta against it.
    last: Option<predict::Basis>,
    /// The keyframe group's zstd stream, set up once (a keyframe starts
    /// it again); None after it failed, until the next record.
    stream: Option<GroupCompressor>,
    /// Whether the ranks' latency histograms are written (the header's
    /// [`Header::histograms`]), and where they wait while a frame is
    /// written without them.
    histograms: bool,
    set_aside: Vec<crate::model::Histograms>,
}

impl Writer {
    /// Creates (or replaces) a recording file, private to its owner (0600),
    /// never through a symlink.
    pub fn create(path: &Path, header: &Header) -> Result<Self, RecordError> {
        let p = path.display().to_string();
        let file = crate::sinks::files::create_in_place(path)
            .map_err(|e| RecordError::Io(p.clone(), std::io::Error::other(e)))?;
        Self::new(Sink::File(file), p, header)
    }

    /// Starts a recording on an open sink; `name` is how errors name it.
    pub fn new(sink: Sink, name: impl Into<String>, header: &Header) -> Result<Self, RecordError> {
        let mut w = Writer {
            out: BufWriter::new(sink),
            path: name.into(),
            frames: 0,
            bytes: 0,
            columns: columns::Encoder::default(),
            last: None,
            stream: None,
            histograms: header.keeps_histograms(),
            set_aside: Vec::new(),
        };
        let json = serde_json::to_vec(header).expect("header serializes");
        let mut head = Vec::with_capacity(json.len() + 20);
        head.extend_from_slice(MAGIC);
        head.extend_from_slice(&MAJOR.to_le_bytes());
        head.extend_from_slice(&MINOR.to_le_bytes());
        head.extend_from_slice(&(json.len() as u32).to_le_bytes());
        head.extend_from_slice(&json);
        head.extend_from_slice(&crc32fast::hash(&json).to_le_bytes());
        w.write(&head)?;
        Ok(w)
    }

    fn write(&mut self, b: &[u8]) -> Result<(), RecordError> {
        self.out
            .write_all(b)
            .and_then(|_| self.out.flush())
            .map_err(|e| RecordError::Io(self.path.clone(), e))?;
        self.bytes += b.len() as u64;
        Ok(())
    }

    /// Writes a frame (a keyframe or a delta against the one before) and
    /// flushes it.
    pub fn append(&mut self, frame: &Frame) -> Result<(), RecordError> {
        self.append_in_place(&mut frame.clone())
    }

    /// [`Writer::append`] without a copy of the frame: the values a delta
    /// leaves out are marked in `frame` while it is encoded, then put back
    /// (it is as it was when this returns), and so are its histograms
    /// when the header says they are left out.
    pub fn append_in_place(&mut self, frame: &mut Frame) -> Result<(), RecordError> {
        if self.histograms {
            return self.append_as_is(frame);
        }
        self.set_aside.clear();
        for r in &mut frame.ranks {
            self.set_aside.push(std::mem::take(&mut r.histograms));
        }
        let done = self.append_as_is(frame);
        for (r, h) in frame.ranks.iter_mut().zip(self.set_aside.drain(..)) {
            r.histograms = h;
        }
        done
    }

    fn append_as_is(&mut self, frame: &mut Frame) -> Result<(), RecordError> {
        // A delta leaves out the rates the reader recomputes; a frame that
        // cannot be written so (one holding the mark itself) is a keyframe.
        let delta = match &self.last {
            Some(basis) if !self.frames.is_multiple_of(KEY_EVERY) => predict::mark(basis, frame)
                .and_then(|marks| {
                    let body = self.columns.delta_of(&*frame);
                    marks.restore(frame);
                    body
                }),
            _ => None,
        };
        let frame = &*frame;
        let key = delta.is_none();
        let plain = match delta {
            Some(body) => body,
            None => {
                let json = digits::to_vec(frame).expect("frames serialize");
                self.columns.key_of(frame, &json);
                json
            }
        };
        let payload = self
            .compress(key, &plain)
            .map_err(|e| RecordError::Io(self.path.clone(), e))?;
        let mut rec = Vec::with_capacity(RECORD_HEAD + payload.len());
        rec.extend_from_slice(if key { FRAME_MAGIC } else { PREDICTED_MAGIC });
        rec.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        let times = [frame.mono_ns.to_le_bytes(), frame.wall_ns.to_le_bytes()].concat();
        rec.extend_from_slice(&times);
        let mut h = crc32fast::Hasher::new();
        h.update(&times);
        h.update(&payload);
        rec.extend_from_slice(&h.finalize().to_le_bytes());
        rec.extend_from_slice(&payload);
        if let Err(e) = self.write(&rec) {
            // What follows must not be encoded against a frame the file
            // may not hold: the next frame is a keyframe.
            self.last = None;
            return Err(e);
        }
        self.frames += 1;
        self.last = Some(predict::Basis::of(frame));
        Ok(())
    }

    /// A record's payload: a keyframe starts the group's stream again, a
    /// delta continues it. A stream that failed is dropped, and the next
    /// record is a keyframe (which makes a new one).
    fn compress(&mut self, key: bool, plain: &[u8]) -> std::io::Result<Vec<u8>> {
        let stream = match &mut self.stream {
            Some(s) => s,
            None if key => self.stream.insert(GroupCompressor::new()?),
            None => return Err(std::io::Error::other("zstd: the group's stream was lost")),
        };
        let done = match key {
            true => stream.start().and_then(|_| stream.next(plain)),
            false => stream.next(plain),
        };
        if done.is_err() {
            self.stream = None;
            self.last = None;
        }
        done
    }

    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Deltas whose values were written from the frame's types (its shape
    /// was the one before's), of [`Writer::frames`].
    pub fn typed_deltas(&self) -> u64 {
        self.columns.typed_deltas()
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Flushes, and syncs a file to disk.
    pub fn finish(mut self) -> Result<(), RecordError> {
        self.out
            .flush()
            .map_err(|e| RecordError::Io(self.path.clone(), e))?;
        match self.out.get_ref() {
            Sink::File(f) => f
                .sync_all()
                .map_err(|e| RecordError::Io(self.path.clone(), e)),
            Sink::Stream(_) => Ok(()),
        }
    }
}
