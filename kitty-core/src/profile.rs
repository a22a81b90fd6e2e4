//! An on-CPU profile of one process, symbolized: stacks with sample counts,
//! what was lost, and how to write it (folded stacks for inferno-flamegraph
//! and speedscope, or an SVG flame graph made with inferno).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Profile {
    pub pid: u32,
    pub comm: String,
    pub frequency_hz: u64,
    pub duration_s: f64,
    pub stacks: Vec<StackSample>,
    /// Samples taken in the target (sum of counts, lost stacks included).
    pub samples: u64,
    pub lost_user_stacks: u64,
    pub lost_kernel_stacks: u64,
    /// Stacks that collided with another in the kernel's stack map.
    pub collisions: u64,
    /// Samples dropped because the kernel's sample map was full.
    pub dropped: u64,
    /// Whatever the reader should know (shallow stacks, a process that exited).
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct StackSample {
    pub tid: u32,
    pub thread: String,
    /// Outermost caller first; kernel frames (suffixed `_[k]`) last.
    pub frames: Vec<String>,
    pub count: u64,
}

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
    pub fn svg(&self, per_thread: bool) -> Result<Vec<u8>, String> {
        let folded = self.folded(per_thread);
        let mut opts = inferno::flamegraph::Options::default();
        opts.title = format!(
            "kitty on-CPU profile: pid {} ({}), {} Hz, {:.0} s",
            self.pid, self.comm, self.frequency_hz, self.duration_s
        );
        opts.count_name = "samples".into();
        let mut out = Vec::new();
        inferno::flamegraph::from_lines(&mut opts, folded.lines(), &mut out)
            .map_err(|e| format!("flame graph: {e}"))?;
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

    fn profile() -> Profile {
        let s = |tid: u32, frames: &[&str], count| StackSample {
            tid,
            thread: format!("t{tid}"),
            frames: frames.iter().map(|f| f.to_string()).collect(),
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
