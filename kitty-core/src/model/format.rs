//! The value formatter for the whole product: verdict sentences, the TUI's
//! cells and charts, `replay --dump`. One rule per unit; the compact form
//! (table cells, whose header names the unit) drops the spaces and the
//! per-second suffix.

use super::signal::{Sig, Unit};

/// "51 ms", "1.50 MB/s", "120 ms/s", "3".
pub fn value(sig: Sig, v: f64) -> String {
    render(sig.unit(), v, false)
}

/// "51.0ms", "1.50MB", "120": for cells under a header that names the unit.
pub fn compact(sig: Sig, v: f64) -> String {
    render(sig.unit(), v, true)
}

/// A value in a unit, without a signal.
pub fn render(unit: Unit, v: f64, compact: bool) -> String {
    let sep = if compact { "" } else { " " };
    match unit {
        Unit::Micros if v.abs() >= 1000.0 => format!("{}{sep}ms", number(v / 1000.0)),
        Unit::Micros => format!("{}{sep}us", number(v)),
        Unit::Bytes => bytes_sep(v, sep),
        Unit::BytesPerSec if compact => bytes_sep(v, sep),
        Unit::BytesPerSec => format!("{}/s", bytes_sep(v, sep)),
        Unit::Count | Unit::Flag => number(v),
        _ if compact => number(v),
        u => format!("{} {}", number(v), u.suffix()),
    }
}

/// Three significant digits or so: "120", "51.2", "2.15", "7"; from
/// 100,000 up with a decimal prefix ("420k", "4.20M"), as counters of
/// fast links run.
pub fn number(v: f64) -> String {
    let a = v.abs();
    if a >= 1e5 {
        let (d, p) = if a >= 1e12 {
            (1e12, "T")
        } else if a >= 1e9 {
            (1e9, "G")
        } else if a >= 1e6 {
            (1e6, "M")
        } else {
            (1e3, "k")
        };
        return format!("{}{p}", number((v / d * 100.0).round() / 100.0));
    }
    if a >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// "1.50 MB", "512 B" (decimal units, as network and disk tools use).
pub fn bytes(v: f64) -> String {
    bytes_sep(v, " ")
}

fn bytes_sep(v: f64, sep: &str) -> String {
    const U: [&str; 5] = ["B", "KB", "MB", "GB", "TB"];
    let mut x = v;
    let mut i = 0;
    while x.abs() >= 1000.0 && i < U.len() - 1 {
        x /= 1000.0;
        i += 1;
    }
    if i == 0 {
        format!("{x:.0}{sep}B")
    } else {
        format!("{}{sep}{}", number(x), U[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_forms() {
        assert_eq!(value(Sig::RttP50Us, 51_000.0), "51 ms");
        assert_eq!(value(Sig::RttP50Us, 2_150.0), "2.15 ms");
        assert_eq!(value(Sig::RunDelayMsPerS, 120.0), "120 ms/s");
        assert_eq!(value(Sig::BytesSentPerS, 1_500_000.0), "1.50 MB/s");
        assert_eq!(value(Sig::Sockets, 3.0), "3");
        assert_eq!(value(Sig::CpuPct, 41.5), "41.5 %");
    }

    #[test]
    fn compact_forms() {
        assert_eq!(compact(Sig::RttP50Us, 6_100.0), "6.10ms");
        assert_eq!(compact(Sig::RttP50Us, 8.0), "8us");
        assert_eq!(compact(Sig::BytesSentPerS, 8_650_000.0), "8.65MB");
        assert_eq!(compact(Sig::RunDelayMsPerS, 327.0), "327");
        assert_eq!(compact(Sig::TxQueueBytes, 0.0), "0B");
    }
}
