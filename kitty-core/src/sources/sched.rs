//! Parser for /proc/<pid>/task/<tid>/sched (not covered by the procfs crate).

/// `se.nr_migrations` from a sched file, if the kernel reports it.
pub fn parse_nr_migrations(text: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        (key.trim() == "se.nr_migrations").then(|| value.trim().parse().ok())?
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_migrations_from_captured_file() {
        let text = include_str!("../../tests/fixtures/proc/sched");
        assert_eq!(parse_nr_migrations(text), Some(6));
    }

    #[test]
    fn older_kernel_without_field_is_none() {
        assert_eq!(
            parse_nr_migrations("se.exec_start : 1.0\nnr_switches : 4\n"),
            None
        );
        assert_eq!(parse_nr_migrations(""), None);
    }
}
