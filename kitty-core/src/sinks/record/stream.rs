//! One zstd stream per keyframe group (format 7): the keyframe starts it,
//! each delta after it continues it, and a record's payload is what one
//! flush of the stream gives. Every record before it in its group is a
//! record's history, with the match tables kept from one record to the
//! next (format 6 compressed each delta as a frame of its own with the
//! record before as a prefix, which zstd loads into fresh tables every
//! time: ~11 % of an append, and 6 % larger on the 8-rank ring).

use zstd::zstd_safe::zstd_sys::ZSTD_EndDirective;
use zstd::zstd_safe::{CCtx, CParameter, DCtx, InBuffer, OutBuffer, ResetDirective, Strategy};

/// zstd level of a group's stream (format 6 compressed its keyframes at 3,
/// on their own). Measured on a 60 s 8-rank recording written again at
/// each (format 5): 6 is 9 % smaller than 3 for ~70 us more an append
/// (~0.15 ms of CPU a second of recording at 500 ms); 7 1.6 % more for
/// another ~30 us; 4 is larger than 3; 9 and up cost 2-6x the time.
const LEVEL: i32 = 6;

/// The history a group's records may reach back over (2^17 bytes).
const WINDOW_LOG: u32 = 17;

/// The size of a zstd block header: what the decoder asks for next
/// between two blocks.
const BLOCK_HEADER: usize = 3;

fn zstd_error(code: usize) -> std::io::Error {
    std::io::Error::other(zstd::zstd_safe::get_error_name(code))
}

