//! Writing a profile: folded stacks (one line per distinct stack, as
//! inferno-flamegraph and speedscope import them) and an SVG flame graph
//! made with inferno.

use super::Profile;

impl Profile {
    /// Folded stacks, one line per distinct stack: `comm;f1;f2 count`. With
    /// `per_thread`, each thread is its own root under the process.
    pub fn folded(&self, per_thread: bool) -> String {
        let mut lines: std::collections::BTreeMap<String, u64> = Default::default();
        for s in &self.stacks {
            let mut parts = vec![sanitize(&self.comm)];
            if per_thread {
                parts.push(format!("{}-{}", sanitize(&s.thread), s.tid));
            }
            parts.extend(s.frames.iter().map(|f| sanitize(f)));
            *lines.entry(parts.join(";")).or_default() += s.count;
        }
        let mut out = String::new();
        for (stack, n) in lines {
            out.push_str(&format!("{stack} {n}\n"));
        }
        out
    }

    /// An SVG flame graph of the folded stacks.
    pub fn svg(&self, per_thread: bool) -> std::io::Result<Vec<u8>> {
        let folded = self.folded(per_thread);
        let mut opts = inferno::flamegraph::Options::default();
        opts.title = match self.kind {
            super::ProfileKind::OnCpu => format!(
                "kitty on-CPU profile: pid {} ({}), {} Hz, {:.0} s",
                self.pid, self.comm, self.frequency_hz, self.duration_s
            ),
            super::ProfileKind::OffCpu => format!(
                "kitty off-CPU profile: pid {} ({}), {:.0} s: where it waits",
                self.pid, self.comm, self.duration_s
            ),
        };
        opts.count_name = self.kind.unit().into();
        let mut out = Vec::new();
        inferno::flamegraph::from_lines(&mut opts, folded.lines(), &mut out)?;
        Ok(out)
    }
}

/// Folded format separators (`;`, and the space before the count) cannot
/// appear inside a frame.
fn sanitize(s: &str) -> String {
    s.replace(';', ":").replace(['\n', ' '], "_")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::StackSample;

    fn profile() -> Profile {
        let s = |tid: u32, frames: &[&str], count| StackSample {
            tid,
            thread: format!("t{tid}").into(),
            frames: frames.iter().map(|f| (*f).into()).collect(),
            count,
        };
        Profile {
            pid: 7,
            comm: "train".into(),
            frequency_hz: 99,
            duration_s: 5.0,
            stacks: vec![
                s(7, &["main", "step", "matmul"], 30),
                s(8, &["main", "step", "matmul"], 10),
                s(8, &["main", "load; data"], 5),
            ],
            samples: 45,
            ..Default::default()
        }
    }

    #[test]
    fn folded_merges_threads_unless_asked_not_to() {
        let p = profile();
        assert_eq!(
            p.folded(false),
            "train;main;load:_data 5\ntrain;main;step;matmul 40\n"
        );
        let per = p.folded(true);
        assert!(per.contains("train;t7-7;main;step;matmul 30\n"), "{per}");
        assert!(per.contains("train;t8-8;main;step;matmul 10\n"), "{per}");
    }

    #[test]
    fn the_svg_is_a_flame_graph_of_the_same_stacks() {
        let svg = String::from_utf8(profile().svg(false).unwrap()).unwrap();
        assert!(svg.starts_with("<?xml"), "{}", &svg[..40]);
        assert!(svg.contains("matmul") && svg.contains("pid 7 (train)"));
    }
}
