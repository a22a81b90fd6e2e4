//! Round trip, truncation, corruption and version tests of the format, plus
//! a proptest fuzz harness for the reader.

use super::*;
use crate::model::{Frame, RankFrame, Sig};
use std::path::PathBuf;

fn sample_frames(n: usize) -> Vec<Frame> {
    (0..n)
        .map(|i| {
            let mut f = Frame {
                version: crate::model::FRAME_VERSION,
                seq: i as u64,
                wall_ns: 1_700_000_000_000_000_000 + i as u64 * 500_000_000,
                mono_ns: 1_000_000_000 + i as u64 * 500_000_000,
                node: "n".into(),
                interval_ms: 500,
                ..Default::default()
            };
            f.host.signals.set(Sig::CpuUtilPct, i as f64);
            f.ranks.push(RankFrame {
                key: crate::model::ProcKey {
                    pid: 42,
                    start_time: 7,
                },
                comm: "python".into(),
                labels: Default::default(),
                state: "S".into(),
                netns: Some(1),
                gpu: None,
                counters: Default::default(),
                signals: [(Sig::RunDelayMsPerS, i as f64 * 1.5)]
                    .into_iter()
                    .collect(),
                sockets: vec![],
                threads: vec![],
                histograms: Default::default(),
                ..Default::default()
            });
            f
        })
        .collect()
}

fn header() -> Header {
    Header {
        kitty_version: "0.1.0".into(),
        frame_version: 1,
        host: "n".into(),
        interval_ms: 500,
        start_wall_ns: 1,
        kernel: Some("6.18.44-test".into()),
        histograms: Some(true),
    }
}

fn write(dir: &tempfile::TempDir, frames: &[Frame]) -> PathBuf {
    let p = dir.path().join("r.kitty");
    let mut w = Writer::create(&p, &header()).unwrap();
    for f in frames {
        w.append(f).unwrap();
    }
    w.finish().unwrap();
    p
}

#[test]
fn round_trip_and_seek() {
    let d = tempfile::tempdir().unwrap();
    let frames = sample_frames(20);
    let p = write(&d, &frames);
    let mut r = Reader::open(&p).unwrap();
    assert_eq!(r.header(), &header());
    assert!(r.warnings().is_empty());
    let (got, skipped) = r.read_all();
    assert!(skipped.is_empty());
    assert_eq!(got, frames);
    assert_eq!(r.seek_wall(frames[7].wall_ns + 1), 7);
    assert_eq!(r.seek_wall(0), 0);
    assert_eq!(r.frame(12).unwrap(), frames[12]);
}

#[test]
fn cut_at_any_byte_replays_whole_frames() {
    let d = tempfile::tempdir().unwrap();
    let frames = sample_frames(4);
    let p = write(&d, &frames);
    let full = std::fs::read(&p).unwrap();
    let mut r = Reader::open(&p).unwrap();
    let ends: Vec<u64> = r
        .index()
        .iter()
        .map(|e| e.offset + RECORD_HEAD as u64 + e.len as u64)
        .collect();
    let header_end = r.index()[0].offset;
    let _ = r.read_all();
    for cut in 0..full.len() {
        let q = d.path().join("cut.kitty");
        std::fs::write(&q, &full[..cut]).unwrap();
        match Reader::open(&q) {
            Err(e) => assert!((cut as u64) < header_end, "cut {cut}: {e}"),
            Ok(mut r) => {
                let whole = ends.iter().filter(|e| **e <= cut as u64).count();
                let (got, skipped) = r.read_all();
                assert!(skipped.is_empty());
                assert_eq!(got.len(), whole, "cut at {cut}");
                assert_eq!(got[..], frames[..whole]);
                let partial = cut as u64 > header_end && !ends.contains(&(cut as u64));
                assert_eq!(
                    !r.warnings().is_empty(),
                    partial,
                    "cut {cut}: {:?}",
                    r.warnings()
                );
            }
        }
    }
}

