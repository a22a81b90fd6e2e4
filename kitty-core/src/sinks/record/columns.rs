//! A frame as columns of changes against the frame before it (format 3's
//! delta records): the frame's shape (its JSON with every value taken out),
//! then its values grouped by field path across ranks and sockets, each
//! written as "the same as before", an integer's difference, or itself.
//! Consecutive frames share their shape and most values; a column of one
//! field compresses far better than the same numbers scattered between
//! keys (measured on an 8-rank job: 535 -> ~370 KB per minute with zstd).

mod flat_writer;
mod layout;
mod leaf_writer;

use layout::Layout;
use leaf_writer::TypedPass;

use crate::model::grid;
use serde_json::{Map, Number, Value};
use std::borrow::Cow;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::ops::Range;
use std::sync::Arc;

/// Latency histograms (`[[upper bound, count], ...]` on the probes'
/// log-linear grid, [`grid`]) travel as one dense token:
/// `{"h": [first bucket, "counts"]}`, each bucket's count one of
/// [`COUNT_DIGITS`] (base 62), a larger one as `.count.` (format 5; format
/// 4 wrote `{"h": [first bucket, count, count, ...]}`). Most counts of a
/// tick are small: a character each, with no separator, was a fifth less
/// after zstd than decimals and commas.
const HIST: &str = "h";

/// The counts 0..62 as one character each.
const COUNT_DIGITS: &[u8; 62] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";

/// Writes delta bodies: keeps the last frame's values (their texts as its
/// JSON holds them: written from the frame's types when its shape is the
/// one before's, else taken apart from the JSON serde wrote, compact and
/// well formed) to encode the next frame against. Its buffers live from
/// frame to frame.
#[derive(Default)]
pub struct Encoder {
    cur: Flat,
    prev: Flat,
    /// The last frame's JSON (or, written by the typed pass, its values'
    /// texts one after the other).
    prev_json: Vec<u8>,
    /// Whether there is a last frame to encode against.
    has_prev: bool,
    /// The buffer the next frame's JSON is written into.
    cur_json: Vec<u8>,
    /// Column ids by field path, for good: frames share their columns.
    ids: HashMap<Vec<u8>, usize, BuildHasherDefault<Words>>,
    names: Vec<Vec<u8>>,
    /// Per column, the last frame's values in order (where they are in
    /// `prev_json`: gathered from its leaves when a frame is encoded value
    /// by value), and how many of this frame's it has seen.
    prev_vals: Vec<Vec<Range<usize>>>,
    seen: Vec<usize>,
    /// Per column, this frame's tokens, and whether each of them was
    /// "the same as before".
    cols: Vec<Vec<u8>>,
    unchanged: Vec<bool>,
    /// The columns this frame wrote to, in the order it first did.
    touched: Vec<usize>,
    /// Those columns in the order a body lists them (by field path, as the
    /// reader sorts the shape's paths), and the columns that order is of
    /// (it is sorted again only when they change).
    order: Vec<usize>,
    order_of: Vec<usize>,
    /// Each column's place among every column's field path as the reader
    /// sorts them, remade only when a column is new (the set a frame
    /// touches changes often, and sorting it by its paths each time, each
    /// path unescaped into a new string, was ~4 % of an append).
    rank: Vec<u32>,
    /// Whether the last delta's shape was new: the next one is then
    /// taken apart with its field paths.
    shape_changed: bool,
    /// Writes a frame's values from its types when its shape is the last
    /// one's.
    typed: TypedPass,
    /// Every delta by its JSON, its columns gathered value by value: the
    /// reference the tests hold the typed pass and the layout to.
    reference: bool,
    /// While the shape stays, where its values go in a body (laid out by
    /// the first frame of the shape, encoded value by value).
    layout: Layout,
    laid_out: bool,
}

impl Encoder {
    /// A keyframe was written: the next delta is encoded against it.
    pub fn key(&mut self, json: &[u8]) {
        self.typed.forget();
        self.laid_out = false;
        self.prev_json.clear();
        let mut prev = std::mem::take(&mut self.prev);
        self.has_prev = flatten_into(&mut prev, json);
        if self.has_prev {
            self.assign_columns(&mut prev);
            self.prev_json.extend_from_slice(json);
        }
        self.prev = prev;
    }

    /// [`Encoder::key`] for `frame`, whose JSON is `json`: its outline
    /// kept too, for the next delta's typed pass.
    pub fn key_of<T: serde::Serialize>(&mut self, frame: &T, json: &[u8]) {
        self.key(json);
        let (mut lits, mut flat) = (
            std::mem::take(&mut self.cur_json),
            std::mem::take(&mut self.cur),
        );
        if self.has_prev {
            self.typed.key(frame, &mut lits, &mut flat);
        }
        (self.cur_json, self.cur) = (lits, flat);
    }

    /// How many deltas the typed pass wrote (the others went by their
    /// JSON: their shape was new).
    pub fn typed_deltas(&self) -> u64 {
        self.typed.hits
    }

    fn assign_columns(&mut self, f: &mut Flat) {
        for leaf in &mut f.leaves {
            let name = &f.norms[leaf.norm()];
            leaf.col = match self.ids.get(name) {
                Some(&id) => id as u32,
                None => {
                    self.ids.insert(name.to_vec(), self.names.len());
                    self.names.push(name.to_vec());
                    self.rank.clear();
                    self.cols.push(Vec::new());
                    self.unchanged.push(true);
                    self.prev_vals.push(Vec::new());
                    self.seen.push(0);
                    (self.names.len() - 1) as u32
                }
            };
        }
    }

