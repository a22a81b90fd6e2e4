//! kitty-tui as a library: the CLI, commands, TUI and demo job, so that
//! benchmarks and tests can drive them. The binary is `src/main.rs`.

pub mod cli;
pub mod cmd;
pub mod demo;
pub mod tui;
