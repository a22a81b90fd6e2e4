//! A frame's values straight from its types, for a frame shaped like the
//! one before (most are): each value's text as the frame's JSON would
//! hold it, and the frame's outline (its keys and brackets, as events) to
//! tell whether its shape is the one before's, with no JSON written, no
//! key escaped and no shape built or compared byte by byte, which were
//! most of what [`super::flat_writer`]'s pass costs. The bodies are the
//! same bytes either way (tested on every committed recording and on
//! random values). Measured with callgrind, the 8-rank ring's frames
//! written again three times: an append 1.59 M instructions against
//! 2.19 M (-27 %; zstd's part unchanged); the 3-rank fixture, whose shape
//! changes every frame (the typed pass then rests, [`TypedPass`]):
//! +3.7 %.

use super::{grid_end, Flat, Scan};
use crate::sinks::record::digits::Rounded;
use serde::ser::{self, Serialize};
use serde_json::ser::Formatter;
use std::fmt;

/// A frame's keys and brackets in the order they come. Two frames with
/// equal outlines have the same shape and the same values in the same
/// places: the outline holds each struct field's name by where it lives
/// (the name's own static text: one name, one place), each map key's text
/// and each array whose text was scanned, in full. Nothing is hashed, so
/// no key a watched process chooses can make two shapes look the same.
#[derive(Default, Debug, PartialEq)]
struct Outline {
    events: Vec<u64>,
    /// Map keys' texts and scanned arrays' shapes, their lengths in
    /// `events`.
    bytes: Vec<u8>,
}

/// The typed pass from frame to frame: the last frame's outline, what a
/// frame's is compared with, and how long the pass rests while shapes
/// churn.
#[derive(Default)]
pub(super) struct TypedPass {
    outline: Outline,
    prev: Outline,
    /// Whether `prev` is the last frame's outline.
    prev_known: bool,
    /// Where shapes change frame after frame (a node's events or flows
    /// churning), the pass is wasted work before the JSON pass (+17 % an
    /// append, measured on a fixture that changes every frame): from the
    /// second miss in a row it rests 1, 3, 7, then 15 frames, then tries
    /// two frames in a row again. Shapes that stopped changing are back on
    /// it within 17 frames; shapes that never stay cost it 2 frames in 17.
    misses: u32,
    rest: u32,
    /// Passes run, and frames they wrote (shaped like the one before).
    pub(super) runs: u64,
    pub(super) hits: u64,
}

impl TypedPass {
    /// `frame` starts a keyframe group: its outline is what the next
    /// frame's is compared with (`lits` and `flat` are scratch).
    pub(super) fn key<T: Serialize + ?Sized>(
        &mut self,
        frame: &T,
        lits: &mut Vec<u8>,
        flat: &mut Flat,
    ) {
        self.prev_known = write_leaves(frame, lits, flat, &mut self.prev);
    }

    /// What comes next is compared with nothing (a keyframe written by
    /// its JSON alone, a frame that failed).
    pub(super) fn forget(&mut self) {
        self.prev_known = false;
    }

    /// True when `frame` is shaped like the last frame: its values are
    /// then in `lits` and `flat.leaves` (as [`write_leaves`] writes them).
    /// Either way `frame` is the last frame from now on.
    pub(super) fn write<T: Serialize + ?Sized>(
        &mut self,
        frame: &T,
        lits: &mut Vec<u8>,
        flat: &mut Flat,
    ) -> bool {
        let run = self.rest == 0;
        self.rest = self.rest.saturating_sub(1);
        self.runs += run as u64;
        let written = run && write_leaves(frame, lits, flat, &mut self.outline);
        let compared = written && self.prev_known;
        let same = compared && self.outline == self.prev;
        if same {
            self.misses = 0;
            self.hits += 1;
        } else if compared {
            self.misses += 1;
            self.rest = (1 << (self.misses - 1).min(4)) - 1;
        }
        std::mem::swap(&mut self.outline, &mut self.prev);
        self.prev_known = written;
        same
    }
}

