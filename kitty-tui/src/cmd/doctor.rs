//! `doctor`: prints the node's checks as text or JSON.

use crate::cli::Common;
use kitty_core::sources::Roots;

pub fn run(c: &Common, json: bool) -> super::Result<i32> {
    let mut checks = kitty_core::doctor::run(&Roots::new(&c.proc_root));
    if !c.no_gpu {
        checks.push(kitty_core::doctor::nvml_check(c.nvml_lib.clone()));
    }
    if json {
        let doc = serde_json::json!({
            "kitty_version": kitty_core::KITTY_VERSION,
            "node": kitty_core::sampler::hostname(),
            "checks": checks,
        });
        println!("{}", serde_json::to_string_pretty(&doc).expect("json"));
    } else {
        for ch in &checks {
            let mark = match ch.status.as_str() {
                "ok" => "ok  ",
                "warn" => "warn",
                _ => "FAIL",
            };
            println!("{mark}  {:<18} {}", ch.name, ch.detail);
        }
    }
    Ok(kitty_core::doctor::exit_code(&checks))
}
