//! Reads recordings: builds an index from record heads alone (seekable
//! without decompressing), tolerates truncation and garbage, and verifies
//! each frame's checksum when it is read; a format 3 to 6 frame is decoded
//! from the one before it, back to its keyframe (the values formats 4 and
//! 5 leave out then recomputed; the last frame decoded is kept, so a
//! replay decodes each record once); a format 2 delta against its keyframe.

use super::stream::GroupDecompressor;
use super::*;
use crate::model::Frame;
use serde::Deserialize;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

#[derive(Debug, Clone, Copy)]
pub struct IndexEntry {
    pub offset: u64,
    pub len: u32,
    pub mono_ns: u64,
    pub wall_ns: u64,
    pub crc: u32,
    /// For a delta frame, the index of the last keyframe before it; None
    /// for a keyframe, and for a delta with no keyframe before it (or, in
    /// formats 3 to 6, with damage between it and its keyframe).
    pub base: Option<usize>,
    pub key: bool,
    /// A format 3 to 6 delta: decoded against the frame just before it.
    pub chained: bool,
    /// A format 4 to 6 delta: its left-out values recomputed once decoded.
    pub predicted: bool,
}

/// Either record magic, or the start of one.
fn is_magic(m: &[u8]) -> bool {
    MAGICS.iter().any(|magic| m == &magic[..])
}

pub struct Reader {
    file: File,
    path: String,
    header: Header,
    /// The file's format major version.
    major: u16,
    /// How its deltas' left-out values are recomputed (by its version).
    recomputed: predict::Recomputed,
    index: Vec<IndexEntry>,
    warnings: Vec<String>,
    /// The last keyframe decoded (its index and a decompressor with its
    /// JSON as the dictionary): a replay reads its deltas in turn.
    key_cache: Option<(usize, zstd::bulk::Decompressor<'static>)>,
    /// The last frame decoded on a format 3 to 6 chain.
    chain: Option<Decoded>,
}

/// A frame of a format 3 to 6 chain, as the next one is decoded against it.
struct Decoded {
    index: usize,
    /// The frame (a format 4 to 6 delta's left-out values put back).
    frame: Frame,
    shape: std::sync::Arc<columns::Shape>,
    /// Its values by column: what the next frame's are paired with.
    cols: columns::Columns,
    /// What the next record is decompressed with.
    history: History,
}

/// What the next record of a chain is decompressed with.
enum History {
    /// Formats 3 to 6: this record's payload, uncompressed (the next one's
    /// dictionary).
    Prefix(Vec<u8>),
    /// Format 7: the group's zstd stream, as it was after this record.
    Stream(GroupDecompressor),
    /// Taken by a record that failed: the chain starts again at its
    /// keyframe.
    Lost,
}

impl History {
    /// The history after a record: its stream (format 7), or its payload.
    fn after(stream: Option<GroupDecompressor>, plain: Vec<u8>) -> History {
        match stream {
            Some(d) => History::Stream(d),
            None => History::Prefix(plain),
        }
    }
}

impl Reader {
    pub fn open(path: &Path) -> Result<Self, RecordError> {
        let p = path.display().to_string();
        let io = |e| RecordError::Io(p.clone(), e);
        let mut file = File::open(path).map_err(io)?;
        let file_len = file.metadata().map_err(io)?.len();
        let mut fixed = [0u8; 16];
        if file.read_exact(&mut fixed).is_err() || &fixed[..8] != MAGIC {
            return Err(RecordError::NotARecording(p));
        }
        let major = u16::from_le_bytes([fixed[8], fixed[9]]);
        let minor = u16::from_le_bytes([fixed[10], fixed[11]]);
        if major > MAJOR {
            return Err(RecordError::NewerVersion {
                path: p,
                major,
                minor,
            });
        }
        let hlen = u32::from_le_bytes(fixed[12..16].try_into().unwrap()) as u64;
        if hlen > 1 << 20 || 16 + hlen + 4 > file_len {
            return Err(RecordError::BadHeader(p));
        }
        let mut json = vec![0u8; hlen as usize];
        let mut crc = [0u8; 4];
        file.read_exact(&mut json).map_err(io)?;
        file.read_exact(&mut crc).map_err(io)?;
        if crc32fast::hash(&json) != u32::from_le_bytes(crc) {
            return Err(RecordError::BadHeader(p));
        }
        let header: Header =
            serde_json::from_slice(&json).map_err(|_| RecordError::BadHeader(p.clone()))?;
        let mut r = Reader {
            file,
            path: p,
            header,
            major,
            recomputed: predict::Recomputed::of_format(major, minor),
            index: Vec::new(),
            warnings: Vec::new(),
            key_cache: None,
            chain: None,
        };
        r.build_index(16 + hlen + 4, file_len)?;
        Ok(r)
    }

    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.file.seek(SeekFrom::Start(offset))?;
        self.file.read_exact(buf)
    }

