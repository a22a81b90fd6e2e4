//! kitty-core: sources -> Frame -> History -> Analysis, plus the recording format.
//!
//! Nothing in this crate draws to a terminal. The binary (`kitty-tui`) wires the
//! [`engine::Engine`] to its sinks: the TUI, the recorder, `snapshot --json`.

pub mod analysis;
pub mod doctor;
pub mod engine;
pub mod export;
pub mod exporter;
pub mod flame;
pub mod frame;
pub mod history;
pub mod links;
pub mod profile;
pub mod record;
pub mod sampler;
pub mod signals;
pub mod snapshot;
pub mod sources;
pub mod talkers;
pub mod timefmt;

pub use frame::Frame;

/// The version written into snapshots and recordings.
pub const KITTY_VERSION: &str = env!("CARGO_PKG_VERSION");