    /// The delta body of `frame` against the last frame given, its JSON
    /// written and taken apart in one pass; that frame becomes this one.
    /// None (and no frame to encode against) for a value serde could not
    /// write.
    pub fn delta_of<T: serde::Serialize>(&mut self, frame: &T) -> Option<Vec<u8>> {
        if !self.has_prev {
            return None;
        }
        let mut cur = std::mem::take(&mut self.cur);
        let mut json = std::mem::take(&mut self.cur_json);
        // Most frames are shaped like the one before: their values written
        // from their types, their outline compared with the last one's.
        // Only when that differs is the frame's JSON written and taken
        // apart (the typed pass's values, written into the same buffers,
        // are then written over).
        let outlined = !self.reference && self.typed.write(frame, &mut json, &mut cur);
        let same = if outlined {
            // The shape passes on; the typed pass's scratch is kept.
            std::mem::swap(&mut cur.shape, &mut self.prev.shape);
            true
        } else {
            // While shapes change: field paths (what a new shape's columns
            // are found by) in the same pass, the shape built as it is
            // written. Else the shape compared with the last one as it is
            // written, the paths scanned for only when it changed.
            let paths = self.shape_changed;
            let like = (!paths).then_some(&self.prev.shape[..]);
            let written = flat_writer::write_flat(frame, &mut json, &mut cur, paths, like)
                && (paths || cur.shape == self.prev.shape || flatten_into(&mut cur, &json));
            if !written {
                self.has_prev = false;
                self.typed.forget();
                (self.cur, self.cur_json) = (cur, json);
                return None;
            }
            cur.shape == self.prev.shape
        };
        let body = match same && self.laid_out && !self.reference {
            true => self.encode_laid_out(cur, &json),
            false => self.encode(cur, &json, same),
        };
        // This frame's text is what the next one is paired with (its
        // buffer swapped in, not copied).
        self.cur_json = std::mem::replace(&mut self.prev_json, json);
        Some(body)
    }

    /// [`Encoder::delta_of`] for a frame's JSON text (as serde wrote it):
    /// the text scanned to take it apart. None for text serde did not
    /// write.
    #[cfg(test)]
    pub fn delta(&mut self, json: &[u8]) -> Option<Vec<u8>> {
        if !self.has_prev {
            return None;
        }
        self.typed.forget();
        let mut cur = std::mem::take(&mut self.cur);
        if !flatten_into(&mut cur, json) {
            self.has_prev = false;
            self.cur = cur;
            return None;
        }
        let same = cur.shape == self.prev.shape;
        let body = self.encode(cur, json, same);
        self.prev_json.clear();
        self.prev_json.extend_from_slice(json);
        Some(body)
    }

    /// The body of `cur` (taken apart from `json`, with its field paths
    /// unless its shape is the last frame's, `same`) against the last
    /// frame.
    ///
    /// A value is paired with the value of its column at the same place
    /// in that column in the frame before (the third rank's CPU with the
    /// third rank's CPU): the reader pairs them the same way.
    fn encode(&mut self, mut cur: Flat, json: &[u8], same: bool) -> Vec<u8> {
        let prev = std::mem::take(&mut self.prev);
        self.prev_vals.iter_mut().for_each(Vec::clear);
        for leaf in &prev.leaves {
            self.prev_vals[leaf.col()].push(leaf.lit());
        }
        // Consecutive frames often have one shape: the columns of their
        // values are then known by position; else by their field paths.
        self.shape_changed = !same;
        if same {
            for (c, p) in cur.leaves.iter_mut().zip(&prev.leaves) {
                c.col = p.col;
            }
        } else {
            debug_assert!(cur.paths, "a new shape's columns are found by path");
            self.assign_columns(&mut cur);
        }
        self.cols.iter_mut().for_each(Vec::clear);
        self.seen.iter_mut().for_each(|n| *n = 0);
        self.touched.clear();
        for leaf in &cur.leaves {
            let col = leaf.col();
            let at = self.seen[col];
            self.seen[col] += 1;
            let before = self.prev_vals[col]
                .get(at)
                .map(|r| &self.prev_json[r.clone()]);
            let out = &mut self.cols[col];
            if out.is_empty() {
                self.touched.push(col);
                self.unchanged[col] = true;
            } else {
                out.push(b',');
            }
            let kept = write_token(out, &json[leaf.lit()], leaf.hist, before);
            self.unchanged[col] &= kept;
        }
        if self.order_of != self.touched {
            self.order_of.clone_from(&self.touched);
            self.order.clone_from(&self.touched);
            if self.rank.len() != self.names.len() {
                let mut all: Vec<usize> = (0..self.names.len()).collect();
                let names = &self.names;
                all.sort_by_cached_key(|&id| unescaped(&names[id]));
                self.rank.resize(all.len(), 0);
                for (place, id) in all.into_iter().enumerate() {
                    self.rank[id] = place as u32;
                }
            }
            let rank = &self.rank;
            self.order.sort_unstable_by_key(|&id| rank[id]);
        }
        let mut body = Vec::with_capacity(json.len() / 4);
        body.push(b'[');
        // The shape only when it changed: null is "the one before".
        body.extend_from_slice(if same { b"null" } else { &cur.shape });
        body.extend_from_slice(b",[");
        for (n, &id) in self.order.iter().enumerate() {
            if n > 0 {
                body.push(b',');
            }
            // A column whose every value is the one before is one token.
            if self.unchanged[id] {
                body.push(b'0');
            } else {
                body.push(b'[');
                body.extend_from_slice(&self.cols[id]);
                body.push(b']');
            }
        }
        body.extend_from_slice(b"]]");
        self.layout
            .lay_out(&self.order, self.names.len(), &cur.leaves);
        self.laid_out = true;
        (self.cur, self.prev) = (prev, cur);
        body
    }

