//! Sinks: where frames go. The recording format (`record`), the Prometheus
//! model (`exporter`), tidy rows for pandas and jq (`export`) and the
//! `snapshot --json` document (`snapshot`), and the policy for the files
//! they write (`files`). The TUI is the binary's sink.

pub mod export;
pub mod exporter;
pub mod files;
pub mod record;
pub mod snapshot;