/// Compresses a keyframe group's records, in order.
pub struct GroupCompressor(CCtx<'static>);

impl GroupCompressor {
    pub fn new() -> std::io::Result<Self> {
        let mut c = CCtx::try_create().ok_or_else(|| std::io::Error::other("zstd: no memory"))?;
        for p in [
            CParameter::CompressionLevel(LEVEL),
            // A group spans ~32 bodies of ~5 KB after its keyframe: 128
            // KB of history holds the last ~20 records. More gained
            // nothing measurable; the reader keeps this much per replay.
            CParameter::WindowLog(WINDOW_LOG),
            CParameter::HashLog(14),
            CParameter::ChainLog(14),
            // Level 6 alone picks lazy2. Greedy with matches of 6 bytes
            // or more, on a minute of the 8-rank ring written again
            // (format 7, the fastest of 5 runs of each): 149 us an
            // append against 180 for lazy with 5-byte matches (the
            // choice before) and 190 for lazy2, for 131 KB/min against
            // 127 and 125. dfast was 132 us for 136-140 KB/min: too
            // near issue 12's 150.
            CParameter::Strategy(Strategy::ZSTD_greedy),
            CParameter::MinMatch(6),
        ] {
            c.set_parameter(p).map_err(zstd_error)?;
        }
        Ok(GroupCompressor(c))
    }

    /// Starts a new group: nothing written before is history any more.
    pub fn start(&mut self) -> std::io::Result<()> {
        self.0
            .reset(ResetDirective::SessionOnly)
            .map(drop)
            .map_err(zstd_error)
    }

    /// The group's next record: `plain` compressed with every record since
    /// the group's start as its history, flushed whole (the reader decodes
    /// it from this payload and the ones before it, nothing after).
    pub fn next(&mut self, plain: &[u8]) -> std::io::Result<Vec<u8>> {
        let mut out = Vec::with_capacity(zstd::zstd_safe::compress_bound(plain.len()) + 64);
        let mut input = InBuffer::around(plain);
        loop {
            if out.len() == out.capacity() {
                out.reserve(plain.len().max(1024));
            }
            let pos = out.len();
            let mut o = OutBuffer::around_pos(&mut out, pos);
            let left = self
                .0
                .compress_stream2(&mut o, &mut input, ZSTD_EndDirective::ZSTD_e_flush)
                .map_err(zstd_error)?;
            if left == 0 && input.pos == plain.len() {
                return Ok(out);
            }
        }
    }
}

/// Decodes a keyframe group's records, in order.
pub struct GroupDecompressor(DCtx<'static>);

impl GroupDecompressor {
    /// A decompressor for a group whose keyframe is the next record.
    pub fn start() -> Result<Self, String> {
        let mut d = DCtx::try_create().ok_or("zstd: no memory")?;
        // A damaged stream cannot ask for more memory than a writer uses.
        d.set_parameter(zstd::zstd_safe::DParameter::WindowLogMax(WINDOW_LOG))
            .map_err(|c| zstd::zstd_safe::get_error_name(c).to_string())?;
        Ok(GroupDecompressor(d))
    }

    /// The group's next record from its payload (at most `max` bytes).
    pub fn next(&mut self, payload: &[u8], max: usize) -> Result<Vec<u8>, String> {
        let mut out: Vec<u8> = Vec::with_capacity((payload.len() * 8).clamp(4096, max));
        let mut input = InBuffer::around(payload);
        loop {
            if out.len() == out.capacity() {
                if out.len() >= max {
                    return Err(format!("decompress: more than {max} bytes"));
                }
                out.reserve(out.len().min(max - out.len()));
            }
            let (pos, room) = (out.len(), out.capacity());
            let was = input.pos;
            let mut o = OutBuffer::around_pos(&mut out, pos);
            let hint = self
                .0
                .decompress_stream(&mut o, &mut input)
                .map_err(|c| format!("decompress: {}", zstd::zstd_safe::get_error_name(c)))?;
            let wrote = o.pos();
            // All of a record is out once its input is taken and the
            // decoder stopped short of the room it had; a whole record (a
            // flush ends its last block) leaves it waiting for the next
            // block's 3-byte header and nothing else.
            if input.pos == payload.len() && wrote < room {
                return match hint {
                    BLOCK_HEADER => Ok(out),
                    _ => Err("decompress: the record ends inside a block".into()),
                };
            }
            if input.pos == was && wrote == pos {
                return Err("decompress: no progress".into());
            }
        }
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
    fn each_record_of_a_group_reads_back_from_those_before_it() {
        let mut c = GroupCompressor::new().unwrap();
        for group in 0..3u64 {
            c.start().unwrap();
            let records: Vec<Vec<u8>> = (0..6)
                .map(|i| body(group * 10 + i % 3, 300 + 200 * (i % 3) as usize))
                .collect();
            let payloads: Vec<Vec<u8>> = records.iter().map(|r| c.next(r).unwrap()).collect();
            // Records repeat (i % 3): a later one is found in the history.
            assert!(
                payloads[3].len() * 4 < payloads[0].len(),
                "{}",
                payloads[3].len()
            );
            let mut d = GroupDecompressor::start().unwrap();
            for (p, r) in payloads.iter().zip(&records) {
                assert_eq!(&d.next(p, 1 << 20).unwrap(), r);
            }
            // Without the records before it, a delta does not decode.
            let mut fresh = GroupDecompressor::start().unwrap();
            assert!(fresh.next(&payloads[4], 1 << 20).is_err());
        }
    }

    #[test]
    fn a_record_larger_than_allowed_or_cut_short_is_refused() {
        let mut c = GroupCompressor::new().unwrap();
        let big = body(1, 20_000);
        let p = c.next(&big).unwrap();
        let mut d = GroupDecompressor::start().unwrap();
        assert!(d.next(&p, 10_000).is_err());
        let mut d = GroupDecompressor::start().unwrap();
        assert!(d.next(&p[..p.len() / 2], 1 << 20).is_err());
    }

    #[test]
    fn a_record_that_grows_past_the_first_guess_reads_back() {
        // Text that compresses ~1000x: the output outgrows payload x 8.
        let same = vec![b'7'; 200_000];
        let mut c = GroupCompressor::new().unwrap();
        let p = c.next(&same).unwrap();
        assert!(p.len() * 100 < same.len());
        let mut d = GroupDecompressor::start().unwrap();
        assert_eq!(d.next(&p, 1 << 20).unwrap(), same);
    }
}