    /// [`Encoder::encode`] of a frame shaped like the last one, laid out.
    fn encode_laid_out(&mut self, mut cur: Flat, json: &[u8]) -> Vec<u8> {
        let prev = std::mem::take(&mut self.prev);
        self.shape_changed = false;
        for (c, p) in cur.leaves.iter_mut().zip(&prev.leaves) {
            c.col = p.col;
        }
        let body = self
            .layout
            .body(&cur.leaves, json, &prev.leaves, &self.prev_json);
        (self.cur, self.prev) = (prev, cur);
        body
    }
}

/// A column's field path as the reader has it (keys unescaped): the order
/// a body lists its columns in.
fn unescaped(name: &[u8]) -> String {
    if !name.contains(&b'\\') {
        return String::from_utf8_lossy(name).into_owned();
    }
    let mut quoted = Vec::with_capacity(name.len() + 2);
    quoted.push(b'"');
    quoted.extend_from_slice(name);
    quoted.push(b'"');
    // Names are keys as serde escaped them: they read back.
    serde_json::from_slice(&quoted).unwrap_or_else(|_| String::from_utf8_lossy(name).into_owned())
}

/// A hasher for field paths (short byte strings, hashed a word at a time;
/// SipHash was a tenth of a delta's time here). Not for hostile keys:
/// these are kitty's own field names.
#[derive(Default)]
struct Words(u64);

