//! Runs the Flight Recorder dumps (`F`): each rank asked on a thread of its
//! own (a rank slow to dump never holds up the others, or the screen), the
//! answers handed back together when the event loop polls.

use crate::tui::app::dumps::{DumpAnswer, DumpTarget};
use kitty_core::sources::flight_recorder;
use std::sync::mpsc;
use std::time::Duration;

/// How long a rank has to write its dump.
pub const TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Default)]
pub struct Dumper {
    pending: Option<(usize, mpsc::Receiver<DumpAnswer>, Vec<DumpAnswer>)>,
}

impl Dumper {
    pub fn start(&mut self, targets: Vec<DumpTarget>) {
        let (tx, rx) = mpsc::channel();
        let n = targets.len();
        for t in targets {
            let (tx2, t2) = (tx.clone(), t.clone());
            let spawned = std::thread::Builder::new()
                .name("kitty-fr-dump".into())
                .spawn(move || {
                    let r = flight_recorder::dump(&t2.paths, TIMEOUT);
                    let _ = tx2.send((t2, r));
                });
            if let Err(e) = spawned {
                let _ = tx.send((t, Err(format!("cannot start a thread: {e}"))));
            }
        }
        self.pending = Some((n, rx, Vec::new()));
    }

    pub fn running(&self) -> bool {
        self.pending.is_some()
    }

    /// Every answer, once the last came.
    pub fn poll(&mut self) -> Option<Vec<DumpAnswer>> {
        let (n, rx, got) = self.pending.as_mut()?;
        while let Ok(a) = rx.try_recv() {
            got.push(a);
        }
        if got.len() >= *n {
            return self.pending.take().map(|p| p.2);
        }
        None
    }
}