#[test]
fn flipped_byte_is_detected_never_a_panic() {
    let d = tempfile::tempdir().unwrap();
    // Two keyframe groups: a flip costs the flipped frame and the frames
    // after it in its keyframe's group (each is decoded from the one before
    // it), never more.
    let frames = sample_frames(KEY_EVERY as usize + 4);
    let p = write(&d, &frames);
    let full = std::fs::read(&p).unwrap();
    let r0 = Reader::open(&p).unwrap();
    let idx = r0.index().to_vec();
    let first = idx[0].offset as usize;
    let group = |k: usize| idx.iter().filter(|e| e.base == Some(k)).count() + 1;
    let rest_of_group = |j: usize| {
        idx[j..]
            .iter()
            .take_while(|e| !e.key && e.base == idx[j].base)
            .count()
    };
    for pos in first..full.len() {
        let mut bad = full.clone();
        bad[pos] ^= 0x40;
        let q = d.path().join("bad.kitty");
        std::fs::write(&q, &bad).unwrap();
        let mut r = Reader::open(&q).unwrap();
        let (got, skipped) = r.read_all();
        let hit = idx.iter().rposition(|e| e.offset as usize <= pos).unwrap();
        let may_lose = if idx[hit].key {
            group(hit)
        } else {
            rest_of_group(hit)
        };
        assert!(
            got.len() >= frames.len() - may_lose,
            "flip at {pos} (frame {hit}): kept {}",
            got.len()
        );
        assert!(
            got.iter().all(|f| frames.contains(f)),
            "flip at {pos} produced a frame that was never written"
        );
        assert!(
            got.len() < frames.len() && (!skipped.is_empty() || !r.warnings().is_empty()),
            "flip at {pos} went unnoticed"
        );
    }
}

#[test]
fn frames_are_compressed_against_the_frame_before() {
    let d = tempfile::tempdir().unwrap();
    let frames = sample_frames(3 * KEY_EVERY as usize);
    let p = write(&d, &frames);
    let r = Reader::open(&p).unwrap();
    let idx = r.index();
    assert_eq!(idx.iter().filter(|e| e.key).count(), 3);
    let key: u64 = idx
        .iter()
        .filter(|e| e.key)
        .map(|e| e.len as u64)
        .sum::<u64>()
        / 3;
    let delta: u64 = idx
        .iter()
        .filter(|e| !e.key)
        .map(|e| e.len as u64)
        .sum::<u64>()
        / (idx.len() as u64 - 3);
    assert!(
        delta * 2 < key,
        "a delta ({delta} B) is far smaller than a keyframe ({key} B)"
    );
    // Any frame reads alone (a seek), in any order.
    let mut r = Reader::open(&p).unwrap();
    for i in [40, 3, 17, 16, 0, 47] {
        assert_eq!(r.frame(i).unwrap(), frames[i], "frame {i}");
    }
}

#[test]
fn newer_major_is_refused_clearly() {
    let d = tempfile::tempdir().unwrap();
    let p = write(&d, &sample_frames(1));
    let mut b = std::fs::read(&p).unwrap();
    b[8..10].copy_from_slice(&(MAJOR + 1).to_le_bytes());
    std::fs::write(&p, &b).unwrap();
    let e = Reader::open(&p).err().unwrap().to_string();
    assert!(e.contains("newer than this kitty reads"), "{e}");
}

#[test]
fn not_a_recording() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("x");
    std::fs::write(&p, b"hello world, not kitty").unwrap();
    assert!(Reader::open(&p)
        .err()
        .unwrap()
        .to_string()
        .contains("not a kitty recording"));
    assert!(Reader::open(&d.path().join("missing")).is_err());
}

#[test]
fn unwritable_path_is_an_error() {
    assert!(Writer::create(std::path::Path::new("/nonexistent-dir/x.kitty"), &header()).is_err());
}

