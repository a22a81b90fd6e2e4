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

/// A wall time as the display shows it: local time (the `TZ` of the
/// session, as `date` does) or UTC, with the zone's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Civil {
    /// `YYYY-MM-DD`
    pub date: String,
    /// `HH:MM:SS`
    pub time: String,
    /// `UTC`, `CET`, `+0530`...
    pub zone: String,
    /// Seconds east of UTC.
    pub offset_s: i64,
}

extern "C" {
    // POSIX; not in the libc crate. localtime_r need not read TZ again.
    fn tzset();
}

pub fn civil(wall_ns: u64, utc: bool) -> Civil {
    let secs = (wall_ns / 1_000_000_000) as libc::time_t;
    // SAFETY: a zeroed tm is valid; localtime_r / gmtime_r fill it and only
    // read `secs`; tzset reads TZ.
    let tm = unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        let ok = if utc {
            !libc::gmtime_r(&secs, &mut tm).is_null()
        } else {
            tzset();
            !libc::localtime_r(&secs, &mut tm).is_null()
        };
        ok.then_some(tm)
    };
    let Some(tm) = tm else {
        return Civil {
            date: rfc3339(wall_ns).get(..10).unwrap_or("").to_string(),
            time: clock(wall_ns),
            zone: "UTC".into(),
            offset_s: 0,
        };
    };
    let offset_s = if utc { 0 } else { tm.tm_gmtoff };
    let zone = if utc || tm.tm_zone.is_null() {
        "UTC".to_string()
    } else {
        // SAFETY: tm_zone points at a NUL-terminated static zone name.
        unsafe { std::ffi::CStr::from_ptr(tm.tm_zone) }
            .to_string_lossy()
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '+' || *c == '-')
            .take(8)
            .collect()
    };
    Civil {
        date: format!(
            "{:04}-{:02}-{:02}",
            tm.tm_year + 1900,
            tm.tm_mon + 1,
            tm.tm_mday
        ),
        time: format!("{:02}:{:02}:{:02}", tm.tm_hour, tm.tm_min, tm.tm_sec),
        zone: if zone.is_empty() { "UTC".into() } else { zone },
        offset_s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_time_in_utc_and_a_named_zone() {
        // 2026-12-01T12:03:04Z
        let t = 1_796_126_584_000_000_000;
        let c = civil(t, true);
        assert_eq!(
            (c.date.as_str(), c.time.as_str(), c.zone.as_str()),
            ("2026-12-01", "12:03:04", "UTC")
        );
        // The local form is the same instant shifted by the zone's offset
        // (whatever TZ the tests run with; setting it here would race).
        let l = civil(t, false);
        let secs = |c: &Civil| {
            let v: Vec<i64> = c.time.split(':').map(|x| x.parse().unwrap()).collect();
            v[0] * 3600 + v[1] * 60 + v[2]
        };
        assert_eq!(
            (secs(&l) - secs(&c)).rem_euclid(86_400),
            l.offset_s.rem_euclid(86_400),
            "{l:?}"
        );
        assert!(!l.zone.is_empty());
    }

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
