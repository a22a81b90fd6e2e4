//! kitty-tui as a library: the CLI, commands, TUI and demo job, so that
//! benchmarks and tests can drive them. The binary is `src/main.rs`.
//!
//! Layers (each imports only the ones below it):
//! `cli` (arguments) and `cmd` (one file per command) at the top; `tui`,
//! `demo` and `pipeline` (the ordered enrichers) below; `error` (exit codes)
//! and `say` (lines on stderr) at the bottom. Output files follow `kitty_core::sinks::files`.

pub mod cli;
pub mod cmd;
pub mod demo;
pub mod error;
pub mod pipeline;
pub mod say;
pub mod tui;