mod fuzz {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// Arbitrary edits of a valid file never panic the reader and never
        /// invent frames.
        #[test]
        fn reader_survives_mutations(edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..12),
                                     cut in any::<prop::sample::Index>()) {
            let d = tempfile::tempdir().unwrap();
            let frames = sample_frames(5);
            let p = write(&d, &frames);
            let mut b = std::fs::read(&p).unwrap();
            for (at, v) in edits {
                let i = at.index(b.len());
                b[i] = v;
            }
            let keep = cut.index(b.len() + 1);
            b.truncate(keep.max(b.len() / 2));
            std::fs::write(&p, &b).unwrap();
            if let Ok(mut r) = Reader::open(&p) {
                let (got, _) = r.read_all();
                prop_assert!(got.iter().all(|f| frames.contains(f)));
            }
        }

        /// Pure garbage after a valid header.
        #[test]
        fn reader_survives_garbage(tail in proptest::collection::vec(any::<u8>(), 0..4096)) {
            let d = tempfile::tempdir().unwrap();
            let p = write(&d, &[]);
            let mut b = std::fs::read(&p).unwrap();
            b.extend_from_slice(&tail);
            std::fs::write(&p, &b).unwrap();
            let mut r = Reader::open(&p).unwrap();
            let _ = r.read_all();
        }
    }
}

/// A committed recording.
fn fixture(name: &str) -> PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// The ranks of the fixtures' job in a frame.
fn fixture_ranks(f: &Frame) -> usize {
    f.ranks
        .iter()
        .filter(|x| x.labels.job.as_deref() == Some("fixture"))
        .count()
}

/// Every frame of a recording that must read without a warning or a
/// skipped frame, and its reader (for the index).
fn read_whole(path: &std::path::Path) -> (Reader, Vec<Frame>) {
    let mut r = Reader::open(path).unwrap();
    assert!(r.warnings().is_empty(), "{:?}", r.warnings());
    let (frames, skipped) = r.read_all();
    assert!(skipped.is_empty(), "{skipped:?}");
    (r, frames)
}

/// A recording of a real 2-rank job on an H200 (format 5.0, taken by
/// `scripts/gpu-check.sh` on a lent GPU machine): every frame replays with
/// the GPU as NVML gave it, GPM included, and both ranks on GPU 0.
#[test]
fn a_recording_from_a_real_h200_replays() {
    let (r, frames) = read_whole(&fixture("recording-v5-h200.kitty"));
    assert_eq!(
        r.header().kernel,
        None,
        "format 5.0 did not name the kernel"
    );
    assert_eq!(frames.len(), 40);
    for f in &frames {
        assert_eq!(f.gpus.len(), 1);
        assert_eq!(f.gpus[0].name.as_str(), "NVIDIA H200");
        let job: Vec<_> = f
            .ranks
            .iter()
            .filter(|r| r.labels.job.as_deref() == Some("gpu-check"))
            .collect();
        assert_eq!(job.len(), 2);
        assert!(job.iter().all(|r| r.gpu == Some(0)));
    }
    let last = &frames.last().unwrap().gpus[0].signals;
    for s in [
        Sig::SmActivePct,
        Sig::TensorActivePct,
        Sig::PcieRxBytesPerS,
        Sig::EnergyW,
    ] {
        assert!(last.get(s).is_some_and(|v| v > 0.0), "{s:?}: {last:?}");
    }
    assert_eq!(last.get(Sig::SmClockMaxMhz), Some(1980.0));
}

/// A recording made by kitty 0.1 (format 1.0, frame version 1, signals as
/// free strings) before typed signals: it still replays, every frame.
#[test]
fn a_version_1_recording_still_replays() {
    let (r, frames) = read_whole(&fixture("recording-v1.kitty"));
    assert_eq!(r.header().frame_version, 1);
    assert_eq!(r.header().kernel, None, "headers name the kernel from 5.1");
    assert_eq!(frames.len(), 13);
    for f in &frames {
        assert_eq!(fixture_ranks(f), 3);
    }
    let last = frames.last().unwrap();
    assert!(last.ranks[0].signal(Sig::RunDelayMsPerS).is_some());
    assert!(last.ranks[0].signal(Sig::TcpSockets).unwrap() >= 2.0);
    assert!(last.host.signals.get(Sig::CpuUtilPct).is_some());
}