// Events (a tag, then what it says).
const LEAF: u64 = 0;
const SEQ: u64 = 1;
const END_SEQ: u64 = 2;
const MAP: u64 = 3;
const END_MAP: u64 = 4;
/// A struct field: the name's length (12 bits) and address (48 bits) in
/// the event itself, above its tag (one event where there were three: a
/// frame's outline is ~1,300 fields, written and compared every tick).
const FIELD: u64 = 5;
/// Tagged with the key's length (`KEY | len << 4`), its text in `bytes`.
const KEY: u64 = 6;
/// An array taken whole from its text: one histogram leaf.
const HIST: u64 = 7;
/// Tagged with its shape's length, that shape in `bytes`.
const SCANNED: u64 = 8;
/// A field whose name's address or length does not fit: then its address
/// and length, an event each.
const LONG_FIELD: u64 = 9;

/// `value`'s leaves into `flat.leaves` (their texts in `lits`, both
/// cleared first) and its outline into `outline`. False for what this pass
/// does not take (bytes, a map key that is neither a string nor an
/// integer): the caller writes the frame's JSON instead.
///
/// An array whose first value is an array (a histogram's `[[bound,
/// count], ...]`, an affinity's `[[cpu, cpu]]`) is written as JSON and
/// taken apart the way [`super::flat_writer`] takes it: one histogram
/// leaf, or the leaves its text's scan finds.
fn write_leaves<T: Serialize + ?Sized>(
    value: &T,
    lits: &mut Vec<u8>,
    flat: &mut Flat,
    outline: &mut Outline,
) -> bool {
    lits.clear();
    flat.reset(false);
    outline.events.clear();
    outline.bytes.clear();
    let mut w = LeafWriter {
        lits,
        flat,
        outline,
        first_in_seq: false,
        switched: None,
    };
    value.serialize(&mut w).is_ok()
}

struct LeafWriter<'a> {
    lits: &'a mut Vec<u8>,
    /// Its leaves; its shape is scratch for a scanned array's.
    flat: &'a mut Flat,
    outline: &'a mut Outline,
    /// Whether the next value is the first of an array.
    first_in_seq: bool,
    /// Set by an array that is an array's first value: the outer array is
    /// JSON text from there on, which started at this place in `lits`.
    switched: Option<usize>,
}

/// What this pass does not take.
#[derive(Debug)]
struct Unsupported;

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("not written by the typed pass")
    }
}

impl std::error::Error for Unsupported {}

impl ser::Error for Unsupported {
    fn custom<T: fmt::Display>(_: T) -> Self {
        Unsupported
    }
}

type Done = Result<(), Unsupported>;

impl LeafWriter<'_> {
    /// A value written by `write` (as the recording's JSON writes it).
    fn leaf(&mut self, write: impl FnOnce(&mut Vec<u8>) -> std::io::Result<()>) -> Done {
        self.first_in_seq = false;
        let start = self.lits.len();
        write(&mut *self.lits).map_err(|_| Unsupported)?;
        self.flat.add_leaf(start..self.lits.len(), b"", false);
        self.outline.events.push(LEAF);
        Ok(())
    }

    fn str_leaf(&mut self, s: &str) -> Done {
        self.leaf(|out| serde_json::to_writer(out, s).map_err(std::io::Error::other))
    }

    /// `value` as JSON text (inside an array that is JSON text).
    fn text<T: Serialize + ?Sized>(&mut self, value: &T) -> Done {
        let mut ser = serde_json::Serializer::with_formatter(&mut *self.lits, Rounded);
        value.serialize(&mut ser).map_err(|_| Unsupported)
    }

    /// The array whose JSON text is `lits[start..]`: one histogram leaf,
    /// or the leaves the scan of its text finds (its shape in the outline).
    fn take_text_apart(&mut self, start: usize) -> Done {
        let end = self.lits.len();
        if grid_end(self.lits, start) == Some(end) {
            self.flat.add_leaf(start..end, b"", true);
            self.outline.events.push(HIST);
            return Ok(());
        }
        let mark = self.flat.shape.len();
        let mut scan = Scan {
            b: self.lits,
            at: start,
            norm: Vec::new(),
            flat: &mut *self.flat,
        };
        if scan.value(0).is_none() || scan.at != end {
            return Err(Unsupported);
        }
        let shape = &self.flat.shape[mark..];
        self.outline
            .events
            .push(SCANNED | ((shape.len() as u64) << 4));
        self.outline.bytes.extend_from_slice(shape);
        self.flat.shape.truncate(mark);
        Ok(())
    }

    fn begin_seq(&mut self) -> Result<Seq<'_, Self>, Unsupported> {
        if std::mem::take(&mut self.first_in_seq) {
            // The first value of an array is an array: the outer one is
            // written as text from its `[` on, and so is this one.
            self.switched = Some(self.lits.len());
            self.lits.extend_from_slice(b"[[");
            return Ok(Seq {
                w: self,
                mode: Mode::Inner { first: true },
            });
        }
        self.outline.events.push(SEQ);
        self.first_in_seq = true;
        Ok(Seq {
            w: self,
            mode: Mode::Typed,
        })
    }

    fn begin_map(&mut self) -> &mut Self {
        self.first_in_seq = false;
        self.outline.events.push(MAP);
        self
    }

    fn field(&mut self, name: &'static str) {
        let e = &mut self.outline.events;
        let (at, len) = (name.as_ptr() as u64, name.len() as u64);
        if at < 1 << 48 && len < 1 << 12 {
            e.push(FIELD | len << 4 | at << 16);
        } else {
            e.extend_from_slice(&[LONG_FIELD, at, len]);
        }
    }

    /// A struct's field `name` and its value.
    fn member<T: Serialize + ?Sized>(&mut self, name: &'static str, v: &T) -> Done {
        self.field(name);
        v.serialize(self)
    }
}

