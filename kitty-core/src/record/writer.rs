//! Appends frames to a recording; each frame is flushed as it is written so
//! a crash loses at most the frame being written.

use super::*;
use crate::frame::Frame;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

pub struct Writer {
    out: BufWriter<File>,
    path: String,
    frames: u64,
    bytes: u64,
}

impl Writer {
    pub fn create(path: &Path, header: &Header) -> Result<Self, RecordError> {
        let p = path.display().to_string();
        let file = File::create(path).map_err(|e| RecordError::Io(p.clone(), e))?;
        let mut w = Writer {
            out: BufWriter::new(file),
            path: p,
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

    pub fn append(&mut self, frame: &Frame) -> Result<(), RecordError> {
        let json = serde_json::to_vec(frame).expect("frames serialize");
        let payload =
            zstd::bulk::compress(&json, 3).map_err(|e| RecordError::Io(self.path.clone(), e))?;
        let mut rec = Vec::with_capacity(RECORD_HEAD + payload.len());
        rec.extend_from_slice(FRAME_MAGIC);
        rec.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        let times = [frame.mono_ns.to_le_bytes(), frame.wall_ns.to_le_bytes()].concat();
        rec.extend_from_slice(&times);
        let mut h = crc32fast::Hasher::new();
        h.update(&times);
        h.update(&payload);
        rec.extend_from_slice(&h.finalize().to_le_bytes());
        rec.extend_from_slice(&payload);
        self.write(&rec)?;
        self.frames += 1;
        Ok(())
    }

    pub fn frames(&self) -> u64 {
        self.frames
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Flushes and syncs the file to disk.
    pub fn finish(mut self) -> Result<(), RecordError> {
        self.out
            .flush()
            .map_err(|e| RecordError::Io(self.path.clone(), e))?;
        self.out
            .get_ref()
            .sync_all()
            .map_err(|e| RecordError::Io(self.path.clone(), e))
    }
}
