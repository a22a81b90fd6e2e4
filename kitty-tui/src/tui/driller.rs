//! Runs the cluster view's drill-downs: one node's `/api/snapshot` fetched
//! on a background thread (a slow node never blocks the screen), its
//! answer handed back to the app when the event loop polls.

use kitty_core::model::ProcKey;
use kitty_core::sources::node_api::{self, RankDetail};
use std::sync::mpsc;
use std::time::Duration;

/// How long a node has to answer.
pub const TIMEOUT: Duration = Duration::from_secs(3);

type Answer = (ProcKey, Result<RankDetail, String>);

#[derive(Default)]
pub struct Driller {
    pending: Option<mpsc::Receiver<Answer>>,
}

impl Driller {
    /// Starts a fetch; one asked before it ends is superseded.
    pub fn start(
        &mut self,
        key: ProcKey,
        endpoint: String,
        job: Option<String>,
        rank: Option<u32>,
    ) {
        let (tx, rx) = mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("kitty-drill".into())
            .spawn(move || {
                let r = node_api::rank_detail(&endpoint, job.as_deref(), rank, TIMEOUT);
                let _ = tx.send((key, r));
            });
        self.pending = match spawned {
            Ok(_) => Some(rx),
            Err(e) => {
                let (tx, rx) = mpsc::channel();
                let _ = tx.send((key, Err(format!("cannot start a thread: {e}"))));
                Some(rx)
            }
        };
    }

    pub fn running(&self) -> bool {
        self.pending.is_some()
    }

    /// The answer, once it came.
    pub fn poll(&mut self) -> Option<Answer> {
        let rx = self.pending.as_ref()?;
        match rx.try_recv() {
            Ok(a) => {
                self.pending = None;
                Some(a)
            }
            Err(mpsc::TryRecvError::Empty) => None,
            Err(mpsc::TryRecvError::Disconnected) => {
                self.pending = None;
                None
            }
        }
    }
}