impl Hasher for Words {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.mix(u64::from_le_bytes(c.try_into().expect("eight bytes")));
        }
        let mut last = [0u8; 8];
        last[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
        self.mix(u64::from_le_bytes(last) ^ ((bytes.len() as u64) << 56));
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

impl Words {
    fn mix(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

/// One value as its token: "the same" (`[]`, then true), an integer's
/// difference (`[d]`, where shorter than the number), a dense histogram,
/// or itself.
fn write_token(out: &mut Vec<u8>, lit: &[u8], hist: bool, before: Option<&[u8]>) -> bool {
    use std::io::Write;
    if before == Some(lit) {
        out.extend_from_slice(b"[]");
        return true;
    }
    if let (Some(c), Some(p)) = (int_text(lit), before.and_then(int_text)) {
        if let Ok(d) = i64::try_from(c - p) {
            if decimal_len(d) < lit.len() {
                out.push(b'[');
                out.extend_from_slice(itoa::Buffer::new().format(d).as_bytes());
                out.push(b']');
                return false;
            }
        }
    }
    if hist {
        // `{"h":[first bucket,"counts"]}`, a character a bucket.
        out.extend_from_slice(br#"{"h":["#);
        let mut next = None;
        grid_pairs(lit, |i, n| {
            match next {
                None => {
                    out.extend_from_slice(itoa::Buffer::new().format(i).as_bytes());
                    out.extend_from_slice(b",\"");
                }
                Some(from) => (from..i).for_each(|_| out.push(COUNT_DIGITS[0])),
            }
            match COUNT_DIGITS.get(n as usize) {
                Some(&c) => out.push(c),
                None => {
                    let _ = write!(out, ".{n}.");
                }
            }
            next = Some(i + 1);
        });
        out.extend_from_slice(b"\"]}");
        return false;
    }
    out.extend_from_slice(lit);
    false
}

fn decimal_len(d: i64) -> usize {
    let mut len = if d < 0 { 2 } else { 1 };
    let mut a = d.unsigned_abs();
    while a >= 10 {
        a /= 10;
        len += 1;
    }
    len
}

/// An integer literal's value (serde writes floats with a '.' or an 'e').
fn int_text(lit: &[u8]) -> Option<i128> {
    let (neg, digits) = match lit.strip_prefix(b"-") {
        Some(d) => (true, d),
        None => (false, lit),
    };
    if digits.is_empty() || digits.len() > 20 {
        return None;
    }
    let mut v: i128 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v * 10 + (c - b'0') as i128;
    }
    Some(if neg { -v } else { v })
}

/// A frame's JSON taken apart: its shape, and its values in text order
/// (where they are in the JSON), each with its field path (its column)
/// when `paths`.
#[derive(Default, Debug, PartialEq)]
struct Flat {
    shape: Vec<u8>,
    norms: Vec<u8>,
    leaves: Vec<Leaf>,
    paths: bool,
}

impl Flat {
    /// Empty (its buffers kept), to be taken apart with field paths or not.
    fn reset(&mut self, paths: bool) {
        self.shape.clear();
        self.norms.clear();
        self.leaves.clear();
        self.paths = paths;
    }

    /// A value at `lit` in the text, of the field path `path` (kept only
    /// when `paths`); not its place in the shape.
    fn add_leaf(&mut self, lit: Range<usize>, path: &[u8], hist: bool) {
        let norm = if self.paths {
            self.norms.extend_from_slice(path);
            self.norms.len() - path.len()..self.norms.len()
        } else {
            0..0
        };
        self.leaves.push(Leaf {
            lit: span(lit),
            norm: span(norm),
            col: 0,
            hist,
        });
    }
}

/// A value of a frame: where its text is, its field path and its column.
/// 24 bytes, in 32-bit places (a frame's text is less than the 4 GB a
/// record's length can say): a frame has ~1,500 of them, and the last
/// frame's and this one's are read every tick, cold. With `usize` ranges
/// a leaf took 56.
#[derive(Debug, PartialEq)]
struct Leaf {
    lit: [u32; 2],
    norm: [u32; 2],
    /// Its column's id, once known.
    col: u32,
    /// A histogram on the grid (written as a dense token when it changed).
    hist: bool,
}

impl Leaf {
    /// Where its text is.
    fn lit(&self) -> Range<usize> {
        self.lit[0] as usize..self.lit[1] as usize
    }

    /// Where its field path is in its [`Flat`]'s `norms`.
    fn norm(&self) -> Range<usize> {
        self.norm[0] as usize..self.norm[1] as usize
    }

    fn col(&self) -> usize {
        self.col as usize
    }
}

/// A place in a frame's text as a leaf keeps it.
fn span(r: Range<usize>) -> [u32; 2] {
    [r.start as u32, r.end as u32]
}

/// Takes serde's JSON of a frame apart into `flat` (its buffers kept);
/// false for text serde did not write.
fn flatten_into(flat: &mut Flat, json: &[u8]) -> bool {
    flat.reset(true);
    let mut s = Scan {
        b: json,
        at: 0,
        norm: Vec::new(),
        flat,
    };
    s.value(0).is_some() && s.at == json.len()
}

#[cfg(test)]
fn flatten(json: &[u8]) -> Option<Flat> {
    let mut f = Flat::default();
    flatten_into(&mut f, json).then_some(f)
}

/// A frame's shape, with the field paths of its values in the order a body
/// lists their columns: found once per shape, for every delta after it
/// that leaves its shape out (most do) to share.
#[derive(Debug, PartialEq)]
pub struct Shape {
    value: Value,
    paths: Vec<String>,
}

impl Shape {
    pub fn new(value: Value) -> Arc<Shape> {
        let mut paths = std::collections::BTreeSet::new();
        leaf_paths(&value, &mut String::new(), &mut paths);
        Arc::new(Shape {
            value,
            paths: paths.into_iter().collect(),
        })
    }
}

/// The shape of a keyframe's JSON (what the delta after it may leave out).
pub fn shape(json: &[u8]) -> Result<Arc<Shape>, String> {
    let mut f = Flat::default();
    if !flatten_into(&mut f, json) {
        return Err("keyframe: not a frame's JSON".into());
    }
    let value = serde_json::from_slice(&f.shape).map_err(|e| format!("keyframe shape: {e}"))?;
    Ok(Shape::new(value))
}

struct Scan<'a> {
    b: &'a [u8],
    at: usize,
    /// The field path here: `/key` and `/#` (the column's name).
    norm: Vec<u8>,
    /// Its leaves get their field paths when `flat.paths`.
    flat: &'a mut Flat,
}

impl Scan<'_> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.at).copied()
    }

    fn value(&mut self, depth: usize) -> Option<()> {
        if depth > 128 {
            return None;
        }
        match self.peek()? {
            b'{' => self.object(depth),
            b'[' => {
                let start = self.at;
                if let Some(end) = grid_end(self.b, start) {
                    self.at = end;
                    self.leaf(start, true);
                    Some(())
                } else {
                    self.array(depth)
                }
            }
            b'"' => {
                let start = self.at;
                self.string()?;
                self.leaf(start, false);
                Some(())
            }
            _ => {
                let start = self.at;
                let n = self.b[start..]
                    .iter()
                    .position(|&c| matches!(c, b',' | b']' | b'}'))?;
                if n == 0 {
                    return None;
                }
                self.at += n;
                self.leaf(start, false);
                Some(())
            }
        }
    }

    fn leaf(&mut self, start: usize, hist: bool) {
        self.flat.add_leaf(start..self.at, &self.norm, hist);
        self.flat.shape.extend_from_slice(b"null");
    }

    fn string(&mut self) -> Option<()> {
        self.at += 1;
        loop {
            let n = self
                .b
                .get(self.at..)?
                .iter()
                .position(|&c| c == b'"' || c == b'\\')?;
            self.at += n;
            if self.b[self.at] == b'"' {
                self.at += 1;
                return Some(());
            }
            self.at += 2;
        }
    }

    /// Past the `open` bracket, and its `close` too when nothing is
    /// between (true).
    fn open(&mut self, open: u8, close: u8) -> Option<bool> {
        self.at += 1;
        self.flat.shape.push(open);
        if self.peek()? != close {
            return Some(false);
        }
        self.at += 1;
        self.flat.shape.push(close);
        Some(true)
    }

    fn object(&mut self, depth: usize) -> Option<()> {
        if self.open(b'{', b'}')? {
            return Some(());
        }
        loop {
            let k0 = self.at;
            self.string()?;
            let key = &self.b[k0 + 1..self.at - 1];
            self.flat.shape.extend_from_slice(&self.b[k0..self.at]);
            if self.peek()? != b':' {
                return None;
            }
            self.at += 1;
            self.flat.shape.push(b':');
            let n = self.norm.len();
            self.norm.push(b'/');
            self.norm.extend_from_slice(key);
            self.value(depth + 1)?;
            self.norm.truncate(n);
            if self.next_or_close(b'}')? {
                return Some(());
            }
        }
    }

    /// Past the `,` between two members (false) or the `close` after the
    /// last (true); None for anything else.
    fn next_or_close(&mut self, close: u8) -> Option<bool> {
        let c = self.peek().filter(|&c| c == b',' || c == close)?;
        self.at += 1;
        self.flat.shape.push(c);
        Some(c == close)
    }

    fn array(&mut self, depth: usize) -> Option<()> {
        if self.open(b'[', b']')? {
            return Some(());
        }
        let n0 = self.norm.len();
        self.norm.extend_from_slice(b"/#");
        loop {
            self.value(depth + 1)?;
            if self.next_or_close(b']')? {
                break;
            }
        }
        self.norm.truncate(n0);
        Some(())
    }
}

