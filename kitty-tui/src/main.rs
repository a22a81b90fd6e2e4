//! kitty-tui: the command-line entry point. Parses arguments, runs the
//! command, and turns every error into one line on stderr and its exit
//! status (see `error`).

mod alloc;

use clap::Parser;
use kitty_tui::{cli, cmd, error};

fn main() {
    let cli = cli::Cli::parse();
    let code = match cmd::dispatch(cli) {
        Ok(code) => code,
        Err(e) if error::is_closed_pipe(&e) => error::CLOSED_PIPE,
        Err(e) => {
            kitty_tui::say::line(format_args!("{e:#}"));
            error::code_of(&e)
        }
    };
    std::process::exit(code);
}
