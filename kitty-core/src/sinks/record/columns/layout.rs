//! Where a shape's values go in a delta body, kept while the shape stays:
//! each column's values (in the order the body lists the columns), by
//! their places among the frame's values. A frame of that shape is then
//! written straight into its body, each value against the one at its
//! place in the frame before, without gathering each column's tokens
//! first (the same bytes; tested against that in `leaf_writer`'s tests).
//! Callgrind, the 8-rank ring's frames written again: an append 3 % fewer
//! instructions; both builds recording the ring at once: 0.955-1.001 of
//! the CPU (lower in 5 of 6 rounds).

use super::{write_token, Leaf};

#[derive(Default)]
pub(super) struct Layout {
    /// Values' places (leaf indices), column by column.
    by_column: Vec<u32>,
    /// Where each column's places end in `by_column`.
    column_ends: Vec<u32>,
}

impl Layout {
    /// Lays out `leaves`, whose columns a body lists in `order` (column
    /// ids below `columns`).
    pub(super) fn lay_out(&mut self, order: &[usize], columns: usize, leaves: &[Leaf]) {
        let mut place = vec![0u32; columns];
        for (p, &id) in order.iter().enumerate() {
            place[id] = p as u32;
        }
        // Each column's values in the order they come (a counting sort).
        self.column_ends.clear();
        self.column_ends.resize(order.len(), 0);
        for leaf in leaves {
            self.column_ends[place[leaf.col()] as usize] += 1;
        }
        let mut end = 0;
        for n in self.column_ends.iter_mut() {
            end += *n;
            *n = end;
        }
        let mut next = self.column_ends.clone();
        self.by_column.clear();
        self.by_column.resize(leaves.len(), 0);
        for (i, leaf) in leaves.iter().enumerate().rev() {
            let p = place[leaf.col()] as usize;
            next[p] -= 1;
            self.by_column[next[p] as usize] = i as u32;
        }
    }

    /// The body of the values `cur` (their texts in `json`) against
    /// `prev`'s (in `prev_json`), both of the shape laid out.
    pub(super) fn body(
        &self,
        cur: &[Leaf],
        json: &[u8],
        prev: &[Leaf],
        prev_json: &[u8],
    ) -> Vec<u8> {
        let mut body = Vec::with_capacity(json.len() + 64);
        body.extend_from_slice(b"[null,[");
        let mut from = 0;
        for (n, &end) in self.column_ends.iter().enumerate() {
            if n > 0 {
                body.push(b',');
            }
            let start = body.len();
            body.push(b'[');
            let mut kept = true;
            for (k, &i) in self.by_column[from..end as usize].iter().enumerate() {
                if k > 0 {
                    body.push(b',');
                }
                let (c, p) = (&cur[i as usize], &prev[i as usize]);
                let before = &prev_json[p.lit()];
                kept &= write_token(&mut body, &json[c.lit()], c.hist, Some(before));
            }
            // A column whose every value is the one before is one token.
            if kept {
                body.truncate(start);
                body.push(b'0');
            } else {
                body.push(b']');
            }
            from = end as usize;
        }
        body.extend_from_slice(b"]]");
        body
    }
}
