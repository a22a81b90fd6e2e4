//! A frame as columns of changes against the frame before it (format 3's
//! delta records): the frame's shape (its JSON with every value taken out),
//! then its values grouped by field path across ranks and sockets, each
//! written as "the same as before", an integer's difference, or itself.
//! Consecutive frames share their shape and most values; a column of one
//! field compresses far better than the same numbers scattered between
//! keys (measured on an 8-rank job: 535 -> ~300 KB per minute with zstd).

use serde_json::{Map, Number, Value};
use std::collections::HashMap;

/// Latency histograms (`[[upper bound, count], ...]` on the probes'
/// log-linear grid) travel as one dense token: `{"h": [first index, counts...]}`.
const HIST: &str = "h";
/// Grid indices a histogram token may name; more is damage, not data.
const GRID_MAX: usize = 8 * 60;

/// Writes delta bodies: keeps the last frame's values (taken apart from
/// its JSON text, which serde wrote: compact and well formed) to encode
/// the next frame against. Its buffers live from frame to frame.
#[derive(Default)]
pub struct Encoder {
    cur: Flat,
    prev: Flat,
    /// The last frame's JSON (taken apart again, with paths, when the
    /// next frame's shape differs); empty when there is none.
    prev_json: Vec<u8>,
    /// Column ids by field path, for good: frames share their columns.
    ids: HashMap<Vec<u8>, usize>,
    names: Vec<Vec<u8>>,
    cols: Vec<Vec<u8>>,
    /// The columns this frame wrote to, in the order it first did.
    touched: Vec<usize>,
}

impl Encoder {
    /// A keyframe was written: the next delta is encoded against it.
    pub fn key(&mut self, json: &[u8]) {
        self.prev_json.clear();
        let mut prev = std::mem::take(&mut self.prev);
        if flatten_into(&mut prev, json, true) {
            self.assign_columns(&mut prev);
            self.prev_json.extend_from_slice(json);
        }
        self.prev = prev;
    }

    fn assign_columns(&mut self, f: &mut Flat) {
        for leaf in &mut f.leaves {
            let name = &f.norms[leaf.norm.clone()];
            leaf.col = match self.ids.get(name) {
                Some(&id) => id,
                None => {
                    self.ids.insert(name.to_vec(), self.names.len());
                    self.names.push(name.to_vec());
                    self.cols.push(Vec::new());
                    self.names.len() - 1
                }
            };
        }
    }

    /// The delta body of the frame whose JSON is `json`, against the last
    /// frame given; that frame becomes this one. None (and no frame to
    /// encode against) for text serde did not write.
    pub fn delta(&mut self, json: &[u8]) -> Option<Vec<u8>> {
        if self.prev_json.is_empty() {
            return None;
        }
        let mut cur = std::mem::take(&mut self.cur);
        let mut prev = std::mem::take(&mut self.prev);
        let mut ok = flatten_into(&mut cur, json, false);
        // Consecutive frames nearly always have one shape: their values
        // then pair up by position and share their columns; else both are
        // taken apart again with their paths, to pair values by exact path.
        let same = ok && cur.shape == prev.shape;
        let mut by_path: HashMap<&[u8], usize> = HashMap::new();
        if ok && !same {
            ok = flatten_into(&mut cur, json, true)
                && flatten_into(&mut prev, &self.prev_json, true);
            if ok {
                self.assign_columns(&mut cur);
                by_path = prev
                    .leaves
                    .iter()
                    .enumerate()
                    .map(|(n, l)| (&prev.paths[l.path.clone()], n))
                    .collect();
            }
        }
        if !ok {
            self.prev_json.clear();
            (self.cur, self.prev) = (cur, prev);
            return None;
        }
        for &id in &self.touched {
            self.cols[id].clear();
        }
        self.touched.clear();
        for n in 0..cur.leaves.len() {
            let before = if same {
                cur.leaves[n].col = prev.leaves[n].col;
                Some(n)
            } else {
                by_path.get(&cur.paths[cur.leaves[n].path.clone()]).copied()
            };
            let leaf = &cur.leaves[n];
            let before = before.map(|p| &prev.text[prev.leaves[p].lit.clone()]);
            let out = &mut self.cols[leaf.col];
            if out.is_empty() {
                self.touched.push(leaf.col);
            } else {
                out.push(b',');
            }
            write_token(out, &cur.text[leaf.lit.clone()], leaf.hist, before);
        }
        let mut body = Vec::with_capacity(cur.text.len() + 64);
        body.push(b'[');
        // The shape only when it changed: null is "the one before".
        body.extend_from_slice(if same { b"null" } else { &cur.shape });
        body.extend_from_slice(b",{");
        for (n, &id) in self.touched.iter().enumerate() {
            if n > 0 {
                body.push(b',');
            }
            // Names are built from keys as serde escaped them: still valid
            // inside a JSON string, and they read back as the keys.
            body.push(b'"');
            body.extend_from_slice(&self.names[id]);
            body.extend_from_slice(b"\":[");
            body.extend_from_slice(&self.cols[id]);
            body.push(b']');
        }
        body.extend_from_slice(b"}]");
        drop(by_path);
        self.prev_json.clear();
        self.prev_json.extend_from_slice(json);
        (self.cur, self.prev) = (prev, cur);
        Some(body)
    }
}

