//! Profiles: an on-CPU or off-CPU profile of one process, symbolized
//! (stacks with their weight, and what was lost), the flame tree the TUI
//! walks (`flame`), and the writers for folded stacks and SVG (`output`).
//! The probe crate fills a `Profile`; nothing here reads the system.

pub mod flame;
pub mod output;

use crate::model::Text;
use serde::{Deserialize, Serialize};

/// What a profile's weights count.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ProfileKind {
    /// Where the process runs: samples of the CPU clock.
    #[default]
    OnCpu,
    /// Where it waits: microseconds off-CPU from sched_switch, under a root
    /// frame that says whether it was runnable (waiting for a CPU) or
    /// blocked (sleeping: a recv, a lock, I/O).
    OffCpu,
}

impl ProfileKind {
    pub fn title(self) -> &'static str {
        match self {
            ProfileKind::OnCpu => "on-CPU",
            ProfileKind::OffCpu => "off-CPU",
        }
    }

    /// The unit of a stack's count.
    pub fn unit(self) -> &'static str {
        match self {
            ProfileKind::OnCpu => "samples",
            ProfileKind::OffCpu => "us",
        }
    }
}

/// The root frame of an off-CPU wait by the state the thread left in.
pub const RUNNABLE_FRAME: &str = "[runnable: waiting for a CPU]";
pub const BLOCKED_FRAME: &str = "[blocked: sleeping in the kernel]";
/// A wait that began before the profile did (its state and stack then are
/// unknown).
pub const BEFORE_FRAME: &str = "[off-CPU since before the profile]";

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Profile {
    #[serde(default)]
    pub kind: ProfileKind,
    pub pid: u32,
    pub comm: Text,
    pub frequency_hz: u64,
    pub duration_s: f64,
    pub stacks: Vec<StackSample>,
    /// Samples taken in the target (sum of counts, lost stacks included);
    /// off-CPU: the times a thread left the CPU.
    pub samples: u64,
    /// Off-CPU: microseconds waiting runnable and blocked, all threads.
    #[serde(default)]
    pub runnable_us: u64,
    #[serde(default)]
    pub blocked_us: u64,
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
    /// Samples (on-CPU) or microseconds (off-CPU).
    pub count: u64,
}

/// Symbols can be long (C++ templates); longer ones are cut with a marker.
pub const MAX_SYMBOL: usize = 512;

/// A frame name from a symbolizer, made safe to show.
pub fn symbol(raw: &str) -> Text {
    Text::capped(raw, MAX_SYMBOL)
}