    fn build_index(&mut self, mut off: u64, file_len: u64) -> Result<(), RecordError> {
        let mut head = [0u8; RECORD_HEAD];
        // The keyframe the next delta frames are compressed against.
        let mut last_key: Option<usize> = None;
        // The keyframe the next format 3 to 6 frame's chain starts from: none
        // once damage was skipped since (a frame of the chain is gone).
        let mut chain_key: Option<usize> = None;
        while off < file_len {
            if file_len - off < RECORD_HEAD as u64 {
                self.warnings.push(format!(
                    "{}: file ends inside a frame at byte {off} ({} bytes lost, likely cut by a crash)",
                    self.path,
                    file_len - off
                ));
                break;
            }
            self.read_at(off, &mut head)
                .map_err(|e| RecordError::Io(self.path.clone(), e))?;
            let len = u32::from_le_bytes(head[4..8].try_into().unwrap());
            let end = off + RECORD_HEAD as u64 + len as u64;
            let sane = is_magic(&head[..4]) && len <= MAX_FRAME;
            let key = &head[..4] == FRAME_MAGIC;
            let predicted = &head[..4] == PREDICTED_MAGIC;
            let chained = predicted || &head[..4] == COLUMNS_MAGIC;
            if sane && end > file_len && self.find_magic(off + 1, file_len).is_none() {
                self.warnings.push(format!(
                    "{}: last frame at byte {off} is incomplete ({} of {} bytes; likely cut by a crash)",
                    self.path,
                    file_len - off - RECORD_HEAD as u64,
                    len
                ));
                break;
            }
            // The next record must start right after this one; if not, this
            // head is damaged and we resynchronise on the next magic.
            let entry = IndexEntry {
                offset: off,
                len,
                mono_ns: u64::from_le_bytes(head[8..16].try_into().unwrap()),
                wall_ns: u64::from_le_bytes(head[16..24].try_into().unwrap()),
                crc: u32::from_le_bytes(head[24..28].try_into().unwrap()),
                base: match (key, chained) {
                    (true, _) => None,
                    (false, true) => chain_key,
                    (false, false) => last_key,
                },
                key,
                chained,
                predicted,
            };
            // When the next head is damaged, this record is still good if its
            // checksum holds (only then are its payload bytes read here).
            let next_ok = sane
                && end <= file_len
                && (self.magic_prefix_at(end, file_len) || self.verify(&entry).is_ok());
            if !next_ok {
                match self.find_magic(off + 1, file_len) {
                    Some(next) => {
                        self.warnings.push(format!(
                            "{}: damaged frame at byte {off}; skipped {} bytes",
                            self.path,
                            next - off
                        ));
                        // What was skipped may have been a keyframe: the
                        // deltas after it then name an older keyframe, and
                        // zstd's content checksum fails them when read.
                        chain_key = None;
                        off = next;
                        continue;
                    }
                    None => {
                        self.warnings.push(format!(
                            "{}: damaged data from byte {off} to the end; skipped",
                            self.path
                        ));
                        break;
                    }
                }
            }
            if key {
                last_key = Some(self.index.len());
                chain_key = last_key;
            }
            self.index.push(entry);
            off = end;
        }
        Ok(())
    }

