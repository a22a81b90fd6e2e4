//! Writes a frame's JSON and takes it apart in the same pass: its shape and
//! its values' places and (when asked) field paths, as
//! [`super::flatten_into`] finds them by scanning the text again (a delta's
//! largest part but for zstd). A frame's shape is most often the one before
//! (its values' columns are then known by position) and its paths are ~1.4
//! times its JSON's bytes: the encoder asks for them only while shapes
//! change, and scans the text for them when a shape changes unforeseen.

use super::{grid_end, Flat, Scan};
use crate::sinks::record::digits::Rounded;
use serde_json::ser::{CharEscape, Formatter};
use std::io::{self, Write};

/// `value`'s JSON with rounded floats (the bytes [`digits::to_vec`] writes)
/// into `json`, and that text taken apart into `flat` (both cleared first),
/// with field paths when `paths`. `like`: the shape it most likely has (the
/// frame before's), compared as it is written and copied in one piece when
/// it is the same (a frame's shape is its keys and brackets, most of its
/// text: built piece by piece, it was the largest part of its copying).
///
/// [`digits::to_vec`]: crate::sinks::record::digits::to_vec
pub fn write_flat<T: serde::Serialize>(
    value: &T,
    json: &mut Vec<u8>,
    flat: &mut Flat,
    paths: bool,
    like: Option<&[u8]>,
) -> bool {
    json.clear();
    flat.reset(paths);
    let mut f = FlatFormatter {
        out: json,
        flat,
        norm: Vec::new(),
        open: Vec::new(),
        in_key: false,
        key: 0..0,
        string: 0,
        deferred: None,
        shape: ShapeOut {
            like: like.unwrap_or_default(),
            matched: 0,
            diverged: like.is_none(),
        },
    };
    // Everything goes to the formatter's own buffer, where it can see
    // where each value starts and ends; serde's writer gets nothing.
    let mut ser = serde_json::Serializer::with_formatter(io::sink(), &mut f);
    let written = value.serialize(&mut ser).is_ok() && f.open.is_empty();
    f.shape.finish(&mut f.flat.shape);
    written
}

/// What an open object member or array goes back to when it closes.
enum Open {
    /// The field path's length before the member's key.
    Member(usize),
    /// Where the array started (the field path's length, its `[` in the
    /// text and in the shape), to take it back as one value when deferred.
    Array {
        norm: usize,
        out: usize,
        shape: usize,
    },
}

struct FlatFormatter<'a> {
    out: &'a mut Vec<u8>,
    flat: &'a mut Flat,
    /// The field path here: `/key` and `/#`, as the scan builds it.
    norm: Vec<u8>,
    open: Vec<Open>,
    /// Between an object key's start and end (its text is no value).
    in_key: bool,
    /// Where the last object key is in `out`, quotes and all.
    key: std::ops::Range<usize>,
    /// Where the string value being written starts.
    string: usize,
    /// The place in `open` of an array whose first value is an array (a
    /// histogram's `[[bound, count], ...]`, most of a frame's values):
    /// what is inside it is only written, and taken apart when it closes,
    /// as one histogram or, for any other array, by scanning its text.
    deferred: Option<usize>,
    /// Where `flat.shape` is written, or compared.
    shape: ShapeOut<'a>,
}

/// The shape being written, or, while it is the one it is compared with
/// (`like`), only how far it matched: `flat.shape` then holds nothing but
/// what a scan just wrote, and the shape so far is `like[..matched]`.
struct ShapeOut<'a> {
    like: &'a [u8],
    matched: usize,
    diverged: bool,
}