/// An array being written.
struct Seq<'w, W> {
    w: &'w mut W,
    mode: Mode,
}

enum Mode {
    /// Value by value.
    Typed,
    /// As JSON text since its `[` at this place in `lits`.
    Text { start: usize },
    /// The first value of an array written as text: text too, the outer
    /// `[` and its own already written.
    Inner { first: bool },
}

impl<'w, 'a> Seq<'w, LeafWriter<'a>> {
    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Done {
        match &mut self.mode {
            Mode::Typed => {
                value.serialize(&mut *self.w)?;
                self.w.first_in_seq = false;
                if let Some(start) = self.w.switched.take() {
                    self.mode = Mode::Text { start };
                }
                Ok(())
            }
            Mode::Text { .. } => {
                self.w.lits.push(b',');
                self.w.text(value)
            }
            Mode::Inner { first } => {
                if !std::mem::take(first) {
                    self.w.lits.push(b',');
                }
                self.w.text(value)
            }
        }
    }

    /// Closes the array; the writer back.
    fn close(self) -> Result<&'w mut LeafWriter<'a>, Unsupported> {
        let w = self.w;
        match self.mode {
            Mode::Typed => {
                w.first_in_seq = false;
                w.outline.events.push(END_SEQ);
            }
            Mode::Text { start } => {
                w.lits.push(b']');
                w.take_text_apart(start)?;
                w.outline.events.push(END_SEQ);
            }
            Mode::Inner { .. } => w.lits.push(b']'),
        }
        Ok(w)
    }
}

macro_rules! scalars {
    ($($name:ident: $t:ty => $write:ident),* $(,)?) => {$(
        fn $name(self, v: $t) -> Done {
            self.leaf(|out| Rounded.$write(out, v))
        }
    )*};
}

impl<'a, 'b> ser::Serializer for &'a mut LeafWriter<'b> {
    type Ok = ();
    type Error = Unsupported;
    type SerializeSeq = Seq<'a, LeafWriter<'b>>;
    type SerializeTuple = Seq<'a, LeafWriter<'b>>;
    type SerializeTupleStruct = Seq<'a, LeafWriter<'b>>;
    type SerializeTupleVariant = Seq<'a, LeafWriter<'b>>;
    type SerializeMap = Self;
    type SerializeStruct = Self;
    type SerializeStructVariant = Self;

    scalars!(
        serialize_bool: bool => write_bool,
        serialize_i8: i8 => write_i8, serialize_i16: i16 => write_i16,
        serialize_i32: i32 => write_i32, serialize_i64: i64 => write_i64,
        serialize_i128: i128 => write_i128,
        serialize_u8: u8 => write_u8, serialize_u16: u16 => write_u16,
        serialize_u32: u32 => write_u32, serialize_u64: u64 => write_u64,
        serialize_u128: u128 => write_u128,
        serialize_f32: f32 => write_f32, serialize_f64: f64 => write_f64,
    );

