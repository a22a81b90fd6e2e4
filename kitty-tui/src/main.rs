//! kitty-tui: the command-line entry point. Parses arguments, dispatches to
//! a command, and turns every error into one clear line on stderr.

use clap::Parser;
use kitty_tui::{cli, cmd};

fn main() {
    let cli = cli::Cli::parse();
    let code = match cmd::dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("kitty-tui: {e}");
            2
        }
    };
    std::process::exit(code);
}
