//! The demo rank's NCCL Inspector output: when its environment enables
//! Inspector (`NCCL_INSPECTOR_ENABLE=1`, `NCCL_INSPECTOR_DUMP_DIR`), each
//! ring all-reduce is written as NCCL's inspector plugin writes a
//! collective (format v4.0: `header`, `metadata`, `coll_perf`, one JSON
//! object per line), with the all-reduce's measured time, so kitty's
//! Inspector reader and the late-arrival verdict run on a real job here.

use std::io::Write;
use std::time::Duration;

pub struct InspectorOut {
    file: std::fs::File,
    comm: String,
    rank: usize,
    world: usize,
    hostname: String,
}

impl InspectorOut {
    /// Opens the rank's file in the dump directory, when Inspector is on.
    pub fn from_env(rank: usize, world: usize, job: &str) -> Option<InspectorOut> {
        let on = std::env::var("NCCL_INSPECTOR_ENABLE").is_ok_and(|v| v.trim() != "0");
        if !on {
            return None;
        }
        let dir = std::env::var("NCCL_INSPECTOR_DUMP_DIR")
            .unwrap_or_else(|_| "nccl-inspector-unknown-jobid".into());
        std::fs::create_dir_all(&dir).ok()?;
        let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "localhost".into());
        let path =
            std::path::Path::new(&dir).join(format!("{hostname}-pid{}.log", std::process::id()));
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .ok()?;
        // One communicator per job: its id from the job's name, as stable
        // as NCCL's hash of the unique id.
        let comm = format!(
            "0x{:x}",
            job.bytes()
                .fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64)
                    .wrapping_mul(0x0000_0100_0000_01b3))
        );
        Some(InspectorOut {
            file,
            comm,
            rank,
            world,
            hostname,
        })
    }

    /// Writes one all-reduce of `bytes` that took `exec`.
    pub fn collective(&mut self, seq: u64, bytes: usize, exec: Duration) {
        let us = exec.as_micros().max(1) as u64;
        let algbw = bytes as f64 / (us as f64 / 1e6) / 1e9;
        // A ring all-reduce moves 2(n-1)/n of the buffer per rank.
        let busbw = algbw * 2.0 * (self.world - 1) as f64 / self.world as f64;
        let now_us = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64);
        let line = serde_json::json!({
            "header": {"id": self.comm, "rank": self.rank, "n_ranks": self.world, "nnodes": 1},
            "metadata": {
                "inspector_output_format_version": "v4.0",
                "git_rev": "",
                "rec_mechanism": "kitty_demo",
                "dump_timestamp_us": now_us,
                "hostname": self.hostname,
                "pid": std::process::id(),
            },
            "coll_perf": {
                "coll": "AllReduce",
                "coll_sn": seq,
                "coll_msg_size_bytes": bytes,
                "coll_exec_time_us": us,
                "coll_timing_source": "collective_cpu",
                "coll_algobw_gbs": algbw,
                "coll_busbw_gbs": busbw,
            }
        });
        let _ = writeln!(self.file, "{line}");
    }
}