impl ShapeOut<'_> {
    /// Adds `b` to `shape`: while it is `like`'s, only how far it matched.
    fn put(&mut self, shape: &mut Vec<u8>, b: &[u8]) {
        if !self.diverged {
            if self.like.get(self.matched..self.matched + b.len()) == Some(b) {
                self.matched += b.len();
                return;
            }
            self.diverge(shape);
        }
        shape.extend_from_slice(b);
    }

    /// The shape is not `like`'s: from here on it is written out, after
    /// the part of `like` it matched (and before what a scan just wrote).
    fn diverge(&mut self, shape: &mut Vec<u8>) {
        self.diverged = true;
        let scanned = std::mem::take(shape);
        shape.extend_from_slice(&self.like[..self.matched]);
        shape.extend_from_slice(&scanned);
    }

    /// What a scan wrote into `shape`, compared like the rest.
    fn put_scanned(&mut self, shape: &mut Vec<u8>) {
        if self.diverged {
            return;
        }
        let scanned = std::mem::take(shape);
        self.put(shape, &scanned);
        if !self.diverged {
            // Matched: its buffer back, empty.
            *shape = scanned;
            shape.clear();
        }
    }

    /// Where the shape is now.
    fn len(&self, shape: &[u8]) -> usize {
        if self.diverged {
            shape.len()
        } else {
            self.matched
        }
    }

    /// Takes the shape back to `len` (a deferred array's `[`).
    fn truncate(&mut self, shape: &mut Vec<u8>, len: usize) {
        if self.diverged {
            shape.truncate(len);
        } else {
            self.matched = len;
        }
    }

    /// The whole shape in `shape`: `like` in one piece when it matched to
    /// its end, else what was written (after the part of `like` matched).
    fn finish(&mut self, shape: &mut Vec<u8>) {
        if self.diverged {
            return;
        }
        if self.matched == self.like.len() {
            shape.extend_from_slice(self.like);
        } else {
            // Its shape is a beginning of the other's.
            self.diverge(shape);
        }
    }
}

impl FlatFormatter<'_> {
    /// A value ends here that started at `start`: a leaf of its field path.
    fn leaf(&mut self, start: usize, hist: bool) {
        if self.deferred.is_some() {
            return;
        }
        self.flat.add_leaf(start..self.out.len(), &self.norm, hist);
        self.shape.put(&mut self.flat.shape, b"null");
    }

    /// A scalar written by `write`: a leaf, unless it is inside a key (an
    /// integer map key is written between quotes).
    fn scalar(&mut self, write: impl FnOnce(&mut Vec<u8>) -> io::Result<()>) -> io::Result<()> {
        let start = self.out.len();
        write(&mut *self.out)?;
        if !self.in_key {
            self.leaf(start, false);
        }
        Ok(())
    }

    fn structural(&mut self, b: u8) {
        self.out.push(b);
        if self.deferred.is_none() {
            self.shape.put(&mut self.flat.shape, &[b]);
        }
    }

    /// The deferred array at `start` in `out` has closed: one histogram
    /// value, or what the scan of its text takes from it.
    fn take_deferred_apart(&mut self, start: usize) -> io::Result<()> {
        if grid_end(self.out, start) == Some(self.out.len()) {
            self.leaf(start, true);
            return Ok(());
        }
        let mut scan = Scan {
            b: self.out,
            at: start,
            norm: self.norm.clone(),
            flat: &mut *self.flat,
        };
        if scan.value(0).is_none() || scan.at != self.out.len() {
            return Err(io::Error::other("an array the scan could not take apart"));
        }
        self.shape.put_scanned(&mut self.flat.shape);
        Ok(())
    }
}

macro_rules! scalars {
    ($($name:ident: $t:ty),* $(,)?) => {$(
        fn $name<W: ?Sized + Write>(&mut self, _: &mut W, v: $t) -> io::Result<()> {
            self.scalar(|out| Rounded.$name(out, v))
        }
    )*};
}

