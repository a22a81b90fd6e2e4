//! The recording's floats at five significant digits: rates, gauges and
//! latencies are measured far less precisely than an f64's 17 digits, and
//! those noise digits were a quarter of a recording's bytes. Integers
//! (counters, ids, times) are written exactly.

use serde_json::ser::{CompactFormatter, Formatter};
use std::io::{self, Write};

/// Significant digits a recorded float keeps (0.005 % relative at worst:
/// 50 KB of a 1 GB RSS, 0.05 us of a 1 ms latency).
pub const DIGITS: i32 = 5;

/// `v` rounded to [`DIGITS`] significant digits; the result prints as at
/// most that many digits (shortest round trip), because it is the nearest
/// double to a short decimal.
pub fn round(v: f64) -> f64 {
    if v == 0.0 || !v.is_finite() {
        return v;
    }
    match scaled(v) {
        // m / 10^k: one correctly rounded division (10^k is exact to 22).
        (m, shift) if shift >= 0 => m / pow10(shift),
        // m * 10^j: the nearest double to that decimal.
        (m, shift) => m * pow10(-shift),
    }
}

/// `v`'s mantissa of [`DIGITS`] digits, rounded half away from zero (an
/// integer, in a float), and the power of ten that scaled it: v ~ m / 10^shift.
/// The shift stops at the exact powers (|shift| <= 22): beyond them
/// (|v| below ~1e-18 or above ~1e26) m has fewer or more digits.
fn scaled(v: f64) -> (f64, i32) {
    let shift = (DIGITS - 1 - decimal_exponent(v.abs())).clamp(-22, 22);
    let m = if shift >= 0 {
        (v * pow10(shift)).round()
    } else {
        (v / pow10(-shift)).round()
    };
    (m, shift)
}

/// floor(log10(a)) for a finite a > 0, from the binary exponent and one
/// or two comparisons (log10 itself was most of the rounding's cost).
fn decimal_exponent(a: f64) -> i32 {
    let e2 = ((a.to_bits() >> 52) & 0x7ff) as i32 - 1023;
    if !(-60..=60).contains(&e2) {
        return a.log10().floor() as i32;
    }
    // log10(2) = 0.30103: a guess off by at most one.
    let mut e = (e2 as f64 * std::f64::consts::LOG10_2).floor() as i32;
    if a < pow10(e) {
        e -= 1;
    } else if a >= pow10(e + 1) {
        e += 1;
    }
    e
}

/// 10^e for |e| <= 22 from a table of exact powers (their inverses for
/// negative e are the nearest doubles, enough for the comparisons above).
fn pow10(e: i32) -> f64 {
    const P: [f64; 23] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
        1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
    ];
    if e >= 0 {
        P[e.min(22) as usize]
    } else if e >= -22 {
        1.0 / P[(-e) as usize]
    } else {
        10f64.powi(e)
    }
}

