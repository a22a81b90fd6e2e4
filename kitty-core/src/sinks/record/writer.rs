//! Appends frames to a recording; each frame is flushed as it is written so
//! a crash loses at most the frame being written.

use super::encoder::RecordEncoder;
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

/// The file half of a [`Writer`]: the header, then records as they come,
/// each flushed as it is written.
pub struct RecordFile {
    out: BufWriter<Sink>,
    path: String,
    frames: u64,
    bytes: u64,
}

impl RecordFile {
    /// Starts a recording on an open sink (writes its header); `name` is
    /// how errors name it.
    pub fn new(sink: Sink, name: impl Into<String>, header: &Header) -> Result<Self, RecordError> {
        let mut f = RecordFile {
            out: BufWriter::new(sink),
            path: name.into(),
            frames: 0,
            bytes: 0,
        };
        let json = serde_json::to_vec(header).expect("header serializes");
        let mut head = Vec::with_capacity(json.len() + 20);
        head.extend_from_slice(MAGIC);
        head.extend_from_slice(&MAJOR.to_le_bytes());
        head.extend_from_slice(&MINOR.to_le_bytes());
        head.extend_from_slice(&(json.len() as u32).to_le_bytes());
        head.extend_from_slice(&json);
        head.extend_from_slice(&crc32fast::hash(&json).to_le_bytes());
        f.write(&head)?;
        Ok(f)
    }

    fn write(&mut self, b: &[u8]) -> Result<(), RecordError> {
        self.out
            .write_all(b)
            .and_then(|_| self.out.flush())
            .map_err(|e| self.error(e))?;
        self.bytes += b.len() as u64;
        Ok(())
    }

    /// Writes and flushes one record ([`RecordEncoder::encode`]'s).
    pub fn write_record(&mut self, rec: &[u8]) -> Result<(), RecordError> {
        self.write(rec)?;
        self.frames += 1;
        Ok(())
    }

    /// How errors name the recording.
    pub fn name(&self) -> &str {
        &self.path
    }

    /// An error of this recording, by its name.
    pub fn error(&self, e: std::io::Error) -> RecordError {
        RecordError::Io(self.path.clone(), e)
    }

    pub fn frames(&self) -> u64 {
        self.frames
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Flushes, and syncs a file to disk.
    pub fn finish(mut self) -> Result<(), RecordError> {
        self.out.flush().map_err(|e| self.error(e))?;
        match self.out.get_ref() {
            Sink::File(f) => f.sync_all().map_err(|e| self.error(e)),
            Sink::Stream(_) => Ok(()),
        }
    }
}

/// A recording written frame by frame on the caller's thread.
pub struct Writer {
    file: RecordFile,
    encoder: RecordEncoder,
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
        Ok(Writer {
            file: RecordFile::new(sink, name, header)?,
            encoder: RecordEncoder::new(header),
        })
    }

    /// Writes a frame (a keyframe or a delta against the one before) and
    /// flushes it.
    pub fn append(&mut self, frame: &Frame) -> Result<(), RecordError> {
        self.append_in_place(&mut frame.clone())
    }

    /// [`Writer::append`] without a copy of the frame (see
    /// [`RecordEncoder::encode`]: it is as it was when this returns).
    pub fn append_in_place(&mut self, frame: &mut Frame) -> Result<(), RecordError> {
        let rec = self.encoder.encode(frame).map_err(|e| self.file.error(e))?;
        self.file
            .write_record(&rec)
            .inspect_err(|_| self.encoder.lost())
    }

    pub fn frames(&self) -> u64 {
        self.file.frames()
    }

    /// Deltas whose values were written from the frame's types (its shape
    /// was the one before's), of [`Writer::frames`].
    pub fn typed_deltas(&self) -> u64 {
        self.encoder.typed_deltas()
    }

    pub fn bytes(&self) -> u64 {
        self.file.bytes()
    }

    /// Flushes, and syncs a file to disk.
    pub fn finish(self) -> Result<(), RecordError> {
        self.file.finish()
    }
}