/// A recording made by the kitty before format 3 (format 2.0: deltas
/// against their keyframe; 3 ranks of a real job, 20 frames, two keyframe
/// groups): it still replays, and its frames written again in this format
/// read back the same, frame for frame (their rates recomputed from the
/// counters: the real sampler's, bit for bit).
#[test]
fn a_format_2_recording_still_replays_and_rewrites_the_same() {
    let p = fixture("recording-v2.kitty");
    let (r, frames) = read_whole(&p);
    assert_eq!(r.index().iter().filter(|e| e.key).count(), 2);
    assert!(r.index().iter().all(|e| !e.chained));
    assert_eq!(frames.len(), 20);
    for f in &frames {
        assert_eq!(fixture_ranks(f), 3);
    }
    let last = frames.last().unwrap();
    assert!(last.ranks.iter().all(|x| x.signal(Sig::CpuPct).is_some()));
    let d = tempfile::tempdir().unwrap();
    let again = write(&d, &frames);
    let (r5, back) = read_whole(&again);
    // 20 frames: a keyframe, then deltas (one keyframe every KEY_EVERY).
    let keys = 20usize.div_ceil(KEY_EVERY as usize);
    assert_eq!(r5.index().iter().filter(|e| e.predicted).count(), 20 - keys);
    assert_eq!(back, frames);
    // Smaller than formats 2 to 6 made them.
    let size = |p: &std::path::Path| std::fs::metadata(p).unwrap().len();
    let [v2, v3, v4, v5, v6, v7] = [
        size(&p),
        size(&fixture("recording-v3.kitty")),
        size(&fixture("recording-v4.kitty")),
        size(&fixture("recording-v5.kitty")),
        size(&fixture("recording-v6.kitty")),
        size(&again),
    ];
    assert!(
        v7 < v6 && v6 < v5 && v5 < v4 && v4 < v3 && v3 < v2,
        "format 7: {v7} B, 6: {v6} B, 5: {v5} B, 4: {v4} B, 3: {v3} B, 2: {v2} B"
    );
}

/// The same 20 frames as written by the kitty before format 4 (format
/// 3.0: every rate kept): they replay, the same frames.
#[test]
fn a_format_3_recording_still_replays() {
    let (r, frames) = read_whole(&fixture("recording-v3.kitty"));
    assert_eq!(r.index().iter().filter(|e| e.chained).count(), 18);
    assert!(r.index().iter().all(|e| !e.predicted));
    let (_, v2) = read_whole(&fixture("recording-v2.kitty"));
    assert_eq!(frames, v2);
}

/// The same 20 frames as written by the kitty before format 5 (format
/// 4.0: rates left out, percentiles kept): they replay, the same frames.
#[test]
fn a_format_4_recording_still_replays() {
    let (r, frames) = read_whole(&fixture("recording-v4.kitty"));
    assert_eq!(r.index().iter().filter(|e| e.predicted).count(), 18);
    let (_, v2) = read_whole(&fixture("recording-v2.kitty"));
    assert_eq!(frames, v2);
}

/// The same 20 frames as written by the kitty before format 6 (format
/// 5.1: columns by name in each delta): they replay, the same frames.
#[test]
fn a_format_5_recording_still_replays() {
    let (r, frames) = read_whole(&fixture("recording-v5.kitty"));
    assert_eq!(r.index().iter().filter(|e| e.predicted).count(), 19);
    let (_, v2) = read_whole(&fixture("recording-v2.kitty"));
    assert_eq!(frames, v2);
}