/// `round(v)` as serde's float printer (zmij, shortest round trip) prints
/// it, the same bytes, from the rounding's own integer: the double nearest
/// to m x 10^k, m of at most [`DIGITS`] digits, prints as m's digits (any
/// shorter decimal is at least 10^k away, far more than the double's
/// spacing), so the search for the shortest digits is not needed. None for
/// zero and where [`scaled`] stops at its exact powers. Floats are most of
/// a frame's values: this was 4 % of `record`'s CPU.
fn short_decimal(v: f64, out: &mut [u8; 32]) -> Option<usize> {
    if v == 0.0 || !v.is_finite() {
        return None;
    }
    // Whole numbers of five digits or fewer (a histogram's bucket bounds,
    // half a frame's floats) are their own rounding: their digits and
    // ".0", as serde prints any whole double below 1e16.
    if v.abs() < 1e5 && v.fract() == 0.0 {
        let mut whole = itoa::Buffer::new();
        let digits = whole.format(v as i32).as_bytes();
        let n = digits.len();
        out[..n].copy_from_slice(digits);
        out[n..n + 2].copy_from_slice(b".0");
        return Some(n + 2);
    }
    let (m, shift) = scaled(v.abs());
    // 10^5 itself: a mantissa rounded up to the next decade.
    if !(1e4..=1e5).contains(&m) {
        return None;
    }
    let mut m = m as u64;
    let mut k = -shift;
    while m.is_multiple_of(10) {
        m /= 10;
        k += 1;
    }
    let mut digits = [0u8; 8];
    let mut len = 0;
    while m > 0 {
        digits[7 - len] = b'0' + (m % 10) as u8;
        m /= 10;
        len += 1;
    }
    let d = &digits[8 - len..];
    let kk = len as i32 + k;
    let mut n = 0;
    let mut put = |b: u8| {
        out[n] = b;
        n += 1;
    };
    if v < 0.0 {
        put(b'-');
    }
    // serde's printer's layouts (zmij's), by where the decimal point
    // falls: fixed from 1e-5 to below 1e16, else d.ddde+x.
    if (-4..=16).contains(&kk) {
        if k >= 0 {
            d.iter().for_each(|&c| put(c));
            (0..k).for_each(|_| put(b'0'));
            put(b'.');
            put(b'0');
        } else if kk >= 1 {
            for (i, &c) in d.iter().enumerate() {
                if i as i32 == kk {
                    put(b'.');
                }
                put(c);
            }
        } else {
            put(b'0');
            put(b'.');
            (0..-kk).for_each(|_| put(b'0'));
            d.iter().for_each(|&c| put(c));
        }
    } else {
        put(d[0]);
        if d.len() > 1 {
            put(b'.');
            d[1..].iter().for_each(|&c| put(c));
        }
        put(b'e');
        let x = kk - 1;
        put(if x < 0 { b'-' } else { b'+' });
        let x = x.unsigned_abs();
        if x >= 10 {
            put(b'0' + (x / 10) as u8);
        }
        put(b'0' + (x % 10) as u8);
    }
    Some(n)
}

/// serde_json's compact output with every float rounded by [`round`].
pub struct Rounded;

impl Formatter for Rounded {
    fn write_f64<W: ?Sized + Write>(&mut self, w: &mut W, v: f64) -> io::Result<()> {
        let mut buf = [0u8; 32];
        match short_decimal(v, &mut buf) {
            Some(n) => w.write_all(&buf[..n]),
            None => CompactFormatter.write_f64(w, round(v)),
        }
    }

    fn write_f32<W: ?Sized + Write>(&mut self, w: &mut W, v: f32) -> io::Result<()> {
        CompactFormatter.write_f64(w, round(v as f64))
    }
}

/// What a recording gives back for `value`: its floats rounded.
pub fn recorded<T: serde::Serialize + serde::de::DeserializeOwned>(value: &T) -> T {
    serde_json::from_slice(&to_vec(value).expect("serializes")).expect("reads back")
}

