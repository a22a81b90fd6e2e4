//! Time: the clocks frames carry, duration parsing for the CLI and RFC 3339
//! formatting.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// CLOCK_MONOTONIC in nanoseconds: only differences matter.
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The wall clock in nanoseconds since the Unix epoch.
pub fn wall_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Parses "500ms", "5s", "2m", "1h30m".
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s.trim()).map_err(|e| format!("invalid duration {s:?}: {e}"))
}

pub fn rfc3339(wall_ns: u64) -> String {
    let t = UNIX_EPOCH + Duration::from_nanos(wall_ns);
    humantime::format_rfc3339_seconds(t).to_string()
}

/// RFC 3339 in UTC with nanoseconds: the snapshot's one time form.
pub fn rfc3339_ns(wall_ns: u64) -> String {
    let t = UNIX_EPOCH + Duration::from_nanos(wall_ns);
    humantime::format_rfc3339_nanos(t).to_string()
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

    #[test]
    fn clocks_move_forward() {
        let a = mono_ns();
        assert!(mono_ns() >= a);
        assert!(wall_ns() > 1_700_000_000_000_000_000);
    }
}
