//! The recording format: a self-describing header, then frames appended with
//! a length, timestamps and a CRC-32, each compressed with zstd.
//!
//! ```text
//! file   := header record*
//! header := "KITTYREC" major:u16le minor:u16le len:u32le json[len] crc32(json):u32le
//! record := "KFR1" len:u32le mono_ns:u64le wall_ns:u64le crc:u32le zstd(json(Frame))[len]
//!           crc covers mono_ns, wall_ns and the compressed payload
//! ```
//! A file cut by a crash replays up to its last whole frame. Seeking reads
//! only the 28-byte record heads, never the payloads. A reader refuses a
//! newer major version.

mod reader;
mod writer;

pub use reader::Reader;
pub use writer::{Sink, Writer};

use serde::{Deserialize, Serialize};

pub const MAGIC: &[u8; 8] = b"KITTYREC";
pub const FRAME_MAGIC: &[u8; 4] = b"KFR1";
pub const MAJOR: u16 = 1;
pub const MINOR: u16 = 0;
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
}

impl Header {
    /// The header of a recording starting now on this node.
    pub fn now(host: &str, interval: std::time::Duration) -> Header {
        Header {
            kitty_version: crate::KITTY_VERSION.into(),
            frame_version: crate::model::FRAME_VERSION,
            host: crate::model::Text::new(host),
            interval_ms: interval.as_millis() as u64,
            start_wall_ns: crate::model::time::wall_ns(),
        }
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