    fn serialize_char(self, v: char) -> Done {
        self.str_leaf(v.encode_utf8(&mut [0; 4]))
    }

    fn serialize_str(self, v: &str) -> Done {
        self.str_leaf(v)
    }

    fn serialize_bytes(self, _: &[u8]) -> Done {
        Err(Unsupported)
    }

    fn serialize_none(self) -> Done {
        self.leaf(|out| Rounded.write_null(out))
    }

    fn serialize_some<T: Serialize + ?Sized>(self, v: &T) -> Done {
        v.serialize(self)
    }

    fn serialize_unit(self) -> Done {
        self.serialize_none()
    }

    fn serialize_unit_struct(self, _: &'static str) -> Done {
        self.serialize_none()
    }

    fn serialize_unit_variant(self, _: &'static str, _: u32, variant: &'static str) -> Done {
        self.str_leaf(variant)
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _: &'static str, v: &T) -> Done {
        v.serialize(self)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        v: &T,
    ) -> Done {
        self.begin_map().field(variant);
        v.serialize(&mut *self)?;
        self.outline.events.push(END_MAP);
        Ok(())
    }

    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, Unsupported> {
        self.begin_seq()
    }

    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, Unsupported> {
        self.begin_seq()
    }

    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct, Unsupported> {
        self.begin_seq()
    }

    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, Unsupported> {
        // `{"variant":[...]}`: the array is no array's first value.
        self.begin_map().field(variant);
        self.begin_seq()
    }

    fn serialize_map(self, _: Option<usize>) -> Result<Self, Unsupported> {
        Ok(self.begin_map())
    }

    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self, Unsupported> {
        Ok(self.begin_map())
    }

    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Self, Unsupported> {
        self.begin_map().field(variant);
        self.outline.events.push(MAP);
        Ok(self)
    }
}

macro_rules! seq_impls {
    ($($trait:ident :: $method:ident),*) => {$(
        impl ser::$trait for Seq<'_, LeafWriter<'_>> {
            type Ok = ();
            type Error = Unsupported;

            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Done {
                self.element(value)
            }

            fn end(self) -> Done {
                self.close().map(drop)
            }
        }
    )*};
}

seq_impls!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field
);

impl ser::SerializeTupleVariant for Seq<'_, LeafWriter<'_>> {
    type Ok = ();
    type Error = Unsupported;

    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Done {
        self.element(value)
    }

    fn end(self) -> Done {
        // The array's `]`, then the variant's `}`.
        self.close()?.outline.events.push(END_MAP);
        Ok(())
    }
}

impl ser::SerializeMap for &mut LeafWriter<'_> {
    type Ok = ();
    type Error = Unsupported;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Done {
        let at = self.outline.bytes.len();
        key.serialize(KeyText(&mut self.outline.bytes))?;
        let len = (self.outline.bytes.len() - at) as u64;
        self.outline.events.push(KEY | (len << 4));
        Ok(())
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Done {
        value.serialize(&mut **self)
    }

    fn end(self) -> Done {
        self.outline.events.push(END_MAP);
        Ok(())
    }
}

/// A struct's fields, then the brackets its end closes (a struct variant
/// is a struct inside the variant's object).
macro_rules! struct_impl {
    ($($trait:ident: $ends:expr),*) => {$(
        impl ser::$trait for &mut LeafWriter<'_> {
            type Ok = ();
            type Error = Unsupported;

            fn serialize_field<T: Serialize + ?Sized>(&mut self, name: &'static str, v: &T) -> Done {
                self.member(name, v)
            }

            fn end(self) -> Done {
                self.outline.events.extend_from_slice($ends);
                Ok(())
            }
        }
    )*};
}

struct_impl!(SerializeStruct: &[END_MAP], SerializeStructVariant: &[END_MAP, END_MAP]);

/// A map key's text, as JSON holds it between its quotes (unescaped: two
/// keys with the same text are one key): a string, or an integer's digits.
struct KeyText<'a>(&'a mut Vec<u8>);

macro_rules! int_keys {
    ($($name:ident: $t:ty),* $(,)?) => {$(
        fn $name(self, v: $t) -> Done {
            self.0.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
            Ok(())
        }
    )*};
}