    /// True when the bytes at `off` begin a record head, or are the start of
    /// one cut short by the end of the file, or there are none.
    fn magic_prefix_at(&mut self, off: u64, file_len: u64) -> bool {
        let n = (file_len - off).min(4) as usize;
        let mut m = [0u8; 4];
        self.read_at(off, &mut m[..n]).is_ok() && MAGICS.iter().any(|magic| m[..n] == magic[..n])
    }

    fn find_magic(&mut self, from: u64, file_len: u64) -> Option<u64> {
        let mut buf = vec![0u8; 64 * 1024];
        let mut off = from;
        while off < file_len {
            let n = ((file_len - off) as usize).min(buf.len());
            self.read_at(off, &mut buf[..n]).ok()?;
            if let Some(p) = buf[..n].windows(4).position(is_magic) {
                return Some(off + p as u64);
            }
            if n < 4 {
                return None;
            }
            off += (n - 3) as u64;
        }
        None
    }

    pub fn header(&self) -> &Header {
        &self.header
    }

    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    pub fn index(&self) -> &[IndexEntry] {
        &self.index
    }

    /// Notes about data that could not be read (truncation, damage).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Reads a record's payload and checks its CRC.
    fn verify(&mut self, e: &IndexEntry) -> Result<Vec<u8>, String> {
        let mut payload = vec![0u8; e.len as usize];
        self.read_at(e.offset + RECORD_HEAD as u64, &mut payload)
            .map_err(|err| err.to_string())?;
        let mut h = crc32fast::Hasher::new();
        h.update(&e.mono_ns.to_le_bytes());
        h.update(&e.wall_ns.to_le_bytes());
        h.update(&payload);
        if h.finalize() != e.crc {
            return Err("checksum mismatch (the file is damaged)".into());
        }
        Ok(payload)
    }

    /// Reads and verifies frame `i`.
    pub fn frame(&mut self, i: usize) -> Result<Frame, RecordError> {
        let e = self.index[i];
        let corrupt = |why: String| RecordError::Corrupt {
            index: i,
            offset: e.offset,
            why,
        };
        if e.chained || (e.key && self.major >= 3) {
            self.decode_chain(i).map_err(corrupt)?;
            return Ok(self.chain.as_ref().expect("just decoded").frame.clone());
        }
        let payload = self.verify(&e).map_err(corrupt)?;
        let json = if e.key {
            zstd::bulk::decompress(&payload, MAX_FRAME as usize)
                .map_err(|err| corrupt(format!("decompress: {err}")))?
        } else {
            let base = e
                .base
                .ok_or_else(|| corrupt("its keyframe is damaged or missing".into()))?;
            if self.key_cache.as_ref().map(|c| c.0) != Some(base) {
                let key = self.index[base];
                let kp = self
                    .verify(&key)
                    .map_err(|w| corrupt(format!("its keyframe {base}: {w}")))?;
                let kj = zstd::bulk::decompress(&kp, MAX_FRAME as usize)
                    .map_err(|err| corrupt(format!("its keyframe {base}: decompress: {err}")))?;
                let d = zstd::bulk::Decompressor::with_dictionary(&kj)
                    .map_err(|err| corrupt(format!("dictionary: {err}")))?;
                self.key_cache = Some((base, d));
            }
            let (_, d) = self.key_cache.as_mut().expect("just set");
            d.decompress(&payload, MAX_FRAME as usize)
                .map_err(|err| corrupt(format!("decompress: {err}")))?
        };
        serde_json::from_slice(&json).map_err(|err| corrupt(format!("decode: {err}")))
    }

