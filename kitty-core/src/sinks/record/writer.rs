//! Appends frames to a recording; each frame is flushed as it is written so
//! a crash loses at most the frame being written.

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
    /// The last record written, while the next may be a delta against it.
    last: Option<Last>,
    /// What compresses deltas, set up once: its match tables are kept
    /// from one delta to the next instead of allocated for each.
    deltas: Option<DeltaCompressor>,
    /// Whether the ranks' latency histograms are written (the header's
    /// [`Header::histograms`]), and where they wait while a frame is
    /// written without them.
    histograms: bool,
    set_aside: Vec<crate::model::Histograms>,
}

/// What the next delta is written against.
struct Last {
    /// The record's payload before compression: the delta's dictionary.
    plain: Vec<u8>,
    /// What the delta's rates are recomputed from on replay.
    basis: predict::Basis,
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
            deltas: None,
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
        let io = |e| RecordError::Io(self.path.clone(), e);
        // A delta leaves out the rates the reader recomputes; a frame that
        // cannot be written so (one holding the mark itself) is a keyframe.
        let delta = match &self.last {
            Some(last) if !self.frames.is_multiple_of(KEY_EVERY) => {
                predict::mark(&last.basis, frame).and_then(|marks| {
                    let body = self.columns.delta_of(&*frame);
                    marks.restore(frame);
                    body.map(|body| (body, &last.plain))
                })
            }
            _ => None,
        };
        let frame = &*frame;
        let key = delta.is_none();
        let (plain, payload) = match delta {
            Some((body, dict)) => {
                let p = DeltaCompressor::compress(&mut self.deltas, dict, &body).map_err(io)?;
                (body, p)
            }
            None => {
                let json = digits::to_vec(frame).expect("frames serialize");
                self.columns.key(&json);
                let p = zstd::bulk::compress(&json, LEVEL).map_err(io)?;
                (json, p)
            }
        };
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
        self.last = Some(Last {
            plain,
            basis: predict::Basis::of(frame),
        });
        Ok(())
    }

    pub fn frames(&self) -> u64 {
        self.frames
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

/// Compresses a delta's body with the record before it as its history.
struct DeltaCompressor(zstd::zstd_safe::CCtx<'static>);

fn zstd_error(code: usize) -> std::io::Error {
    std::io::Error::other(zstd::zstd_safe::get_error_name(code))
}

impl DeltaCompressor {
    fn new() -> std::io::Result<Self> {
        use zstd::zstd_safe::{CCtx, CParameter};
        let mut c = CCtx::try_create().ok_or_else(|| std::io::Error::other("zstd: no memory"))?;
        for p in [
            CParameter::CompressionLevel(DELTA_LEVEL),
            // A delta decoded against the wrong frame must fail, not give
            // another frame: zstd's own content checksum says so.
            CParameter::ChecksumFlag(true),
            // Match tables for what a body and its history span (tens of
            // KB), not level 3's own: those are set up (zeroed) for every
            // body.
            CParameter::HashLog(14),
            CParameter::ChainLog(14),
            // Format 6's bodies are ~5 KB, for which level 6 alone picks
            // lazy2 over a hash chain: lazy with matches of 5 bytes or more
            // was as small (208 KB/min against 209 on a minute of the
            // 8-rank ring) for ~6 % less of an append.
            CParameter::Strategy(zstd::zstd_safe::Strategy::ZSTD_lazy),
            CParameter::MinMatch(5),
        ] {
            c.set_parameter(p).map_err(zstd_error)?;
        }
        Ok(DeltaCompressor(c))
    }

    /// `body` compressed with `dict` as its history (a zstd prefix: nothing
    /// is built from it beforehand, unlike a dictionary, which cost twice
    /// the time here for the same size), by the compressor in `slot` (made
    /// there if there is none; dropped if it fails). The same bytes as a
    /// fresh context with these parameters gives; keeping the context
    /// (its tables allocated once) was ~7 % of an append.
    fn compress(slot: &mut Option<Self>, dict: &[u8], body: &[u8]) -> std::io::Result<Vec<u8>> {
        let c = match slot {
            Some(c) => c,
            None => slot.insert(Self::new()?),
        };
        // SAFETY: a context holds on to a prefix for the one frame
        // compressed next only (zstd lets go of it when that frame ends),
        // and that frame is compressed and ended below, while `dict` is
        // borrowed. If either step fails, the context (which may still
        // name the prefix) is dropped here, before `dict` can go. 'static
        // is only what the binding asks of a context kept between calls.
        let prefix = unsafe { std::mem::transmute::<&[u8], &'static [u8]>(dict) };
        let done = c.0.ref_prefix(prefix).and_then(|_| {
            let mut out = Vec::with_capacity(zstd::zstd_safe::compress_bound(body.len()));
            c.0.compress2(&mut out, body).map(|_| out)
        });
        if done.is_err() {
            *slot = None;
        }
        done.map_err(zstd_error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A body of `n` numbers from `seed`, a little like a delta's text.
    fn body(seed: u64, n: usize) -> Vec<u8> {
        let mut x = seed;
        let mut out = Vec::new();
        for _ in 0..n {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            out.extend_from_slice(format!("[{}],", (x >> 40) % 5000).as_bytes());
        }
        out
    }

    #[test]
    fn a_kept_compressor_gives_what_a_fresh_one_gives_and_each_delta_reads_back() {
        let mut kept = None;
        let mut dict = body(1, 800);
        for seed in 2..8 {
            let b = body(seed, 200 + 100 * seed as usize);
            let with_kept = DeltaCompressor::compress(&mut kept, &dict, &b).unwrap();
            let with_fresh = DeltaCompressor::compress(&mut None, &dict, &b).unwrap();
            assert_eq!(with_kept, with_fresh, "delta {seed}");
            let mut back = Vec::with_capacity(b.len());
            {
                let mut d = zstd::zstd_safe::DCtx::create();
                d.ref_prefix(&dict).unwrap();
                d.decompress(&mut back, &with_kept).unwrap();
            }
            assert_eq!(back, b, "delta {seed} reads back against its own history");
            // The next body's history is a buffer the last one never saw.
            dict = b;
        }
        assert!(kept.is_some(), "the compressor is kept between deltas");
    }
}
