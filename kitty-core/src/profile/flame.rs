//! The flame graph as a tree the TUI can walk: merged (or per-thread) stacks
//! into nodes with total and self counts, sibling order by size, zoom,
//! and search with the matched share. Pure data: drawing is the TUI's.

use super::Profile;

#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub name: String,
    pub total: u64,
    pub self_count: u64,
    pub parent: Option<usize>,
    /// Largest first.
    pub children: Vec<usize>,
    pub depth: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct FlameTree {
    /// Node 0 is the root ("all").
    pub nodes: Vec<Node>,
}

impl FlameTree {
    pub fn build(p: &Profile, per_thread: bool) -> FlameTree {
        let mut t = FlameTree {
            nodes: vec![Node {
                name: format!("all ({})", p.comm),
                total: 0,
                self_count: 0,
                parent: None,
                children: Vec::new(),
                depth: 0,
            }],
        };
        for s in &p.stacks {
            let thread = per_thread.then(|| format!("{}-{}", s.thread, s.tid));
            let mut at = 0;
            t.nodes[0].total += s.count;
            for name in thread
                .iter()
                .map(String::as_str)
                .chain(s.frames.iter().map(|f| f.as_str()))
            {
                at = t.child(at, name);
                t.nodes[at].total += s.count;
            }
            t.nodes[at].self_count += s.count;
        }
        for i in 0..t.nodes.len() {
            let mut kids = std::mem::take(&mut t.nodes[i].children);
            kids.sort_by(|a, b| {
                t.nodes[*b]
                    .total
                    .cmp(&t.nodes[*a].total)
                    .then(t.nodes[*a].name.cmp(&t.nodes[*b].name))
            });
            t.nodes[i].children = kids;
        }
        t
    }

    fn child(&mut self, parent: usize, name: &str) -> usize {
        if let Some(&c) = self.nodes[parent]
            .children
            .iter()
            .find(|&&c| self.nodes[c].name == name)
        {
            return c;
        }
        let depth = self.nodes[parent].depth + 1;
        self.nodes.push(Node {
            name: name.to_string(),
            total: 0,
            self_count: 0,
            parent: Some(parent),
            children: Vec::new(),
            depth,
        });
        let id = self.nodes.len() - 1;
        self.nodes[parent].children.push(id);
        id
    }

    pub fn total(&self) -> u64 {
        self.nodes[0].total
    }

    /// Percent of all samples.
    pub fn pct(&self, count: u64) -> f64 {
        count as f64 * 100.0 / self.total().max(1) as f64
    }

    /// The previous / next sibling (wrapping), or the node itself.
    pub fn sibling(&self, n: usize, forward: bool) -> usize {
        let Some(p) = self.nodes[n].parent else {
            return n;
        };
        let kids = &self.nodes[p].children;
        let i = kids.iter().position(|&c| c == n).unwrap_or(0);
        let j = if forward {
            (i + 1) % kids.len()
        } else {
            (i + kids.len() - 1) % kids.len()
        };
        kids[j]
    }

    /// Is `n` inside the subtree of `root`?
    pub fn within(&self, mut n: usize, root: usize) -> bool {
        loop {
            if n == root {
                return true;
            }
            match self.nodes[n].parent {
                Some(p) => n = p,
                None => return false,
            }
        }
    }

    /// Nodes whose name contains `q` (case-insensitive), and the share of
    /// all samples under them (each sample counted once, however many of its
    /// frames match).
    pub fn search(&self, q: &str) -> (Vec<bool>, f64) {
        let q = q.to_lowercase();
        let hit: Vec<bool> = self
            .nodes
            .iter()
            .map(|n| !q.is_empty() && n.name.to_lowercase().contains(&q))
            .collect();
        // Count the samples of matching nodes whose ancestors do not match.
        let mut covered = 0;
        for (i, n) in self.nodes.iter().enumerate() {
            if !hit[i] {
                continue;
            }
            let mut p = n.parent;
            let mut inside = false;
            while let Some(a) = p {
                if hit[a] {
                    inside = true;
                    break;
                }
                p = self.nodes[a].parent;
            }
            if !inside {
                covered += n.total;
            }
        }
        (hit, self.pct(covered))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::StackSample;

    fn tree(per_thread: bool) -> FlameTree {
        let s = |tid, frames: &[&str], count| StackSample {
            tid,
            thread: "w".into(),
            frames: frames.iter().map(|f| (*f).into()).collect(),
            count,
        };
        let p = Profile {
            comm: "train".into(),
            stacks: vec![
                s(1, &["main", "step", "matmul"], 60),
                s(2, &["main", "step"], 10),
                s(2, &["main", "load", "read"], 30),
            ],
            ..Default::default()
        };
        FlameTree::build(&p, per_thread)
    }

    #[test]
    fn totals_self_counts_and_largest_child_first() {
        let t = tree(false);
        assert_eq!(t.total(), 100);
        let main = t.nodes[0].children[0];
        assert_eq!(t.nodes[main].name, "main");
        let step = t.nodes[main].children[0];
        assert_eq!((t.nodes[step].total, t.nodes[step].self_count), (70, 10));
        let load = t.sibling(step, true);
        assert_eq!(t.nodes[load].name, "load");
        assert_eq!(t.sibling(load, true), step, "wraps");
        assert!(t.within(t.nodes[load].children[0], main));
    }

    #[test]
    fn search_counts_each_sample_once() {
        let t = tree(false);
        let (hit, share) = t.search("MA");
        assert!(hit.iter().filter(|h| **h).count() >= 2, "main and matmul");
        assert!(
            (share - 100.0).abs() < 1e-9,
            "matmul lies under main: {share}"
        );
        assert!((t.search("read").1 - 30.0).abs() < 1e-9);
    }

    #[test]
    fn per_thread_roots_each_thread() {
        let t = tree(true);
        let names: Vec<&str> = t.nodes[0]
            .children
            .iter()
            .map(|c| t.nodes[*c].name.as_str())
            .collect();
        assert_eq!(names, vec!["w-1", "w-2"]);
    }
}