/// The same 20 frames as written by the kitty before format 7 (format
/// 6.1: each delta a zstd frame of its own against the record before):
/// they replay, the same frames, and so does each one on its own (a seek
/// backwards decodes from the keyframe again).
#[test]
fn a_format_6_recording_still_replays() {
    let (mut r, frames) = read_whole(&fixture("recording-v6.kitty"));
    assert_eq!(r.index().iter().filter(|e| e.predicted).count(), 19);
    let (_, v2) = read_whole(&fixture("recording-v2.kitty"));
    assert_eq!(frames, v2);
    for i in [7, 3, 19, 0, 12] {
        assert_eq!(r.frame(i).unwrap(), v2[i], "frame {i}");
    }
}

/// Writes `frames` to `path` the recorder's way (in place, no copy), each
/// frame put back as it was.
fn write_in_place(path: &std::path::Path, header: &Header, frames: &[Frame]) {
    let mut w = Writer::create(path, header).unwrap();
    for f in frames {
        let mut mine = f.clone();
        w.append_in_place(&mut mine).unwrap();
        assert_eq!(&mine, f, "put back as it was");
    }
    w.finish().unwrap();
}

/// Appending in place (the recorder's way: no copy of the frame) writes
/// the same bytes as appending a copy, and leaves each frame as it was,
/// on the real 3-rank frames, whose rates are left out of the deltas.
#[test]
fn appending_in_place_writes_the_same_and_changes_nothing() {
    let (_, frames) = read_whole(&fixture("recording-v2.kitty"));
    let d = tempfile::tempdir().unwrap();
    let copied = write(&d, &frames);
    let in_place = d.path().join("in-place.kitty");
    write_in_place(&in_place, &header(), &frames);
    let (r, back) = read_whole(&in_place);
    assert!(r.index().iter().filter(|e| e.predicted).count() > 10);
    assert_eq!(back, frames);
    assert_eq!(
        std::fs::read(&in_place).unwrap(),
        std::fs::read(&copied).unwrap()
    );
}

/// A recording whose header leaves the latency histograms out (what the
/// recorders write unless asked for them): each frame reads back as it was
/// but for its histograms, its percentiles kept as values; the frame given
/// to the writer keeps its histograms (the live view still draws them);
/// the header says so; and the file is smaller.
#[test]
fn a_recording_without_histograms_keeps_everything_else() {
    let (_, frames) = read_whole(&fixture("recording-v2.kitty"));
    let with_hist = |f: &Frame| f.ranks.iter().any(|r| !r.histograms.is_empty());
    assert!(
        frames.iter().filter(|f| with_hist(f)).count() > 10,
        "the fixture's ranks have histograms to leave out"
    );
    let d = tempfile::tempdir().unwrap();
    let full = write(&d, &frames);
    let small = d.path().join("small.kitty");
    // The frames given keep their histograms (the live view draws them).
    write_in_place(&small, &header().with_histograms(false), &frames);
    let (r, back) = read_whole(&small);
    assert_eq!(r.header().histograms, Some(false));
    assert!(!r.header().keeps_histograms());
    let expected: Vec<Frame> = frames
        .iter()
        .map(|f| {
            let mut f = f.clone();
            f.ranks
                .iter_mut()
                .for_each(|r| r.histograms = Default::default());
            f
        })
        .collect();
    assert_eq!(back, expected);
    assert!(
        back.iter()
            .flat_map(|f| &f.ranks)
            .any(|r| r.signal(Sig::RttP99Us).is_some()),
        "the percentiles are kept without their histograms"
    );
    let size = |p: &std::path::Path| std::fs::metadata(p).unwrap().len();
    assert!(
        size(&small) < size(&full),
        "{} >= {}",
        size(&small),
        size(&full)
    );
    let (r, _) = read_whole(&full);
    assert!(r.header().keeps_histograms());
}

