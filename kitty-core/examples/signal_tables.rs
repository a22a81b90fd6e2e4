//! Prints the README's signal tables from the catalog (rank, host, gpu,
//! netns, nic), each after a `<!-- signals:SCOPE -->` line, and the
//! exporter's mapping after `<!-- metrics -->`: `cargo run -p kitty-core
//! --example signal_tables`.
#![allow(clippy::print_stdout)]
use kitty_core::model::signal::{markdown_table, scope};

fn main() {
    for (what, sc) in [
        ("rank", scope::RANK),
        ("host", scope::HOST),
        ("gpu", scope::GPU),
        ("netns", scope::NETNS),
        ("nic", scope::NIC),
    ] {
        println!("<!-- signals:{what} -->\n{}", markdown_table(sc));
    }
    println!(
        "<!-- metrics -->\n{}",
        kitty_core::sinks::exporter::names::markdown_table()
    );
}