/// Where a histogram on the grid that starts at `start` ends (its text
/// is `[[bound,count],...]`, as [`grid_pairs`] accepts).
fn grid_end(b: &[u8], start: usize) -> Option<usize> {
    if b.get(start + 1) != Some(&b'[') {
        return None;
    }
    let mut depth = 0;
    for (n, &c) in b[start..].iter().enumerate() {
        match c {
            b'[' => depth += 1,
            b']' => {
                depth -= 1;
                if depth == 0 {
                    let end = start + n + 1;
                    return grid_pairs(&b[start..end], |_, _| {}).then_some(end);
                }
            }
            b'"' | b'{' => return None,
            _ => {}
        }
    }
    None
}

/// Calls `each(grid index, count)` for the pairs of a histogram's text
/// when it is on the grid: bounds written as floats (`640.0`), strictly
/// increasing, every count above zero; true if it is (then the dense form
/// gives back exactly this text).
fn grid_pairs(lit: &[u8], mut each: impl FnMut(usize, u64)) -> bool {
    let Some(mut rest) = lit.strip_prefix(b"[") else {
        return false;
    };
    let mut last: Option<usize> = None;
    loop {
        let Some(r) = rest.strip_prefix(b"[") else {
            return false;
        };
        let Some((b, r)) = digits_then(r, b".0,") else {
            return false;
        };
        let Some((n, r)) = digits_then(r, b"]") else {
            return false;
        };
        let Some(i) = grid::bucket_with_upper(b) else {
            return false;
        };
        if n == 0 || last.is_some_and(|l| i <= l) {
            return false;
        }
        each(i, n);
        last = Some(i);
        match r {
            [b',', more @ ..] => rest = more,
            b"]" => return true,
            _ => return false,
        }
    }
}

/// A decimal number as serde writes it (no leading zero), then `end`.
fn digits_then<'a>(b: &'a [u8], end: &[u8]) -> Option<(u64, &'a [u8])> {
    let n = b.iter().take_while(|c| c.is_ascii_digit()).count();
    if n == 0 || n > 19 || (n > 1 && b[0] == b'0') {
        return None;
    }
    let v = b[..n].iter().fold(0u64, |v, &c| v * 10 + (c - b'0') as u64);
    Some((v, b[n..].strip_prefix(end)?))
}

/// A map by field path. foldhash, not std's SipHash: a replay looks up
/// three or four paths a value, and SipHash was a quarter of reading a
/// frame. Its seed is still random per process, and a recording's paths
/// are bounded by its frames' size.
type ByPath<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// A frame's values by column (field path), in order: what the next
/// frame's values are paired with.
pub type Columns = ByPath<String, Vec<Value>>;

/// The columns of a keyframe, from its shape and its values.
pub fn columns_of(shape: &Shape, value: &Value) -> Result<Columns, String> {
    fn walk(s: &Value, v: &Value, path: &mut String, out: &mut Columns) -> Result<(), String> {
        let bad = || "keyframe: its values do not fit its shape".to_string();
        match s {
            Value::Object(m) => {
                for (k, x) in m {
                    let at = path.len();
                    path.push('/');
                    path.push_str(k);
                    walk(x, v.get(k).ok_or_else(bad)?, path, out)?;
                    path.truncate(at);
                }
            }
            Value::Array(a) => {
                let at = path.len();
                path.push_str("/#");
                for (i, x) in a.iter().enumerate() {
                    walk(x, v.get(i).ok_or_else(bad)?, path, out)?;
                }
                path.truncate(at);
            }
            _ => out.entry(path.clone()).or_default().push(v.clone()),
        }
        Ok(())
    }
    let mut out = Columns::default();
    walk(&shape.value, value, &mut String::new(), &mut out)?;
    Ok(out)
}

/// What a delta body gives, against the frame before it (its columns and
/// shape): the frame, its shape and its columns.
///
/// Its columns are a list in the order of the shape's field paths (format
/// 6: a column whose every value is the one before as `0`), or a map by
/// field path (formats 3 to 5).
pub fn decode(
    body: &[u8],
    prev: &Columns,
    prev_shape: &Arc<Shape>,
) -> Result<(Value, Arc<Shape>, Columns), String> {
    let body: Value = serde_json::from_slice(body).map_err(|e| format!("delta body: {e}"))?;
    let Value::Array(mut parts) = body else {
        return Err("delta body: not a [shape, columns] pair".into());
    };
    if parts.len() != 2 {
        return Err("delta body: not a [shape, columns] pair".into());
    }
    let cols = parts.pop().expect("two");
    let shape = match parts.pop().expect("two") {
        Value::Null => Arc::clone(prev_shape),
        s => Shape::new(s),
    };
    let list = |c: Value| match c {
        Value::Array(a) => Ok(Tokens::List(a.into_iter())),
        _ => Err("delta body: a column is not a list".to_string()),
    };
    let tokens: ByPath<Cow<str>, Tokens> = match cols {
        Value::Object(cols) => cols
            .into_iter()
            .map(|(name, c)| Ok((Cow::Owned(name), list(c)?)))
            .collect::<Result<_, String>>()?,
        Value::Array(cols) => {
            let paths = &shape.paths;
            if paths.len() != cols.len() {
                return Err(format!(
                    "delta body: {} columns for {} field paths",
                    cols.len(),
                    paths.len()
                ));
            }
            // By the shape's own paths, not copies of them per delta.
            paths
                .iter()
                .map(|p| Cow::Borrowed(p.as_str()))
                .zip(cols)
                .map(|(name, c)| match c {
                    Value::Number(n) if n.as_u64() == Some(0) => Ok((name, Tokens::Unchanged)),
                    c => Ok((name, list(c)?)),
                })
                .collect::<Result<_, String>>()?
        }
        _ => return Err("delta body: columns are neither a list nor a map".into()),
    };
    let mut cursor = Cursor {
        tokens,
        prev,
        out: Columns::default(),
    };
    let mut path = String::new();
    let frame = fill(&shape.value, &mut path, &mut cursor)?;
    // The cursor's tokens borrow the shape's paths: its values are taken
    // out before the shape is handed back.
    let out = cursor.out;
    Ok((frame, shape, out))
}

