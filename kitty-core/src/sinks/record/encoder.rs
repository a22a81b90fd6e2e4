//! Turns frames into records (the CPU half of a [`super::Writer`]): a
//! keyframe or a delta against the frame before, compressed in its
//! group's zstd stream, with its head and CRC, ready to be written.

use super::stream::GroupCompressor;
use super::*;
use crate::model::Frame;

pub struct RecordEncoder {
    /// Records encoded and, as far as it knows, written.
    frames: u64,
    /// Keeps the last frame encoded, to encode the next one against.
    columns: columns::Encoder,
    /// What the last record's rates are recomputed from on replay, while
    /// the next record may be a delta against it.
    last: Option<predict::Basis>,
    /// The keyframe group's zstd stream, set up once (a keyframe starts
    /// it again); None after it failed, until the next record.
    stream: Option<GroupCompressor>,
    /// Whether the ranks' latency histograms are written (the header's
    /// [`Header::histograms`]), and where they wait while a frame is
    /// encoded without them.
    histograms: bool,
    set_aside: Vec<crate::model::Histograms>,
}

impl RecordEncoder {
    /// An encoder for a recording with this header (it says whether the
    /// histograms are kept).
    pub fn new(header: &Header) -> Self {
        RecordEncoder {
            frames: 0,
            columns: columns::Encoder::default(),
            last: None,
            stream: None,
            histograms: header.keeps_histograms(),
            set_aside: Vec::new(),
        }
    }

    /// A frame's record, without a copy of the frame: the values a delta
    /// leaves out are marked in `frame` while it is encoded, then put back
    /// (it is as it was when this returns), and so are its histograms
    /// when the header says they are left out. The next record is encoded
    /// against this one unless [`RecordEncoder::lost`] says it was not
    /// written.
    pub fn encode(&mut self, frame: &mut Frame) -> std::io::Result<Vec<u8>> {
        if self.histograms {
            return self.encode_as_is(frame);
        }
        self.set_aside.clear();
        for r in &mut frame.ranks {
            self.set_aside.push(std::mem::take(&mut r.histograms));
        }
        let done = self.encode_as_is(frame);
        for (r, h) in frame.ranks.iter_mut().zip(self.set_aside.drain(..)) {
            r.histograms = h;
        }
        done
    }

    /// The last record encoded did not reach the file: what follows must
    /// not be encoded against a frame the file may not hold, so the next
    /// record is a keyframe.
    pub fn lost(&mut self) {
        self.frames = self.frames.saturating_sub(1);
        self.last = None;
    }

    /// Deltas whose values were written from the frame's types (its shape
    /// was the one before's).
    pub fn typed_deltas(&self) -> u64 {
        self.columns.typed_deltas()
    }

    fn encode_as_is(&mut self, frame: &mut Frame) -> std::io::Result<Vec<u8>> {
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
        let payload = self.compress(key, &plain)?;
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
        self.frames += 1;
        self.last = Some(predict::Basis::of(frame));
        Ok(rec)
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
}
