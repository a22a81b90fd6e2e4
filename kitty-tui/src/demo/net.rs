//! The demo's network stragglers (feature `netlab`): ranks in network
//! namespaces behind the fault lab, and the fault put on one rank's link
//! after a healthy start.

use super::Straggler;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The lab the demo's ranks run in; torn down when dropped.
pub struct NetFault {
    lab: Arc<Mutex<kitty_faultlab::Lab>>,
    n: usize,
}

impl NetFault {
    pub fn new(n: usize) -> std::io::Result<NetFault> {
        Ok(NetFault {
            lab: Arc::new(Mutex::new(kitty_faultlab::Lab::new(n)?)),
            n,
        })
    }

    /// Runs `rank` in its namespace, talking to the others by address.
    pub fn place(&self, rank: usize, cmd: &mut Command) -> std::io::Result<()> {
        let hosts = (0..self.n)
            .map(|i| kitty_faultlab::addr(i).to_string())
            .collect::<Vec<_>>()
            .join(",");
        // Bigger chunks: a throttled link then shows its queue.
        cmd.args(["--hosts", &hosts, "--chunk-kb", "512"]);
        self.lab
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .enter(rank, cmd)
    }

    /// After a healthy start, puts the fault on one rank's link.
    pub fn inject_later(self, kind: Straggler, rank: usize, after: Duration) -> NetFault {
        let lab = self.lab.clone();
        std::thread::spawn(move || {
            std::thread::sleep(after);
            let mut lab = lab.lock().unwrap_or_else(|e| e.into_inner());
            let r = match kind {
                Straggler::NetDelay => {
                    lab.set_delay(rank, Duration::from_millis(50));
                    Ok(())
                }
                Straggler::NetLoss => lab.set_loss(rank, 0.05),
                Straggler::NetThrottle => lab.set_throttle(rank, "8mbit"),
                _ => Ok(()),
            };
            if let Err(e) = r {
                crate::say::line(format_args!("demo: could not inject the fault: {e}"));
            }
        });
        self
    }
}