/// One value as its token: "the same" (`[]`), an integer's difference
/// (`[d]`, where shorter than the number), a dense histogram, or itself.
fn write_token(out: &mut Vec<u8>, lit: &[u8], hist: bool, before: Option<&[u8]>) {
    use std::io::Write;
    if before == Some(lit) {
        out.extend_from_slice(b"[]");
        return;
    }
    if let (Some(c), Some(p)) = (int_text(lit), before.and_then(int_text)) {
        if let Ok(d) = i64::try_from(c - p) {
            if decimal_len(d) < lit.len() {
                let _ = write!(out, "[{d}]");
                return;
            }
        }
    }
    if hist {
        out.extend_from_slice(br#"{"h":["#);
        let mut next = None;
        grid_pairs(lit, |i, n| {
            match next {
                None => {
                    let _ = write!(out, "{i}");
                }
                Some(from) => (from..i).for_each(|_| out.extend_from_slice(b",0")),
            }
            let _ = write!(out, ",{n}");
            next = Some(i + 1);
        });
        out.extend_from_slice(b"]}");
        return;
    }
    out.extend_from_slice(lit);
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

/// A frame's JSON taken apart: its shape, and its values in text order,
/// each with its exact path (to pair it with the frame before) and its
/// field path (its column).
#[derive(Default)]
struct Flat {
    shape: Vec<u8>,
    text: Vec<u8>,
    paths: Vec<u8>,
    norms: Vec<u8>,
    leaves: Vec<Leaf>,
}

struct Leaf {
    lit: std::ops::Range<usize>,
    path: std::ops::Range<usize>,
    norm: std::ops::Range<usize>,
    /// A histogram on the grid (written as a dense token when it changed).
    hist: bool,
    /// Its column's id, once known.
    col: usize,
}

/// Takes serde's JSON of a frame apart into `flat` (its buffers kept),
/// with each value's paths when `detail`; false for text serde did not
/// write.
fn flatten_into(flat: &mut Flat, json: &[u8], detail: bool) -> bool {
    flat.shape.clear();
    flat.text.clear();
    flat.paths.clear();
    flat.norms.clear();
    flat.leaves.clear();
    let mut s = Scan {
        b: json,
        at: 0,
        exact: Vec::new(),
        norm: Vec::new(),
        detail,
        flat,
    };
    s.value(0).is_some() && s.at == json.len()
}

#[cfg(test)]
fn flatten(json: &[u8]) -> Option<Flat> {
    let mut f = Flat::default();
    flatten_into(&mut f, json, true).then_some(f)
}

/// The shape of a keyframe's JSON (what the delta after it may leave out).
pub fn shape(json: &[u8]) -> Result<Value, String> {
    let mut f = Flat::default();
    if !flatten_into(&mut f, json, false) {
        return Err("keyframe: not a frame's JSON".into());
    }
    serde_json::from_slice(&f.shape).map_err(|e| format!("keyframe shape: {e}"))
}

struct Scan<'a> {
    b: &'a [u8],
    at: usize,
    /// The exact path here: a key as `k`, its length and bytes; an index
    /// as `i` and four bytes (unambiguous whatever the keys hold).
    exact: Vec<u8>,
    /// The field path here: `/key` and `/#` (the column's name).
    norm: Vec<u8>,
    /// Whether to keep each value's paths (only needed when a frame's
    /// shape is not the one before: the common case skips them).
    detail: bool,
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
                while !matches!(self.peek()?, b',' | b']' | b'}') {
                    self.at += 1;
                }
                if start == self.at {
                    return None;
                }
                self.leaf(start, false);
                Some(())
            }
        }
    }

    fn leaf(&mut self, start: usize, hist: bool) {
        let f = &mut *self.flat;
        let lit = f.text.len()..f.text.len() + (self.at - start);
        f.text.extend_from_slice(&self.b[start..self.at]);
        let path = f.paths.len()..f.paths.len() + self.exact.len();
        let norm = f.norms.len()..f.norms.len() + self.norm.len();
        if self.detail {
            f.paths.extend_from_slice(&self.exact);
            f.norms.extend_from_slice(&self.norm);
        }
        f.leaves.push(Leaf {
            lit,
            path,
            norm,
            hist,
            col: 0,
        });
        f.shape.extend_from_slice(b"null");
    }

    fn string(&mut self) -> Option<()> {
        self.at += 1;
        loop {
            match self.peek()? {
                b'\\' => self.at += 2,
                b'"' => {
                    self.at += 1;
                    return Some(());
                }
                _ => self.at += 1,
            }
        }
    }

    fn object(&mut self, depth: usize) -> Option<()> {
        self.at += 1;
        self.flat.shape.push(b'{');
        if self.peek()? == b'}' {
            self.at += 1;
            self.flat.shape.push(b'}');
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
            let (e, n) = (self.exact.len(), self.norm.len());
            if self.detail {
                self.exact.push(b'k');
                self.exact
                    .extend_from_slice(&(key.len() as u32).to_le_bytes());
                self.exact.extend_from_slice(key);
                self.norm.push(b'/');
                self.norm.extend_from_slice(key);
            }
            self.value(depth + 1)?;
            self.exact.truncate(e);
            self.norm.truncate(n);
            match self.peek()? {
                b',' => {
                    self.at += 1;
                    self.flat.shape.push(b',');
                }
                b'}' => {
                    self.at += 1;
                    self.flat.shape.push(b'}');
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    fn array(&mut self, depth: usize) -> Option<()> {
        self.at += 1;
        self.flat.shape.push(b'[');
        if self.peek()? == b']' {
            self.at += 1;
            self.flat.shape.push(b']');
            return Some(());
        }
        let n0 = self.norm.len();
        if self.detail {
            self.norm.extend_from_slice(b"/#");
        }
        for i in 0u32.. {
            let e = self.exact.len();
            if self.detail {
                self.exact.push(b'i');
                self.exact.extend_from_slice(&i.to_le_bytes());
            }
            self.value(depth + 1)?;
            self.exact.truncate(e);
            match self.peek()? {
                b',' => {
                    self.at += 1;
                    self.flat.shape.push(b',');
                }
                b']' => {
                    self.at += 1;
                    self.flat.shape.push(b']');
                    break;
                }
                _ => return None,
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
        let Some(i) = grid_index(b) else {
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

/// The frame a delta body gives against `prev` (whose shape is
/// `prev_shape`), and its own shape.
pub fn decode(body: &[u8], prev: &Value, prev_shape: &Value) -> Result<(Value, Value), String> {
    let body: Value = serde_json::from_slice(body).map_err(|e| format!("delta body: {e}"))?;
    let Value::Array(mut parts) = body else {
        return Err("delta body: not a [shape, columns] pair".into());
    };
    if parts.len() != 2 {
        return Err("delta body: not a [shape, columns] pair".into());
    }
    let Value::Object(cols) = parts.pop().expect("two") else {
        return Err("delta body: columns are not a map".into());
    };
    let shape = match parts.pop().expect("two") {
        Value::Null => prev_shape.clone(),
        s => s,
    };
    let mut cursor = Cursor {
        cols: cols
            .into_iter()
            .map(|(name, c)| match c {
                Value::Array(a) => Ok((name, a.into_iter())),
                _ => Err("delta body: a column is not a list".to_string()),
            })
            .collect::<Result<_, _>>()?,
    };
    let mut path = String::new();
    let frame = fill(shape.clone(), Some(prev), &mut path, &mut cursor)?;
    Ok((frame, shape))
}

fn as_int(v: &Value) -> Option<i128> {
    let n = v.as_number()?;
    n.as_u64()
        .map(i128::from)
        .or_else(|| n.as_i64().map(i128::from))
}

/// Upper bound of grid bucket `i`: 1..=8, then eight steps per octave (the
/// probes' log-linear histogram, `bpf/kitty.h`).
fn grid_bound(i: usize) -> u64 {
    if i < 8 {
        return i as u64 + 1;
    }
    let octave = (i / 8) as u32 + 2;
    let step = 1u64 << (octave - 3);
    (1u64 << octave) + (i % 8 + 1) as u64 * step
}

/// The grid bucket whose upper bound is `u`, if `u` is one.
fn grid_index(u: u64) -> Option<usize> {
    if u == 0 {
        return None;
    }
    if u <= 8 {
        return Some(u as usize - 1);
    }
    let v = u - 1;
    let msb = 63 - v.leading_zeros() as usize;
    let i = (msb - 2) * 8 + ((v >> (msb - 3)) & 7) as usize;
    (i < GRID_MAX && grid_bound(i) == u).then_some(i)
}

/// The sparse pairs of a dense histogram token.
fn from_grid(dense: &[Value]) -> Result<Value, String> {
    let bad = || "delta body: a damaged histogram".to_string();
    let (lo, counts) = dense.split_first().ok_or_else(bad)?;
    let lo = lo.as_u64().ok_or_else(bad)? as usize;
    if lo + counts.len() > GRID_MAX {
        return Err(bad());
    }
    let mut pairs = Vec::new();
    for (k, n) in counts.iter().enumerate() {
        let n = n.as_u64().ok_or_else(bad)?;
        if n > 0 {
            let b = Number::from_f64(grid_bound(lo + k) as f64).ok_or_else(bad)?;
            pairs.push(Value::Array(vec![Value::Number(b), Value::from(n)]));
        }
    }
    Ok(Value::Array(pairs))
}

/// The columns of a body being read, by field path; within a column, the
/// values in the order of their array indices (what a depth-first walk
/// gives whatever order an object's keys come in).
struct Cursor {
    cols: HashMap<String, std::vec::IntoIter<Value>>,
}

impl Cursor {
    fn next(&mut self, path: &str) -> Result<Value, String> {
        self.cols
            .get_mut(path)
            .and_then(|c| c.next())
            .ok_or_else(|| format!("delta body: column {path} ends early"))
    }
}

/// The frame from its shape, its columns and the frame before it.
fn fill(
    shape: Value,
    prev: Option<&Value>,
    path: &mut String,
    cur: &mut Cursor,
) -> Result<Value, String> {
    match shape {
        Value::Object(m) => {
            let mut out = Map::new();
            for (k, x) in m {
                let at = path.len();
                path.push('/');
                path.push_str(&k);
                let v = fill(x, prev.and_then(|p| p.get(&k)), path, cur)?;
                path.truncate(at);
                out.insert(k, v);
            }
            Ok(Value::Object(out))
        }
        Value::Array(a) => {
            let at = path.len();
            path.push_str("/#");
            let out = a
                .into_iter()
                .enumerate()
                .map(|(i, x)| fill(x, prev.and_then(|p| p.get(i)), path, cur))
                .collect::<Result<_, _>>()?;
            path.truncate(at);
            Ok(Value::Array(out))
        }
        Value::Null => resolve(cur.next(path)?, prev, path),
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
        let (got, _) = decode(&body, prev, &shape(&key).unwrap()).unwrap();
        assert_eq!(&got, cur);
        String::from_utf8(body).unwrap()
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
        ];
        let mut e = Encoder::default();
        let key = serde_json::to_vec(&frames[0]).unwrap();
        e.key(&key);
        let (mut prev, mut prev_shape) = (frames[0].clone(), shape(&key).unwrap());
        for (n, f) in frames.iter().enumerate().skip(1) {
            let body = e.delta(&serde_json::to_vec(f).unwrap()).unwrap();
            let text = String::from_utf8(body.clone()).unwrap();
            // The shape is left out exactly when it is the one before.
            let same_shape = [1, 3, 5].contains(&n);
            assert_eq!(text.starts_with("[null,"), same_shape, "frame {n}: {text}");
            let (got, s) = decode(&body, &prev, &prev_shape).unwrap();
            assert_eq!(&got, f, "frame {n}");
            (prev, prev_shape) = (got, s);
        }
    }

    #[test]
    fn the_grid_matches_the_kernels_buckets() {
        // Upper bounds as the probes report them (kitty-probe-ebpf hist.rs).
        let bounds: Vec<u64> = (0..20).map(grid_bound).collect();
        assert_eq!(
            bounds,
            [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 20, 22, 24]
        );
        assert_eq!(grid_bound(8 * 10 - 1), 1 << 12);
        for i in 0..GRID_MAX {
            assert_eq!(grid_index(grid_bound(i)), Some(i), "bucket {i}");
        }
        assert_eq!(grid_index(17), None);
        assert_eq!(grid_index(0), None);
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
        assert!(
            text.contains(r#"{"h":[2,2,0,0,0,0,0,0,0,0,0,0,0"#),
            "{text}"
        );
        assert!(text.contains(r#""/ranks/#/pid":[[],[]]"#), "{text}");
        // Another shape (a rank more): by exact path.
        let grown = frame(366553849, 1.25, json!([[3.0, 2]]), true);
        round_trip(&grown, &prev);
        round_trip(&prev, &grown);
        // A frame against itself is all "the same"; against an empty one,
        // all itself.
        assert!(round_trip(&cur, &cur).len() < text.len());
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
            assert!(body.contains(r#""/h/#/#""#), "{body}");
        }
    }

    #[test]
    fn damaged_bodies_are_errors_not_panics() {
        let prev = json!({"a": 1, "b": [1, 2]});
        let good: &[u8] = br#"[{"a":null},{"/a":[[]]}]"#;
        let no_shape = json!({"b": null});
        assert_eq!(decode(good, &prev, &no_shape).unwrap().0, json!({"a": 1}));
        // No shape given: the one before.
        let reuse: &[u8] = br#"[null,{"/b":[[]]}]"#;
        assert_eq!(
            decode(reuse, &prev, &no_shape).unwrap().0,
            json!({"b": [1, 2]})
        );
        for body in [
            &b"not json"[..],
            b"{}",
            b"[null]",
            br#"[{"a":null},[]]"#,
            br#"[{"a":null},{}]"#,
            br#"[{"z":null},{"/z":[[]]}]"#,
            br#"[{"a":null},{"/a":[["x"]]}]"#,
            br#"[{"a":null},{"/a":[{"h":[9999,1]}]}]"#,
            br#"[{"a":null},{"/a":[{"q":1}]}]"#,
            br#"[{"a":null},{"/a":[[1,2]]}]"#,
            br#"[{"a":5},{}]"#,
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