    /// Decodes frame `i` of a format 3 to 6 file into `chain`: from the last
    /// frame decoded when that is on the way, else from its keyframe.
    fn decode_chain(&mut self, i: usize) -> Result<(), String> {
        let e = self.index[i];
        let base = if e.key {
            i
        } else {
            e.base
                .ok_or("its keyframe, or a frame between, is damaged or missing")?
        };
        let cached = self.chain.as_ref().map(|c| c.index);
        if cached == Some(i) {
            return Ok(());
        }
        // A chain goes on only with its history (an error on the way took
        // it).
        let cached = cached.filter(|_| {
            self.chain
                .as_ref()
                .is_some_and(|c| !matches!(c.history, History::Lost))
        });
        let mut at = match cached {
            Some(c) if (base..i).contains(&c) => c,
            _ => {
                let key = self.index[base];
                let what = |w: String| format!("its keyframe {base}: {w}");
                let kp = self.verify(&key).map_err(what)?;
                let (json, stream) = match self.major >= 7 {
                    true => {
                        let mut d = GroupDecompressor::start().map_err(what)?;
                        (d.next(&kp, MAX_FRAME as usize).map_err(what)?, Some(d))
                    }
                    false => (
                        zstd::bulk::decompress(&kp, MAX_FRAME as usize)
                            .map_err(|err| what(format!("decompress: {err}")))?,
                        None,
                    ),
                };
                let value =
                    serde_json::from_slice(&json).map_err(|err| what(format!("decode: {err}")))?;
                let shape = columns::shape(&json).map_err(what)?;
                let cols = columns::columns_of(&shape, &value).map_err(what)?;
                let frame =
                    Frame::deserialize(&value).map_err(|err| what(format!("decode: {err}")))?;
                self.chain = Some(Decoded {
                    index: base,
                    frame,
                    shape,
                    cols,
                    history: History::after(stream, json),
                });
                base
            }
        };
        while at < i {
            let j = at + 1;
            let next = self.index[j];
            let what = |w: String| {
                if j == i {
                    w
                } else {
                    format!("frame {j} before it: {w}")
                }
            };
            let payload = self.verify(&next).map_err(what)?;
            let last = self.chain.as_mut().expect("set above");
            // The history goes on with the frame decoded from it.
            let (body, stream) = match std::mem::replace(&mut last.history, History::Lost) {
                History::Stream(mut d) => (d.next(&payload, MAX_FRAME as usize), Some(d)),
                History::Prefix(plain) => (
                    zstd::bulk::Decompressor::with_dictionary(&plain)
                        .and_then(|mut d| d.decompress(&payload, MAX_FRAME as usize))
                        .map_err(|err| format!("decompress: {err}")),
                    None,
                ),
                History::Lost => (Err("the frame before it failed".into()), None),
            };
            let body = body.map_err(what)?;
            let (value, shape, cols) =
                columns::decode(&body, &last.cols, &last.shape).map_err(what)?;
            let mut frame =
                Frame::deserialize(&value).map_err(|err| what(format!("decode: {err}")))?;
            if next.predicted {
                predict::fill(
                    &predict::Basis::of(&last.frame),
                    &mut frame,
                    self.recomputed,
                );
            }
            self.chain = Some(Decoded {
                index: j,
                frame,
                shape,
                cols,
                history: History::after(stream, body),
            });
            at = j;
        }
        Ok(())
    }

    /// Index of the last frame at or before `wall_ns` (the first frame if none).
    pub fn seek_wall(&self, wall_ns: u64) -> usize {
        self.index
            .partition_point(|e| e.wall_ns <= wall_ns)
            .saturating_sub(1)
    }

    /// Every readable frame in order; damaged ones are reported in `skipped`.
    pub fn read_all(&mut self) -> (Vec<Frame>, Vec<RecordError>) {
        let mut frames = Vec::with_capacity(self.len());
        let mut skipped = Vec::new();
        for i in 0..self.len() {
            match self.frame(i) {
                Ok(f) => frames.push(f),
                Err(e) => skipped.push(e),
            }
        }
        (frames, skipped)
    }
}