macro_rules! no_keys {
    ($($name:ident($($arg:ty),*) -> $ret:ty),* $(,)?) => {$(
        fn $name(self, $(_: $arg),*) -> Result<$ret, Unsupported> {
            Err(Unsupported)
        }
    )*};
}

impl ser::Serializer for KeyText<'_> {
    type Ok = ();
    type Error = Unsupported;
    type SerializeSeq = ser::Impossible<(), Unsupported>;
    type SerializeTuple = ser::Impossible<(), Unsupported>;
    type SerializeTupleStruct = ser::Impossible<(), Unsupported>;
    type SerializeTupleVariant = ser::Impossible<(), Unsupported>;
    type SerializeMap = ser::Impossible<(), Unsupported>;
    type SerializeStruct = ser::Impossible<(), Unsupported>;
    type SerializeStructVariant = ser::Impossible<(), Unsupported>;

    int_keys!(
        serialize_i8: i8, serialize_i16: i16, serialize_i32: i32, serialize_i64: i64,
        serialize_i128: i128, serialize_u8: u8, serialize_u16: u16, serialize_u32: u32,
        serialize_u64: u64, serialize_u128: u128,
    );

    fn serialize_str(self, v: &str) -> Done {
        self.0.extend_from_slice(v.as_bytes());
        Ok(())
    }

    fn serialize_char(self, v: char) -> Done {
        self.serialize_str(v.encode_utf8(&mut [0; 4]))
    }

    fn serialize_unit_variant(self, _: &'static str, _: u32, variant: &'static str) -> Done {
        self.serialize_str(variant)
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _: &'static str, v: &T) -> Done {
        v.serialize(self)
    }

    fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Done {
        Err(Unsupported)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Done {
        Err(Unsupported)
    }

    no_keys!(
        serialize_bool(bool) -> (), serialize_f32(f32) -> (), serialize_f64(f64) -> (),
        serialize_bytes(&[u8]) -> (), serialize_none() -> (), serialize_unit() -> (),
        serialize_unit_struct(&'static str) -> (),
        serialize_seq(Option<usize>) -> Self::SerializeSeq,
        serialize_tuple(usize) -> Self::SerializeTuple,
        serialize_tuple_struct(&'static str, usize) -> Self::SerializeTupleStruct,
        serialize_tuple_variant(&'static str, u32, &'static str, usize) -> Self::SerializeTupleVariant,
        serialize_map(Option<usize>) -> Self::SerializeMap,
        serialize_struct(&'static str, usize) -> Self::SerializeStruct,
        serialize_struct_variant(&'static str, u32, &'static str, usize) -> Self::SerializeStructVariant,
    );
}

#[cfg(test)]
mod tests {
    use super::super::flat_writer::tests::value;
    use super::super::{flatten, Encoder};
    use crate::sinks::record::{digits, Reader};
    use proptest::prelude::*;
    use serde_json::{json, Value};

    /// Two encoders, one with the typed pass and one writing every delta's
    /// JSON, given the same frames: the same bodies. The number of deltas
    /// the typed pass wrote.
    fn same_bodies<T: serde::Serialize>(frames: &[T]) -> Result<u64, TestCaseError> {
        same_bodies_passes(frames).map(|(typed, _)| typed)
    }

    /// [`same_bodies`], and how many typed passes ran.
    fn same_bodies_passes<T: serde::Serialize>(frames: &[T]) -> Result<(u64, u64), TestCaseError> {
        let key = digits::to_vec(&frames[0]).unwrap();
        let mut typed = Encoder::default();
        let mut json = Encoder {
            reference: true,
            ..Encoder::default()
        };
        typed.key_of(&frames[0], &key);
        json.key_of(&frames[0], &key);
        for (n, f) in frames.iter().enumerate().skip(1) {
            let (a, b) = (typed.delta_of(f), json.delta_of(f));
            prop_assert_eq!(
                a.as_deref().map(String::from_utf8_lossy),
                b.as_deref().map(String::from_utf8_lossy),
                "frame {}",
                n
            );
        }
        prop_assert_eq!(json.typed.runs, 0);
        Ok((typed.typed.hits, typed.typed.runs))
    }

    /// Every frame of every committed recording, each against the one
    /// before as the writer encodes them: the typed pass wrote only frames
    /// shaped like the one before (the others go by their JSON; these
    /// fixtures' shapes change often, so it rests between tries).
    #[test]
    fn real_frames_give_the_bodies_their_json_gives() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");
        let (mut same_shape, mut typed) = (0, 0);
        for name in ["v1", "v2", "v3", "v4", "v5", "v5-h200", "v6"] {
            let path = format!("{dir}/recording-{name}.kitty");
            let (frames, errors) = Reader::open(std::path::Path::new(&path))
                .unwrap()
                .read_all();
            assert!(errors.is_empty(), "{name}: {errors:?}");
            typed += same_bodies(&frames).unwrap();
            let shapes: Vec<Vec<u8>> = frames
                .iter()
                .map(|f| flatten(&digits::to_vec(f).unwrap()).unwrap().shape)
                .collect();
            same_shape += shapes.windows(2).filter(|w| w[0] == w[1]).count() as u64;
        }
        assert!(typed <= same_shape && typed > 5, "{typed} of {same_shape}");
    }

    /// The typed pass sees a new shape wherever the JSON would: a key
    /// renamed, a value that turned into an array, an array one longer, a
    /// map key's text, an affinity's pairs; and none where it would not
    /// (a histogram with one more bucket is still one value).
    #[test]
    fn a_changed_shape_is_never_taken_for_the_one_before() {
        let base = json!({"a": 1, "b": [1, 2], "m": {"k": 1}, "aff": [[0, 1]], "h": [[3.0, 2]]});
        let changed = [
            json!({"a2": 1, "b": [1, 2], "m": {"k": 1}, "aff": [[0, 1]], "h": [[3.0, 2]]}),
            json!({"a": [1], "b": [1, 2], "m": {"k": 1}, "aff": [[0, 1]], "h": [[3.0, 2]]}),
            json!({"a": 1, "b": [1, 2, 3], "m": {"k": 1}, "aff": [[0, 1]], "h": [[3.0, 2]]}),
            json!({"a": 1, "b": [1, 2], "m": {"k\"": 1}, "aff": [[0, 1]], "h": [[3.0, 2]]}),
            json!({"a": 1, "b": [1, 2], "m": {"k": 1}, "aff": [[0, 1], [2, 3]], "h": [[3.0, 2]]}),
        ];
        for c in &changed {
            // base, base (typed), changed (its JSON), changed (typed).
            let typed = same_bodies(&[base.clone(), base.clone(), c.clone(), c.clone()]).unwrap();
            assert_eq!(typed, 2, "{c}");
        }
        let grown =
            json!({"a": 1, "b": [1, 2], "m": {"k": 1}, "aff": [[0, 1]], "h": [[3.0, 2], [4.0, 1]]});
        assert_eq!(same_bodies(&[base.clone(), base, grown]).unwrap(), 2);
    }

    /// Shapes that change every frame: the typed pass rests (2 passes in
    /// 17 frames once the misses add up); shapes that stay again: back on
    /// it within 17 frames, and every frame after.
    #[test]
    fn the_typed_pass_rests_while_shapes_churn() {
        let churn: Vec<Value> = (0..60)
            .map(|i| json!({ "v": vec![1; i % 7 + 1] }))
            .collect();
        let (typed, passes) = same_bodies_passes(&churn).unwrap();
        assert_eq!(typed, 0);
        assert!(passes <= 16, "{passes} typed passes in 59 deltas");
        let mut then_still = churn.clone();
        then_still.extend((0..40).map(|i| json!({ "v": [i, 2, 3] })));
        let (typed, _) = same_bodies_passes(&then_still).unwrap();
        assert!(typed >= 40 - 17, "{typed} of the last 40 typed");
    }

    proptest! {
        #[test]
        fn any_frames_give_the_bodies_their_json_gives(a in value(), b in value(), c in value()) {
            let f = |v: &Value| json!({ "v": v });
            // Same shapes in a row (typed), then new ones (by JSON).
            let typed = same_bodies(&[f(&a), f(&a), f(&b), f(&b), f(&c), f(&a)])?;
            prop_assert!(typed >= 2);
        }
    }
}
