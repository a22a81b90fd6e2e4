//! Profiles: an on-CPU profile of one process, symbolized (stacks with
//! sample counts, and what was lost), the flame tree the TUI walks
//! (`flame`), and the writers for folded stacks and SVG (`output`). The
//! probe crate fills a `Profile`; nothing here reads the system.

pub mod flame;
pub mod output;

use crate::model::Text;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Profile {
    pub pid: u32,
    pub comm: Text,
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
    pub notes: Vec<Text>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct StackSample {
    pub tid: u32,
    pub thread: Text,
    /// Outermost caller first; kernel frames (suffixed `_[k]`) last.
    pub frames: Vec<Text>,
    pub count: u64,
}

/// Symbols can be long (C++ templates); longer ones are cut with a marker.
pub const MAX_SYMBOL: usize = 512;

/// A frame name from a symbolizer, made safe to show.
pub fn symbol(raw: &str) -> Text {
    Text::capped(raw, MAX_SYMBOL)
}