/// The field paths of a shape's values (the names of its columns).
fn leaf_paths(shape: &Value, path: &mut String, out: &mut std::collections::BTreeSet<String>) {
    match shape {
        Value::Object(m) => {
            for (k, x) in m {
                let at = path.len();
                path.push('/');
                path.push_str(k);
                leaf_paths(x, path, out);
                path.truncate(at);
            }
        }
        Value::Array(a) => {
            let at = path.len();
            path.push_str("/#");
            a.iter().for_each(|x| leaf_paths(x, path, out));
            path.truncate(at);
        }
        _ => {
            if !out.contains(path.as_str()) {
                out.insert(path.clone());
            }
        }
    }
}

/// A column's tokens in a body.
enum Tokens {
    List(std::vec::IntoIter<Value>),
    /// Every value the one before.
    Unchanged,
}

fn as_int(v: &Value) -> Option<i128> {
    let n = v.as_number()?;
    n.as_u64()
        .map(i128::from)
        .or_else(|| n.as_i64().map(i128::from))
}

/// The sparse pairs of a dense histogram token.
fn from_grid(dense: &[Value]) -> Result<Value, String> {
    let bad = || "delta body: a damaged histogram".to_string();
    let (lo, counts) = dense.split_first().ok_or_else(bad)?;
    let lo = lo.as_u64().ok_or_else(bad)? as usize;
    let counts: Vec<u64> = match counts {
        [Value::String(text)] => count_digits(text.as_bytes()).ok_or_else(bad)?,
        numbers => numbers
            .iter()
            .map(Value::as_u64)
            .collect::<Option<_>>()
            .ok_or_else(bad)?,
    };
    if lo.saturating_add(counts.len()) > grid::BUCKETS {
        return Err(bad());
    }
    let mut pairs = Vec::new();
    for (k, &n) in counts.iter().enumerate() {
        if n > 0 {
            let b = Number::from_f64(grid::bucket_bounds(lo + k).1).ok_or_else(bad)?;
            pairs.push(Value::Array(vec![Value::Number(b), Value::from(n)]));
        }
    }
    Ok(Value::Array(pairs))
}

/// The counts of a histogram's text form (see [`HIST`]).
fn count_digits(mut text: &[u8]) -> Option<Vec<u64>> {
    let mut counts = Vec::new();
    while let Some((&c, rest)) = text.split_first() {
        let (n, rest) = match c {
            b'.' => digits_then(rest, b".")?,
            _ => (COUNT_DIGITS.iter().position(|&d| d == c)? as u64, rest),
        };
        counts.push(n);
        text = rest;
    }
    Some(counts)
}

/// A body being read: its tokens by column, the frame before's values,
/// and this frame's, as they are resolved.
struct Cursor<'a> {
    /// By the shape's paths (a map-of-columns body's own names).
    tokens: ByPath<Cow<'a, str>, Tokens>,
    prev: &'a Columns,
    out: Columns,
}

impl Cursor<'_> {
    /// The next value of the column at `path`.
    fn next(&mut self, path: &str) -> Result<Value, String> {
        let token = match self.tokens.get_mut(path) {
            Some(Tokens::List(c)) => c.next(),
            Some(Tokens::Unchanged) => Some(Value::Array(Vec::new())),
            None => None,
        }
        .ok_or_else(|| format!("delta body: column {path} ends early"))?;
        let column = self.out.get_mut(path);
        let done = column.as_ref().map_or(0, |c| c.len());
        let before = self.prev.get(path).and_then(|c| c.get(done));
        let v = resolve(token, before, path)?;
        match column {
            Some(c) => c.push(v.clone()),
            None => {
                self.out.insert(path.to_string(), vec![v.clone()]);
            }
        }
        Ok(v)
    }
}

/// The frame from its shape and its columns.
fn fill(shape: &Value, path: &mut String, cur: &mut Cursor) -> Result<Value, String> {
    match shape {
        Value::Object(m) => {
            let mut out = Map::new();
            for (k, x) in m {
                let at = path.len();
                path.push('/');
                path.push_str(k);
                let v = fill(x, path, cur)?;
                path.truncate(at);
                out.insert(k.clone(), v);
            }
            Ok(Value::Object(out))
        }
        Value::Array(a) => {
            let at = path.len();
            path.push_str("/#");
            let out = a
                .iter()
                .map(|x| fill(x, path, cur))
                .collect::<Result<_, _>>()?;
            path.truncate(at);
            Ok(Value::Array(out))
        }
        Value::Null => cur.next(path),
        _ => Err("delta body: a value inside the shape".into()),
    }
}

