//! The recording format: a self-describing header, then frames appended with
//! a length, timestamps and a CRC-32, each compressed with zstd.
//!
//! ```text
//! file   := header record*
//! header := "KITTYREC" major:u16le minor:u16le len:u32le json[len] crc32(json):u32le
//! record := magic len:u32le mono_ns:u64le wall_ns:u64le crc:u32le payload[len]
//!           crc covers mono_ns, wall_ns and the payload
//! magic  := "KFR1"   a keyframe: payload = zstd(json(Frame)); format 7:
//!                    the start of its group's zstd stream, flushed
//!         | "KFR4"   (formats 4 to 7) payload = zstd(columns(Frame with
//!                    the values the reader recomputes marked, previous
//!                    such Frame)); format 7: the group's stream continued
//!                    and flushed ([`stream`]: every record since the
//!                    keyframe is its history); formats 4 to 6: a zstd
//!                    frame of its own, the previous record's uncompressed
//!                    payload as the dictionary; format 5 also leaves out
//!                    the ranks' latency percentiles and writes histograms
//!                    a character a bucket; format 6 lists the columns by
//!                    the order of their field paths instead of by name,
//!                    a column with nothing changed as one `0`
//!         | "KFR3"   (format 3, read only) the same with every rate kept
//!         | "KFR2"   (format 2, read only) payload = zstd(json(Frame))
//!                    with the JSON of the last keyframe as the dictionary
//! ```
//! Consecutive frames are nearly the same: a frame written as the columns
//! of its changes against the one before it ([`columns`]) is a fraction of
//! its own size. A keyframe every [`KEY_EVERY`] frames bounds what a
//! damaged record costs and what a seek decodes (at most that many
//! frames). A rate that the frame's counters and tcp_info give against the
//! frame before, exactly as the sampler computed it, is left out of a delta
//! and recomputed when it is read ([`predict`]), and so is a percentile
//! that the rank's own histogram gives. A file cut by a crash replays up
//! to its last whole frame.
//! Seeking reads only the 28-byte record heads, never the payloads. A
//! reader refuses a newer major version; format 1 (keyframes only), 2 to
//! 6 files still replay.

mod columns;
pub mod digits;
mod encoder;
mod predict;
mod reader;
pub mod spool;
mod stream;
mod writer;

pub use encoder::RecordEncoder;
pub use reader::{IndexEntry, Reader};
pub use writer::{RecordFile, Sink, Writer};

use serde::{Deserialize, Serialize};

pub const MAGIC: &[u8; 8] = b"KITTYREC";
/// A frame compressed on its own.
pub const FRAME_MAGIC: &[u8; 4] = b"KFR1";
/// A frame compressed against its keyframe (format 2, read only).
pub const DELTA_MAGIC: &[u8; 4] = b"KFR2";
/// A frame as columns of changes against the frame before it (format 3,
/// read only).
pub const COLUMNS_MAGIC: &[u8; 4] = b"KFR3";
/// The same, with the values the reader recomputes left out (formats 4
/// and 5; the file's major version says which values).
pub const PREDICTED_MAGIC: &[u8; 4] = b"KFR4";
/// Every record magic a reader knows.
pub const MAGICS: [&[u8; 4]; 4] = [FRAME_MAGIC, DELTA_MAGIC, COLUMNS_MAGIC, PREDICTED_MAGIC];
/// 7: as 6, each keyframe group one zstd stream (a record is what one
/// flush of it gives; a delta's history is every record since its
/// keyframe, not the record before alone).
/// 6: as 5, a delta's columns listed in the order of their field paths
/// (no names) and a column of values all as before written as `0`.
/// 5: as 4, a rank's latency percentiles also left out (recomputed from
/// its histograms). 4: as 3, the recomputable rates left out. 3: frames as
/// changes against the one before. 2: delta frames against keyframes. 1:
/// every frame on its own.
pub const MAJOR: u16 = 7;
/// 7.0: as 6.1. 6.1: the header also says whether each tick's latency
/// histograms were kept ([`Header::histograms`]; a 6.0 file always kept
/// them), and a rank's p50 and p99 are no greater than its max
/// (recomputed so; a 6.0 file's as they were). 6.0 (and 5.1): the header
/// also names the kernel the recording was taken on (a 5.0 file replays
/// without it).
pub const MINOR: u16 = 0;
/// A keyframe every this many frames (16 s at 500 ms): the most a damaged
/// record costs, and the most frames a seek decodes (20 ms in the seek
/// bench). 16 frames made a recording 7 % larger; 64 another 4 %
/// smaller, for twice the worst seek and a damaged record costing 32 s.
pub const KEY_EVERY: u64 = 32;
/// magic + len + mono + wall + crc
pub const RECORD_HEAD: usize = 4 + 4 + 8 + 8 + 4;
/// No frame is this large; a bigger length is corruption, not data.
pub const MAX_FRAME: u32 = 64 << 20;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Header {
    pub kitty_version: String,
    pub frame_version: u32,
    pub host: crate::model::Text,
    pub interval_ms: u64,
    pub start_wall_ns: u64,
    /// The recording node's kernel release (format 5.1; absent before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<crate::model::Text>,
    /// Whether the ranks' per-tick latency histograms were kept (format
    /// 6.1; absent before, when they always were). Without them a
    /// recording keeps each tick's p50, p99 and max as values and is about
    /// a quarter smaller: a histogram is ~50 noisy buckets a rank a tick,
    /// which no encoding of ours made cheap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub histograms: Option<bool>,
}

impl Header {
    /// The header of a recording starting now on this node (and its kernel).
    pub fn now(host: &str, interval: std::time::Duration) -> Header {
        Header {
            kitty_version: crate::KITTY_VERSION.into(),
            frame_version: crate::model::FRAME_VERSION,
            host: crate::model::Text::new(host),
            interval_ms: interval.as_millis() as u64,
            start_wall_ns: crate::model::time::wall_ns(),
            kernel: crate::sources::node::kernel_release(),
            histograms: Some(true),
        }
    }

    /// The same header, its recording keeping each tick's latency
    /// histograms or leaving them out.
    pub fn with_histograms(mut self, keep: bool) -> Header {
        self.histograms = Some(keep);
        self
    }

    /// Whether the recording's frames carry the ranks' histograms (as they
    /// all did before format 6.1).
    pub fn keeps_histograms(&self) -> bool {
        self.histograms != Some(false)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("{0}: {1}")]
    Io(String, std::io::Error),
    #[error("{0}: not a kitty recording (bad magic)")]
    NotARecording(String),
    #[error("{path}: recording format {major}.{minor} is newer than this kitty reads ({MAJOR}.x); upgrade kitty")]
    NewerVersion {
        path: String,
        major: u16,
        minor: u16,
    },
    #[error("{0}: recording header is damaged")]
    BadHeader(String),
    #[error("frame {index} at byte {offset}: {why}")]
    Corrupt {
        index: usize,
        offset: u64,
        why: String,
    },
}

#[cfg(test)]
mod tests;