/// A value's JSON with rounded floats.
pub fn to_vec<T: serde::Serialize>(value: &T) -> serde_json::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(32 << 10);
    value.serialize(&mut serde_json::Serializer::with_formatter(
        &mut out, Rounded,
    ))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn five_digits_print_as_five_digits() {
        for (v, want) in [
            (699.9072510907145, "699.91"),
            (0.0012345678, "0.0012346"),
            (43_655_333_333.0, "43655000000.0"),
            (-2.776315789473684, "-2.7763"),
            (1502.7199999999993, "1502.7"),
            (24_493_527_040.0, "24494000000.0"),
            (2.0, "2.0"),
            (0.0, "0.0"),
            (9.999951, "10.0"),
        ] {
            let got = String::from_utf8(to_vec(&v).unwrap()).unwrap();
            assert_eq!(got, want, "{v}");
        }
    }

    #[test]
    fn rounding_stays_within_half_a_unit_of_the_last_digit() {
        let mut x = 1.234_567e-7;
        while x < 1e18 {
            for v in [x, -x, x * 7.77] {
                let r = round(v);
                assert!(((r - v) / v).abs() <= 5e-5, "{v} -> {r}");
                let text = serde_json::to_string(&r).unwrap();
                let digits = text
                    .trim_start_matches('-')
                    .split('e')
                    .next()
                    .unwrap()
                    .chars()
                    .filter(char::is_ascii_digit)
                    .collect::<String>();
                let significant = digits.trim_start_matches('0').trim_end_matches('0');
                assert!(significant.len() <= DIGITS as usize, "{v} -> {text}");
            }
            x *= 3.1;
        }
    }

    #[test]
    fn the_decimal_exponent_is_exact_at_every_power_of_ten() {
        for k in -18..=18 {
            let p: f64 = format!("1e{k}").parse().unwrap();
            assert_eq!(decimal_exponent(p), k, "10^{k}");
            assert_eq!(decimal_exponent(p.next_down()), k - 1, "below 10^{k}");
            assert_eq!(decimal_exponent(p * 9.99), k, "9.99 x 10^{k}");
        }
        assert_eq!(decimal_exponent(1e300), 300);
        assert_eq!(decimal_exponent(2.5e-300), -300);
    }

    /// What serde's own printer writes for the rounded value.
    fn by_serde(v: f64) -> String {
        let mut out = Vec::new();
        CompactFormatter.write_f64(&mut out, round(v)).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn the_short_printer_writes_the_bytes_serde_writes() {
        let mut checked = 0;
        let mut each = |v: f64| {
            let mut buf = [0u8; 32];
            if let Some(n) = short_decimal(v, &mut buf) {
                let got = std::str::from_utf8(&buf[..n]).unwrap();
                assert_eq!(got, by_serde(v), "{v:e}");
                assert_eq!(got.parse::<f64>().unwrap(), round(v), "{v:e}");
                checked += 1;
            }
        };
        // Every decade the fast path covers, dense in mantissas, both signs,
        // the powers of ten and their neighbours, and values that round up
        // to the next decade (9.99996 -> 10.0).
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for e in -19..=27 {
            let p: f64 = format!("1e{e}").parse().unwrap();
            for v in [
                p,
                p.next_up(),
                p.next_down(),
                p * 9.99996,
                p * 9.99994,
                p * 1.00005,
            ] {
                each(v);
                each(-v);
            }
            for _ in 0..2000 {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let frac = (state >> 11) as f64 / (1u64 << 53) as f64;
                let v = p * (1.0 + 9.0 * frac);
                each(v);
                each(-v);
                // Short decimals as kitty's rates often are.
                each((state % 100_000) as f64 * p);
            }
        }
        // Every whole number the whole-number path takes, and its edges.
        for i in 1..100_000u32 {
            each(i as f64);
            each(-(i as f64));
        }
        for v in [99_999.5, 100_000.0, 100_001.0, 0.5, 1.5] {
            each(v);
            each(-v);
        }
        assert!(checked > 400_000, "{checked}");
        // Outside it, and zero, serde's printer is used as before.
        let mut buf = [0u8; 32];
        for v in [0.0, -0.0, 1e300, 2.5e-300, 1e-20, 5e28] {
            assert_eq!(short_decimal(v, &mut buf), None, "{v:e}");
        }
        for (v, want) in [
            (699.9072510907145, "699.91"),
            (1e300, "1e+300"),
            (0.0, "0.0"),
        ] {
            assert_eq!(String::from_utf8(to_vec(&v).unwrap()).unwrap(), want);
        }
    }

    #[test]
    fn non_finite_values_are_left_to_serde() {
        assert!(round(f64::NAN).is_nan());
        assert_eq!(round(f64::INFINITY), f64::INFINITY);
    }
}
