//! `doctor`: prints the node's checks as text or JSON.

use crate::cli::Common;
use kitty_core::sources::Roots;

/// Loads the probes once and reports each: attached (strategy) or why not.
/// They are released again when this returns.
fn ebpf_checks() -> Vec<kitty_core::doctor::Check> {
    let probes = kitty_probe_ebpf::Probes::start();
    let tried = probes.rtt_tried();
    let profiler = match kitty_probe_ebpf::profile::check() {
        Ok(()) => (
            "ok",
            "perf_event BPF on cpu-clock attaches: `p` and `kitty-tui profile` work".to_string(),
        ),
        Err(e) => ("warn", format!("unavailable: {e}")),
    };
    let mut out: Vec<kitty_core::doctor::Check> = probes
        .statuses()
        .iter()
        .cloned()
        .map(|(name, st)| {
            let ok = st.is_ok();
            let mut detail = if ok {
                format!("attached ({})", st.strategy.unwrap_or_default())
            } else {
                format!("unavailable: {}", st.reason.unwrap_or_default())
            };
            if ok && name == "ebpf.rtt" && !tried.is_empty() {
                detail.push_str(&format!(
                    "; better strategies not available here: {}",
                    tried.join("; ")
                ));
            }
            kitty_core::doctor::Check {
                name,
                status: if ok { "ok" } else { "warn" }.into(),
                detail,
            }
        })
        .collect();
    out.push(kitty_core::doctor::Check {
        name: "ebpf.profile".into(),
        status: profiler.0.into(),
        detail: profiler.1,
    });
    out
}

pub fn run(c: &Common, json: bool) -> super::Result<i32> {
    let mut checks = kitty_core::doctor::run(&Roots::new(&c.proc_root));
    if !c.no_gpu {
        checks.push(kitty_core::doctor::nvml_check(c.nvml_lib.clone()));
    }
    if !c.no_ebpf {
        checks.extend(ebpf_checks());
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
