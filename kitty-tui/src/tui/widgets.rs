//! Small drawing helpers the views share: sparklines, histogram bars.

use kitty_core::model::format::render;
use kitty_core::model::Unit;
use ratatui::text::Line;

pub const SPARK: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// A sparkline scaled between the series' min and max; a flat series is a
/// flat low line, so steady values never look like alarms.
pub fn spark(values: &[f64]) -> String {
    let max = values.iter().cloned().fold(f64::MIN, f64::max);
    let min = values.iter().cloned().fold(f64::MAX, f64::min);
    let range = max - min;
    let flat = range <= 0.0 || range <= max.abs() * 0.01;
    values
        .iter()
        .map(|v| {
            if flat {
                SPARK[0]
            } else {
                SPARK[(((v - min) / range) * 7.0).round().clamp(0.0, 7.0) as usize]
            }
        })
        .collect()
}

/// A 0..100 % value as one bar character.
pub fn level(pct: f64) -> char {
    SPARK[((pct / 100.0) * 7.0).round().clamp(0.0, 7.0) as usize]
}

/// Latency buckets (upper bound in us, count) as bars, one line per group,
/// folded into powers of two and further (pairs of octaves, ...) until they
/// fit `height`, so the tail is always on screen: "  ≤128 us ████ 41".
pub fn histogram_lines(buckets: &[(f64, u64)], width: usize, height: usize) -> Vec<Line<'static>> {
    let mut groups: Vec<(f64, u64)> = Vec::new();
    for &(upper, n) in buckets {
        let top = upper.max(1.0).log2().ceil().exp2();
        match groups.last_mut() {
            Some((t, c)) if *t == top => *c += n,
            _ => groups.push((top, n)),
        }
    }
    // Merge neighbours until the histogram fits, keeping the highest bound.
    while groups.len() > height.max(1) {
        groups = groups
            .chunks(2)
            .map(|c| (c[c.len() - 1].0, c.iter().map(|g| g.1).sum()))
            .collect();
    }
    let max = groups.iter().map(|o| o.1).max().unwrap_or(1).max(1);
    let bar_w = width.saturating_sub(20).max(4);
    groups
        .iter()
        .map(|&(top, n)| {
            let len = ((n as f64 / max as f64) * bar_w as f64).ceil() as usize;
            Line::from(format!(
                "{:>9} {:<bar_w$} {n}",
                format!("≤{}", render(Unit::Micros, top, false)),
                "█".repeat(len.min(bar_w)),
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_fold_into_octaves_with_the_largest_bar_full() {
        let lines = histogram_lines(&[(9.0, 1), (10.0, 1), (100.0, 4), (128.0, 4)], 40, 20);
        let text: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
        assert_eq!(text.len(), 2, "{text:?}");
        assert!(
            text[0].contains("16") && text[0].ends_with(" 2"),
            "{text:?}"
        );
        assert!(
            text[1].contains("128") && text[1].ends_with(" 8"),
            "{text:?}"
        );
        assert!(text[1].matches('█').count() > text[0].matches('█').count());
    }

    #[test]
    fn a_short_area_still_shows_the_tail() {
        let buckets: Vec<(f64, u64)> = (0..16).map(|i| (2f64.powi(i), 1)).collect();
        let lines = histogram_lines(&buckets, 40, 5);
        assert!(lines.len() <= 5, "{}", lines.len());
        let last = lines.last().unwrap().to_string();
        assert!(last.contains("32.8 ms"), "{last}");
    }

    #[test]
    fn sparklines_scale_and_stay_flat_when_steady() {
        assert_eq!(spark(&[1.0, 1.0, 1.0]), "▁▁▁");
        assert_eq!(spark(&[0.0, 10.0]), "▁█");
    }
}