impl Formatter for &mut FlatFormatter<'_> {
    scalars!(
        write_bool: bool,
        write_i8: i8, write_i16: i16, write_i32: i32, write_i64: i64, write_i128: i128,
        write_u8: u8, write_u16: u16, write_u32: u32, write_u64: u64, write_u128: u128,
        write_f32: f32, write_f64: f64,
    );

    fn write_null<W: ?Sized + Write>(&mut self, _: &mut W) -> io::Result<()> {
        self.scalar(|out| Rounded.write_null(out))
    }

    fn write_number_str<W: ?Sized + Write>(&mut self, _: &mut W, v: &str) -> io::Result<()> {
        self.scalar(|out| Rounded.write_number_str(out, v))
    }

    fn write_raw_fragment<W: ?Sized + Write>(&mut self, _: &mut W, v: &str) -> io::Result<()> {
        self.scalar(|out| Rounded.write_raw_fragment(out, v))
    }

    fn begin_string<W: ?Sized + Write>(&mut self, _: &mut W) -> io::Result<()> {
        self.string = self.out.len();
        self.out.push(b'"');
        Ok(())
    }

    fn end_string<W: ?Sized + Write>(&mut self, _: &mut W) -> io::Result<()> {
        self.out.push(b'"');
        if !self.in_key {
            self.leaf(self.string, false);
        }
        Ok(())
    }

    fn write_string_fragment<W: ?Sized + Write>(&mut self, _: &mut W, s: &str) -> io::Result<()> {
        self.out.extend_from_slice(s.as_bytes());
        Ok(())
    }

    fn write_char_escape<W: ?Sized + Write>(&mut self, _: &mut W, e: CharEscape) -> io::Result<()> {
        Rounded.write_char_escape(&mut *self.out, e)
    }

    fn begin_array<W: ?Sized + Write>(&mut self, _: &mut W) -> io::Result<()> {
        if self.deferred.is_none() {
            if let Some(Open::Array { out, .. }) = self.open.last() {
                if *out + 1 == self.out.len() {
                    self.deferred = Some(self.open.len() - 1);
                }
            }
        }
        self.open.push(Open::Array {
            norm: self.norm.len(),
            out: self.out.len(),
            shape: self.shape.len(&self.flat.shape),
        });
        self.structural(b'[');
        self.norm.extend_from_slice(b"/#");
        Ok(())
    }

    fn begin_array_value<W: ?Sized + Write>(&mut self, _: &mut W, first: bool) -> io::Result<()> {
        if !first {
            self.structural(b',');
        }
        Ok(())
    }

    fn end_array<W: ?Sized + Write>(&mut self, _: &mut W) -> io::Result<()> {
        let Some(Open::Array { norm, out, shape }) = self.open.pop() else {
            return Err(io::Error::other("an array closed out of turn"));
        };
        self.norm.truncate(norm);
        self.out.push(b']');
        match self.deferred {
            // Inside a deferred array: only written.
            Some(at) if at < self.open.len() => Ok(()),
            // The deferred array itself (its first value was an array, so
            // nothing but its `[` reached the shape): taken apart now.
            Some(_) => {
                self.deferred = None;
                self.shape.truncate(&mut self.flat.shape, shape);
                self.take_deferred_apart(out)
            }
            // Any other array (a histogram, `[[...`, is always deferred).
            None => {
                self.shape.put(&mut self.flat.shape, b"]");
                Ok(())
            }
        }
    }

    fn begin_object<W: ?Sized + Write>(&mut self, _: &mut W) -> io::Result<()> {
        self.structural(b'{');
        Ok(())
    }

    fn begin_object_key<W: ?Sized + Write>(&mut self, _: &mut W, first: bool) -> io::Result<()> {
        if !first {
            self.structural(b',');
        }
        self.in_key = true;
        self.key.start = self.out.len();
        Ok(())
    }

    fn end_object_key<W: ?Sized + Write>(&mut self, _: &mut W) -> io::Result<()> {
        self.in_key = false;
        self.key.end = self.out.len();
        if self.deferred.is_none() {
            self.shape
                .put(&mut self.flat.shape, &self.out[self.key.clone()]);
        }
        Ok(())
    }

    fn begin_object_value<W: ?Sized + Write>(&mut self, _: &mut W) -> io::Result<()> {
        self.structural(b':');
        self.open.push(Open::Member(self.norm.len()));
        if self.deferred.is_none() && self.flat.paths {
            // The key as serde escaped it, without its quotes.
            let key = &self.out[self.key.start + 1..self.key.end - 1];
            self.norm.push(b'/');
            self.norm.extend_from_slice(key);
        }
        Ok(())
    }

    fn end_object_value<W: ?Sized + Write>(&mut self, _: &mut W) -> io::Result<()> {
        match self.open.pop() {
            Some(Open::Member(n)) => {
                self.norm.truncate(n);
                Ok(())
            }
            _ => Err(io::Error::other("a member closed out of turn")),
        }
    }

    fn end_object<W: ?Sized + Write>(&mut self, _: &mut W) -> io::Result<()> {
        self.structural(b'}');
        Ok(())
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::super::flatten;
    use super::*;
    use crate::sinks::record::{digits, Reader};
    use proptest::prelude::*;
    use serde_json::{json, Value};

    /// The one pass gives what the scan of `digits::to_vec`'s text gives;
    /// without paths, the same but them.
    fn same_as_the_scan<T: serde::Serialize>(v: &T) -> Result<(), TestCaseError> {
        let text = digits::to_vec(v).unwrap();
        let (mut json, mut flat) = (Vec::new(), Flat::default());
        prop_assert!(write_flat(v, &mut json, &mut flat, true, None));
        prop_assert_eq!(
            String::from_utf8_lossy(&json),
            String::from_utf8_lossy(&text)
        );
        let scanned = flatten(&text).unwrap();
        prop_assert_eq!(&flat, &scanned);
        // Compared with a shape as it is written: its own, one it begins,
        // one that begins it, another: the same shape comes out.
        let own = scanned.shape.clone();
        let half = own[..own.len() / 2].to_vec();
        let longer = [&own[..], b",null"].concat();
        for like in [&own, &half, &longer, &b"{\"x\":null}".to_vec()] {
            prop_assert!(write_flat(v, &mut json, &mut flat, true, Some(like)));
            prop_assert_eq!(&flat, &scanned);
        }
        prop_assert!(write_flat(v, &mut json, &mut flat, false, None));
        prop_assert!(!flat.paths && flat.norms.is_empty());
        prop_assert_eq!(&flat.shape, &scanned.shape);
        let places = |f: &Flat| {
            f.leaves
                .iter()
                .map(|l| (l.lit(), l.hist))
                .collect::<Vec<_>>()
        };
        prop_assert_eq!(places(&flat), places(&scanned));
        Ok(())
    }

    #[test]
    fn real_frames_come_apart_as_the_scan_takes_them() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");
        let mut frames = 0;
        for v in 1..=4 {
            let path = format!("{dir}/recording-v{v}.kitty");
            let mut r = Reader::open(std::path::Path::new(&path)).unwrap();
            for i in 0..r.index().len() {
                same_as_the_scan(&r.frame(i).unwrap()).unwrap();
                frames += 1;
            }
        }
        assert!(frames > 20, "{frames} frames");
    }

    #[test]
    fn every_kind_of_value_comes_apart_as_the_scan_takes_it() {
        let hist = json!([[3.0, 2], [640.0, 1]]);
        for v in [
            json!({"h": hist, "e": [], "o": {}, "n": null, "s": "q\"\\\u{1}é"}),
            json!([[hist], [hist, 1], [[1.0, 2]], [[3.0, 0]]]),
            json!({"a": [{"b": [1, -2, 1.5e300, 1e-7, true]}, {"b": []}], "w/k": {"x~": 1}}),
            json!({"h": [[3.0, 1], [3.0, 1]], "i": [[3, 1]]}),
        ] {
            same_as_the_scan(&v).unwrap();
        }
        // Integer map keys are written between quotes: no values.
        let keyed: std::collections::BTreeMap<u32, f64> = [(7, 0.5), (11, 2.25)].into();
        same_as_the_scan(&keyed).unwrap();
        // Floats serde writes as null.
        same_as_the_scan(&vec![f64::NAN, f64::INFINITY, 1.0]).unwrap();
    }

    /// Any JSON value, histograms on the grid and near it among them.
    pub(in crate::sinks::record::columns) fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            ".{0,6}".prop_map(Value::from),
            // Histograms on the grid and near it.
            proptest::collection::vec((0usize..40, 0u64..70), 0..5).prop_map(|b| {
                let mut at = 0;
                let pairs = b.into_iter().map(|(gap, n)| {
                    at += gap;
                    json!([crate::model::grid::bucket_bounds(at.min(255)).1, n])
                });
                Value::Array(pairs.collect())
            }),
        ];
        leaf.prop_recursive(4, 40, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                proptest::collection::btree_map("[a-z/#\"]{0,3}", inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn any_value_comes_apart_as_the_scan_takes_it(v in value()) {
            // Frames are objects; the scan takes no bare top-level scalar.
            same_as_the_scan(&json!({ "v": v }))?;
        }

        #[test]
        fn a_value_compared_with_anothers_shape_comes_apart_the_same(a in value(), b in value()) {
            let (a, b) = (json!({ "v": a }), json!({ "v": b }));
            let like = flatten(&digits::to_vec(&a).unwrap()).unwrap().shape;
            let (mut json, mut flat) = (Vec::new(), Flat::default());
            prop_assert!(write_flat(&b, &mut json, &mut flat, true, Some(&like)));
            prop_assert_eq!(Some(flat), flatten(&digits::to_vec(&b).unwrap()));
        }
    }
}