/// A 6.0 header (no `histograms`) reads as a recording that kept them all.
#[test]
fn a_header_before_6_1_kept_the_histograms() {
    let json = r#"{"kitty_version":"0.1.0","frame_version":9,"host":"n","interval_ms":500,"start_wall_ns":1,"kernel":"6.18.0"}"#;
    let h: Header = serde_json::from_str(json).unwrap();
    assert_eq!(h.histograms, None);
    assert!(h.keeps_histograms());
    let h: Header = serde_json::from_str(&json.replace('}', r#","histograms":false}"#)).unwrap();
    assert!(!h.keeps_histograms());
}

/// A sink that takes `room` bytes, then fails every write.
struct FillsUp {
    room: usize,
    to: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
}

impl std::io::Write for FillsUp {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        if self.room < b.len() {
            return Err(std::io::Error::from_raw_os_error(libc::ENOSPC));
        }
        self.room -= b.len();
        self.to.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// `record`'s writer on the sampling thread: the same bytes as the
/// [`Writer`], whether every write is quick (all on the caller's thread)
/// or the first one counts as slow (every later record written by a
/// thread of its own, all of them there before the outcome is given).
#[test]
fn the_tick_writer_writes_what_the_writer_does_here_or_spooled() {
    use super::spool::TickWriter;
    let (_, frames) = read_whole(&fixture("recording-v2.kitty"));
    let d = tempfile::tempdir().unwrap();
    let want = std::fs::read(write(&d, &frames)).unwrap();
    for (slow, spooled) in [
        (std::time::Duration::from_secs(3600), false),
        (std::time::Duration::ZERO, true),
    ] {
        let path = d.path().join(format!("tick-{spooled}.kitty"));
        let file = RecordFile::new(
            Sink::File(std::fs::File::create(&path).unwrap()),
            "t",
            &header(),
        )
        .unwrap();
        let (mut w, outcome) = TickWriter::new(file, RecordEncoder::new(&header()), slow);
        for f in &frames {
            let mut mine = f.clone();
            assert!(w.take(&mut mine));
            assert_eq!(&mine, f, "put back as it was");
        }
        assert_eq!(w.spooled(), spooled);
        drop(w);
        let file = outcome.take().unwrap();
        assert_eq!(file.frames(), frames.len() as u64);
        file.finish().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), want, "spooled: {spooled}");
    }
}

/// A write that fails ends the recording, here or spooled: `take` says to
/// stop, the outcome is the error by the recording's name, and every
/// record before it is in the file whole.
#[test]
fn a_failed_write_ends_the_tick_writer_with_its_error_and_keeps_what_was_written() {
    use super::spool::TickWriter;
    let frames = sample_frames(200);
    for slow in [
        std::time::Duration::from_secs(3600),
        std::time::Duration::ZERO,
    ] {
        let to = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = Sink::Stream(Box::new(FillsUp {
            room: 2000,
            to: to.clone(),
        }));
        let file = RecordFile::new(sink, "full.kitty", &header()).unwrap();
        let (mut w, outcome) = TickWriter::new(file, RecordEncoder::new(&header()), slow);
        // Spooled, the failure shows up to the channel's room later.
        let most = frames.len() + super::spool::ROOM + 2;
        let fed = frames
            .iter()
            .cycle()
            .take(most)
            .take_while(|f| w.take(&mut (*f).clone()))
            .count();
        assert!(fed < most, "it says to stop ({slow:?})");
        drop(w);
        let e = outcome.take().err().expect("the write's error");
        let said = e.to_string();
        assert!(said.contains("full.kitty"), "{said}");
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("kept.kitty");
        std::fs::write(&path, &*to.lock().unwrap()).unwrap();
        let (_, back) = read_whole(&path);
        assert!(
            !back.is_empty() && back.len() < frames.len(),
            "{} kept",
            back.len()
        );
        assert_eq!(back[..], frames[..back.len()]);
    }
}
