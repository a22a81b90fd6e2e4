//! Time helpers: duration parsing for the CLI and RFC 3339 formatting.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Parses "500ms", "5s", "2m", "1h30m".
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s.trim()).map_err(|e| format!("invalid duration {s:?}: {e}"))
}

pub fn rfc3339(wall_ns: u64) -> String {
    let t = UNIX_EPOCH + Duration::from_nanos(wall_ns);
    humantime::format_rfc3339_seconds(t).to_string()
}

pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}

/// `HH:MM:SS` (UTC) of a wall time, for compact displays.
pub fn clock(wall_ns: u64) -> String {
    let s = rfc3339(wall_ns);
    s.get(11..19).unwrap_or("").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_clock() {
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert!(parse_duration("soon").is_err());
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(clock(3_723_000_000_000), "01:02:03");
    }
}
