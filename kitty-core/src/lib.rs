//! kitty-core: the one data flow, by stage.
//!
//! ```text
//! sources/ --> sampler/ --> model::Frame --> engine (pipeline of enrichers,
//!   procfs,      two samples      typed signals,     then analysis/) --> sinks/
//!   sock_diag,   -> rates         sanitised text                           record, exporter,
//!   NVML                                                                   export, snapshot
//! ```
//!
//! - `sources`: readers of the live system, and the `Enricher` contract for
//!   sources that add to each frame (NVML here, eBPF probes in their crate).
//! - `sampler`: one tick of the procfs / sock_diag sources into a Frame.
//! - `model`: the Frame, the signal catalog (`Sig`), sanitised `Text`,
//!   history rings, the one value formatter.
//! - `analysis`: link attribution and verdicts, plus view models (peer
//!   bands, top talkers).
//! - `engine`: the sampling thread wiring sampler, pipeline and analysis
//!   to one consumer.
//! - `sinks`: the recording format, the Prometheus model, exports, the
//!   snapshot document.
//! - `profile`: an on-CPU profile, its flame tree and its writers.
//! - `doctor`: what works on this node, and why not.
//!
//! Nothing in this crate draws to a terminal: the binary (`kitty-tui`) owns
//! the TUI.

pub mod analysis;
pub mod doctor;
pub mod engine;
pub mod model;
pub mod profile;
pub mod sampler;
pub mod sinks;
pub mod sources;

pub use model::Frame;

/// The version written into snapshots and recordings.
pub const KITTY_VERSION: &str = env!("CARGO_PKG_VERSION");
