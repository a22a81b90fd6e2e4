//! Flight Recorder dumps (`F`): which ranks of the selected rank's job to
//! ask, and what they answered. The event loop carries out the request.

use super::{App, Request, View};
use kitty_core::model::{FlightRecorderPaths, ProcKey};
use kitty_core::sources::flight_recorder::{behind, Dump};

/// One rank to ask for a dump.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DumpTarget {
    pub key: ProcKey,
    pub rank: Option<u32>,
    pub paths: FlightRecorderPaths,
}

/// One rank's answer.
pub type DumpAnswer = (DumpTarget, Result<Dump, String>);

/// The last dumps asked for: pending, or the answers with who is behind.
#[derive(Debug, Clone, Default)]
pub struct Dumps {
    pub pending: Option<usize>,
    pub answers: Vec<DumpAnswer>,
    pub behind: Vec<String>,
    /// When the answers came (wall ns of the frame then shown).
    pub at_ns: u64,
}

impl App {
    /// `F`: asks every rank of the selected rank's job that names a
    /// Flight Recorder pipe for a dump, and shows `:fr`.
    pub(super) fn ask_dumps(&mut self) {
        if self.replay.is_some() {
            self.message = Some("Flight Recorder dumps need live ranks; this is a replay".into());
            return;
        }
        if self.dumps.pending.is_some() {
            self.nav.view = View::FlightRecorder;
            return;
        }
        let Some(sel) = self.selected_rank() else {
            self.message = Some("no rank selected".into());
            return;
        };
        let job = sel.labels.job_key();
        let targets: Vec<DumpTarget> = self
            .frame()
            .map(|f| {
                f.ranks
                    .iter()
                    .filter(|r| r.labels.job_key() == job)
                    .filter_map(|r| {
                        Some(DumpTarget {
                            key: r.key,
                            rank: r.labels.rank,
                            paths: r.flight_recorder.clone()?,
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        if targets.is_empty() {
            self.message = Some(
                "no rank of this job names a Flight Recorder pipe (TORCH_NCCL_DEBUG_INFO_PIPE_FILE with TORCH_NCCL_TRACE_BUFFER_SIZE > 0)".into(),
            );
            return;
        }
        self.dumps = Dumps {
            pending: Some(targets.len()),
            ..Default::default()
        };
        self.requests.push(Request::FlightRecorder(targets));
        self.nav.view = View::FlightRecorder;
    }

    /// The ranks answered (or failed to).
    pub fn dumps_finished(&mut self, mut answers: Vec<DumpAnswer>) {
        answers.sort_by_key(|(t, _)| (t.rank, t.key.pid));
        let ok: Vec<(Option<u32>, &Dump)> = answers
            .iter()
            .filter_map(|(t, r)| r.as_ref().ok().map(|d| (t.rank, d)))
            .collect();
        let behind = behind(&ok);
        self.dumps = Dumps {
            pending: None,
            behind,
            at_ns: self.frame().map_or(0, |f| f.wall_ns),
            answers,
        };
    }

    pub fn dumps(&self) -> &Dumps {
        &self.dumps
    }
}
