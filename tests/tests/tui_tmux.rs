//! The real binary in tmux: the demo flags its straggler on screen, `q`
//! exits cleanly with the terminal restored; a recording replays and steps.

use kitty_tests::*;
use std::process::Command;
use std::time::{Duration, Instant};

struct Tmux {
    name: String,
}

impl Tmux {
    fn start(cmd: &str, w: u16, h: u16) -> Option<Tmux> {
        if Command::new("tmux").arg("-V").output().is_err() {
            eprintln!("SKIP: tmux is not installed");
            return None;
        }
        let name = format!("kitty-test-{}-{}", std::process::id(), w);
        let st = Command::new("tmux")
            .args([
                "new-session",
                "-d",
                "-s",
                &name,
                "-x",
                &w.to_string(),
                "-y",
                &h.to_string(),
            ])
            .env("TERM", "xterm-256color")
            .status()
            .unwrap();
        assert!(st.success());
        // Keep the pane after the program exits, to read its status.
        Command::new("tmux")
            .args(["set-option", "-t", &name, "remain-on-exit", "on"])
            .status()
            .unwrap();
        Command::new("tmux")
            .args(["respawn-pane", "-k", "-t", &name, cmd])
            .status()
            .unwrap();
        Some(Tmux { name })
    }
    fn capture(&self) -> String {
        let out = Command::new("tmux")
            .args(["capture-pane", "-p", "-t", &self.name])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).to_string()
    }
    fn keys(&self, keys: &[&str]) {
        Command::new("tmux")
            .args(["send-keys", "-t", &self.name])
            .args(keys)
            .status()
            .unwrap();
    }
    fn query(&self, fmt: &str) -> String {
        let out = Command::new("tmux")
            .args(["display-message", "-p", "-t", &self.name, fmt])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
    fn wait_for(&self, what: &dyn Fn(&str) -> bool, secs: u64) -> String {
        let t = Instant::now();
        loop {
            let s = self.capture();
            if what(&s) || t.elapsed() > Duration::from_secs(secs) {
                return s;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &self.name])
            .status();
    }
}

#[test]
fn demo_flags_the_straggler_and_quits_cleanly() {
    let _g = serial();
    // A shell stays behind to report the exit status and keep the pane
    // alive, so the terminal state after exit can be read.
    let cmd = format!(
        "sh -c '{} demo; echo EXIT=$?; sleep 60'",
        kitty_bin().display()
    );
    let Some(t) = Tmux::start(&cmd, 160, 45) else {
        return;
    };
    let screen = t.wait_for(&|s| s.contains("rank 2: run-queue delay"), 25);
    assert!(
        screen.contains("rank 2: run-queue delay"),
        "straggler not flagged:\n{screen}"
    );
    assert!(
        screen.contains("run-queue delay") && screen.contains("x"),
        "{screen}"
    );
    assert!(
        screen.contains("kitty-demo (4 ranks, step"),
        "job step time shown:\n{screen}"
    );
    // Detail view and back.
    t.keys(&["G"]);
    t.keys(&["Enter"]);
    let detail = t.wait_for(&|s| s.contains("sockets ("), 5);
    assert!(detail.contains("threads by run-queue delay"), "{detail}");
    t.keys(&["Escape"]);
    t.keys(&["q"]);
    let s = t.wait_for(&|s| s.contains("EXIT="), 10);
    assert!(s.contains("EXIT=0"), "kitty did not exit 0 on q:\n{s}");
    assert_eq!(t.query("#{alternate_on}"), "0", "alternate screen left on");
    assert_eq!(t.query("#{cursor_flag}"), "1", "cursor hidden after exit");
    // The demo's processes died with it.
    std::thread::sleep(Duration::from_millis(300));
    let leftovers: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains("demo-hog") || c.contains("demo-rank"))
        .collect();
    assert!(
        leftovers.is_empty(),
        "demo processes left behind: {leftovers:?}"
    );
}

#[test]
fn replay_of_a_recording_steps_with_t() {
    let _g = serial();
    let mut procs = Procs::default();
    start_ring(&mut procs, 3, "replayed", &|_| vec![]);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("r.kitty");
    let st = Command::new(kitty_bin())
        .args(["record", "-o"])
        .arg(&file)
        .args(["--duration", "4s"])
        .status()
        .unwrap();
    assert!(st.success());
    drop(procs);
    let cmd = format!("{} replay {}", kitty_bin().display(), file.display());
    let Some(t) = Tmux::start(&cmd, 160, 45) else {
        return;
    };
    let s = t.wait_for(&|s| s.contains("REPLAY"), 10);
    assert!(s.contains("replayed (3 ranks"), "{s}");
    t.keys(&["Space"]);
    t.keys(&[":", "seek start", "Enter"]);
    let s = t.wait_for(&|s| s.contains("(1/"), 5);
    assert!(s.contains("REPLAY") && s.contains("(1/"), "{s}");
    t.keys(&["T"]);
    t.keys(&["T"]);
    let s = t.wait_for(&|s| s.contains("(3/"), 5);
    assert!(s.contains("(3/"), "stepped twice:\n{s}");
    t.keys(&["t"]);
    let s = t.wait_for(&|s| s.contains("(2/"), 5);
    assert!(s.contains("(2/"), "stepped back:\n{s}");
    t.keys(&["q"]);
    let t0 = Instant::now();
    while t.query("#{pane_dead}") != "1" && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(t.query("#{pane_dead_status}"), "0");
}