/// One token against the value at its place in the frame before.
fn resolve(token: Value, prev: Option<&Value>, path: &str) -> Result<Value, String> {
    let before = || prev.ok_or_else(|| format!("delta body: {path} has no value before"));
    match token {
        Value::Array(a) if a.is_empty() => before().cloned(),
        Value::Array(a) if a.len() == 1 => {
            let d = as_int(&a[0]).ok_or_else(|| format!("delta body: {path}: a bad difference"))?;
            let p = as_int(before()?)
                .ok_or_else(|| format!("delta body: {path}: not a number before"))?;
            let v = p + d;
            if let Ok(u) = u64::try_from(v) {
                Ok(Value::from(u))
            } else if let Ok(i) = i64::try_from(v) {
                Ok(Value::from(i))
            } else {
                Err(format!("delta body: {path}: out of range"))
            }
        }
        Value::Object(m) => match m.get(HIST) {
            Some(Value::Array(dense)) if m.len() == 1 => from_grid(dense),
            _ => Err(format!("delta body: {path}: an unknown token")),
        },
        Value::Array(_) => Err(format!("delta body: {path}: an unknown token")),
        scalar => Ok(scalar),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `cur` encoded against `prev` and read back; the body.
    fn round_trip(cur: &Value, prev: &Value) -> String {
        let mut e = Encoder::default();
        let key = serde_json::to_vec(prev).unwrap();
        e.key(&key);
        let body = e.delta(&serde_json::to_vec(cur).unwrap()).unwrap();
        let sh = shape(&key).unwrap();
        let cols = columns_of(&sh, prev).unwrap();
        let (got, _, _) = decode(&body, &cols, &sh).unwrap();
        assert_eq!(&got, cur);
        String::from_utf8(body).unwrap()
    }

    /// The paths of `frame`'s columns, in the order a body lists them.
    fn paths_of(frame: &Value) -> Vec<String> {
        shape(&serde_json::to_vec(frame).unwrap())
            .unwrap()
            .paths
            .clone()
    }

    fn column_count(frame: &Value) -> usize {
        paths_of(frame).len()
    }

    /// The column at `path` in a body of `frame`.
    fn column_of(body: &str, frame: &Value, path: &str) -> Value {
        let v: Value = serde_json::from_str(body).unwrap();
        let at = paths_of(frame).iter().position(|p| p == path).unwrap();
        v[1][at].clone()
    }

    /// Columns are listed by their field paths as the reader has them: keys
    /// that serde escapes sort as their text, not as their escapes (`x"`
    /// before `xA`, though `x\"` comes after it).
    #[test]
    fn escaped_keys_keep_their_columns_apart() {
        let a = json!({"x\"": 1, "xA": 2, "x\\": [3, 4], "x\n": "n"});
        let b = json!({"x\"": 5, "xA": 2, "x\\": [3, 7], "x\n": "m"});
        round_trip(&b, &a);
        round_trip(&a, &b);
        assert_eq!(paths_of(&a), ["/x\n", "/x\"", "/xA", "/x\\/#"]);
    }

    /// A run of frames as a recording holds them: a keyframe, then each
    /// frame against the one before, read back the same way.
    #[test]
    fn a_run_of_frames_reads_back_frame_by_frame() {
        let h = |n: u64| json!([[3.0, n], [9.0, 1]]);
        let frames = [
            frame(100, 1.5, h(1), false),
            frame(150, 1.5, h(2), false),
            frame(150, 2.5, h(2), true),
            frame(190, 2.5, h(3), true),
            frame(200, 0.5, json!([]), false),
            frame(210, 0.5, json!([]), false),
            // Two new shapes in a row: the second is taken apart with its
            // paths in the one pass.
            frame(220, 0.5, h(4), true),
            frame(230, 0.5, json!([]), false),
        ];
        let mut e = Encoder::default();
        let key = serde_json::to_vec(&frames[0]).unwrap();
        e.key(&key);
        // The writer's way (the frame written and taken apart in one pass,
        // its paths scanned only for a new shape) gives the same bodies.
        let mut one_pass = Encoder::default();
        one_pass.key(&key);
        let prev_shape = shape(&key).unwrap();
        let (mut prev, mut prev_shape) = (columns_of(&prev_shape, &frames[0]).unwrap(), prev_shape);
        for (n, f) in frames.iter().enumerate().skip(1) {
            let body = e.delta(&serde_json::to_vec(f).unwrap()).unwrap();
            assert_eq!(one_pass.delta_of(f), Some(body.clone()), "frame {n}");
            let text = String::from_utf8(body.clone()).unwrap();
            // The shape is left out exactly when it is the one before.
            let same_shape = [1, 3, 5].contains(&n);
            assert_eq!(text.starts_with("[null,"), same_shape, "frame {n}: {text}");
            let (got, s, cols) = decode(&body, &prev, &prev_shape).unwrap();
            assert_eq!(&got, f, "frame {n}");
            (prev, prev_shape) = (cols, s);
        }
    }

    fn frame(c: u64, rate: f64, h: Value, extra: bool) -> Value {
        let mut ranks = vec![
            json!({"pid": 1, "c": c, "rate": rate, "h": h, "x": null, "s": "py\"th\\on"}),
            json!({"pid": 2, "c": 10, "rate": 2.5, "h": [], "x": true, "s": "b"}),
        ];
        if extra {
            ranks.push(json!({"pid": 3, "c": u64::MAX, "rate": 0.1, "h": [[2.0, 1]], "new": "f"}));
        }
        json!({"seq": c % 7, "node": "n", "t": -3, "ranks": ranks, "aff": [[0, 1]], "w/k": {"a": 1}})
    }

    #[test]
    fn frames_round_trip_through_every_kind_of_change() {
        let prev = frame(366542849, 1.5, json!([[3.0, 7], [9.0, 1]]), false);
        // The same shape: values pair up by position.
        let cur = frame(366553849, 1.25, json!([[3.0, 2], [640.0, 1]]), false);
        let text = round_trip(&cur, &prev);
        // The counter went by its difference, the histogram densely, the
        // unchanged values as "the same".
        assert!(text.contains("[11000]"), "{text}");
        let dense = format!(r#"{{"h":[2,"2{}1"]}}"#, "0".repeat(54));
        assert!(text.contains(&dense), "{text}");
        // A column of values all as before is one token.
        assert_eq!(column_of(&text, &cur, "/ranks/#/pid"), json!(0), "{text}");
        // Counts past one character's.
        let big = frame(1, 1.0, json!([[3.0, 62], [4.0, 61], [9.0, 123456]]), false);
        let text = round_trip(&big, &prev);
        assert!(text.contains(r#"{"h":[2,".62.Z0000.123456."]}"#), "{text}");
        // Another shape (a rank more): by field path and place.
        let grown = frame(366553849, 1.25, json!([[3.0, 2]]), true);
        round_trip(&grown, &prev);
        round_trip(&prev, &grown);
        // A frame against itself is all "the same"; against an empty one,
        // all itself.
        let itself = round_trip(&cur, &cur);
        let zeros = vec!["0"; column_count(&cur)].join(",");
        assert_eq!(itself, format!("[null,[{zeros}]]"));
        round_trip(&cur, &json!({}));
    }

    #[test]
    fn histograms_off_the_grid_stay_as_they_are() {
        for h in [
            json!([[17.0, 1]]),          // not a bucket bound
            json!([[3.0, 1], [3.0, 1]]), // not increasing
            json!([[3, 1]]),             // integer bounds: not the probes' form
            json!([[3.0, 0]]),           // an empty bucket written out
            json!([[3.0, 1, 2]]),        // not pairs
            json!([[3.0, "a"]]),
        ] {
            let text = serde_json::to_vec(&h).unwrap();
            assert!(grid_end(&text, 0).is_none(), "{h}");
            let body = round_trip(&json!({ "h": h }), &json!({"h": [[3.0, 2]]}));
            // Its pairs went as ordinary values, not as a dense token.
            let pairs = column_of(&body, &json!({ "h": h }), "/h/#/#");
            assert!(pairs.is_array(), "{body}");
        }
    }

    #[test]
    fn damaged_bodies_are_errors_not_panics() {
        let no_shape = Shape::new(json!({"a": null, "b": [null, null]}));
        let prev = columns_of(&no_shape, &json!({"a": 1, "b": [1, 2]})).unwrap();
        let good: &[u8] = br#"[{"a":null},{"/a":[[]]}]"#;
        assert_eq!(decode(good, &prev, &no_shape).unwrap().0, json!({"a": 1}));
        // No shape given: the one before.
        let reuse: &[u8] = br#"[null,{"/a":[3],"/b/#":[[],[5]]}]"#;
        assert_eq!(
            decode(reuse, &prev, &no_shape).unwrap().0,
            json!({"a": 3, "b": [1, 7]})
        );
        // Format 6: the columns as a list, by field path; 0 for a column
        // of values as before.
        let listed: &[u8] = br#"[null,[[3],[[],[5]]]]"#;
        assert_eq!(
            decode(listed, &prev, &no_shape).unwrap().0,
            json!({"a": 3, "b": [1, 7]})
        );
        let kept: &[u8] = br#"[null,[0,[[],[5]]]]"#;
        assert_eq!(
            decode(kept, &prev, &no_shape).unwrap().0,
            json!({"a": 1, "b": [1, 7]})
        );
        // A shape that does not fit the values it is read with.
        assert!(columns_of(&no_shape, &json!({"a": 1})).is_err());
        for body in [
            &b"not json"[..],
            b"{}",
            b"[null]",
            br#"[{"a":null},[]]"#,
            br#"[{"a":null},{}]"#,
            br#"[{"z":null},{"/z":[[]]}]"#,
            br#"[{"a":null},{"/a":[["x"]]}]"#,
            br#"[{"a":null},{"/a":[{"h":[9999,1]}]}]"#,
            br#"[{"a":null},{"/a":[{"h":[250,"1111111"]}]}]"#,
            br#"[{"a":null},{"/a":[{"h":[2,"1-"]}]}]"#,
            br#"[{"a":null},{"/a":[{"h":[2,"1.12"]}]}]"#,
            br#"[{"a":null},{"/a":[{"h":[2,"1..1"]}]}]"#,
            br#"[{"a":null},{"/a":[{"h":[2,"1",3]}]}]"#,
            br#"[{"a":null},{"/a":[{"q":1}]}]"#,
            br#"[{"a":null},{"/a":[[1,2]]}]"#,
            br#"[{"a":5},{}]"#,
            br#"[{"b":[null,null,null]},{"/b/#":[[],[],[]]}]"#,
            br#"[{"a":null},[1]]"#,
            br#"[{"a":null},[[],[]]]"#,
            br#"[{"z":null},[0]]"#,
            br#"[{"b":[null,null,null]},[0]]"#,
            br#"[null,[0]]"#,
            br#"[{"a":null},"x"]"#,
        ] {
            assert!(
                decode(body, &prev, &no_shape).is_err(),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }

    #[test]
    fn text_serde_did_not_write_is_not_taken_apart() {
        for bad in [
            &b"{"[..],
            b"{\"a\":}",
            b"[1,",
            b"\"open",
            b"{\"a\" 1}",
            b"[1]x",
        ] {
            assert!(flatten(bad).is_none(), "{}", String::from_utf8_lossy(bad));
        }
    }
}
