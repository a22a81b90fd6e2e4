//! The `snapshot --json` document (its shape is in the README): the final state of a
//! short sampling run, for scripts and tests. Versioned by
//! [`SCHEMA_VERSION`]; every time in it is RFC 3339 in UTC with nanoseconds.

use crate::model::time::rfc3339_ns;
use crate::model::{
    CgroupCpu, CollectiveFrame, Event, EventKind, Finding, FlowFrame, Frame, GpuStatus, NicFrame,
    NodeVerdict, RanInstead, Signals, Sources, StepTimes, Text, ThreadFrame, Verdict,
};
use serde::Serialize;

/// Bumped when a field is renamed or removed (adding one is not a change).
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Serialize)]
pub struct Snapshot<'a> {
    pub schema_version: u32,
    pub kitty_version: &'static str,
    pub node: &'a Text,
    pub taken_at: String,
    pub interval_ms: u64,
    pub sources: &'a Sources,
    pub ranks: Vec<Rank<'a>>,
    pub gpus: Vec<Gpu<'a>>,
    /// RDMA ports (when the node has any).
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub nics: &'a [NicFrame],
    pub host: Host<'a>,
    pub netns: Vec<Netns<'a>>,
    pub verdicts: &'a [Verdict],
    /// Whole slow nodes (cluster view only).
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub node_verdicts: &'a [NodeVerdict],
    /// Nodes whose series stopped (cluster view only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stale_nodes: Vec<&'a Text>,
    pub findings: &'a [Finding],
    pub job_step_ms: &'a StepTimes,
    pub flows: &'a [FlowFrame],
    pub events: Vec<SnapshotEvent<'a>>,
}

#[derive(Serialize)]
pub struct Rank<'a> {
    /// The rank's node (cluster view only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<&'a Text>,
    /// Its node stopped reporting: the data is its last (cluster view).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub stale: bool,
    pub rank: Option<u32>,
    pub local_rank: Option<u32>,
    pub pid: u32,
    pub start_time: u64,
    pub comm: &'a Text,
    pub job: Option<&'a Text>,
    pub job_id: Option<&'a Text>,
    pub slurm_job_id: Option<&'a Text>,
    pub pod_uid: Option<&'a Text>,
    pub container_id: Option<&'a Text>,
    pub gpu: Option<u32>,
    pub state: &'a Text,
    pub signals: &'a Signals,
    pub sockets: Vec<Socket<'a>>,
    /// The busiest threads by run-queue delay.
    pub threads: &'a [ThreadFrame],
    pub affinity: &'a [(u32, u32)],
    pub ran_instead: &'a [RanInstead],
    pub cgroup_cpu: Option<&'a CgroupCpu>,
    /// The RDMA ports it uses (`mlx5_0/1`).
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub nics: &'a [Text],
    /// Its latest collectives (NCCL Inspector).
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub collectives: &'a [CollectiveFrame],
}

#[derive(Serialize)]
pub struct Socket<'a> {
    pub local: &'a Text,
    pub remote: &'a Text,
    pub state: &'a Text,
    pub tx_queue: u64,
    pub rx_queue: u64,
    pub rtt_us: Option<u32>,
    pub total_retrans: Option<u32>,
    pub signals: &'a Signals,
}

#[derive(Serialize)]
pub struct Gpu<'a> {
    pub index: u32,
    pub name: &'a Text,
    pub status: GpuStatus,
    pub error: Option<&'a Text>,
    pub signals: &'a Signals,
    pub throttle: &'a [Text],
    pub xid_recent: u32,
    pub xid_last: &'a [u64],
    pub processes: Vec<GpuProcess>,
}

#[derive(Serialize)]
pub struct GpuProcess {
    pub pid: u32,
    pub used_bytes: u64,
}

#[derive(Serialize)]
pub struct Host<'a> {
    pub signals: &'a Signals,
    /// Utilization of each CPU, percent.
    pub cpu_pct: &'a [f64],
}

#[derive(Serialize)]
pub struct Netns<'a> {
    pub inode: u64,
    pub pids: &'a [u32],
    pub signals: &'a Signals,
}

#[derive(Serialize)]
pub struct SnapshotEvent<'a> {
    pub time: String,
    pub kind: EventKind,
    pub message: &'a Text,
}

/// The document of a frame (its events: whatever the caller put in it).
pub fn snapshot(f: &Frame) -> Snapshot<'_> {
    Snapshot {
        schema_version: SCHEMA_VERSION,
        kitty_version: crate::KITTY_VERSION,
        node: &f.node,
        taken_at: rfc3339_ns(f.wall_ns),
        interval_ms: f.interval_ms,
        sources: &f.sources,
        ranks: f
            .ranks
            .iter()
            .map(|r| Rank {
                node: r.node.as_ref(),
                stale: r.stale,
                rank: r.labels.rank,
                local_rank: r.labels.local_rank,
                pid: r.key.pid,
                start_time: r.key.start_time,
                comm: &r.comm,
                job: r.labels.job.as_ref(),
                job_id: r.labels.job_id.as_ref(),
                slurm_job_id: r.labels.slurm_job_id.as_ref(),
                pod_uid: r.labels.pod_uid.as_ref(),
                container_id: r.labels.container_id.as_ref(),
                gpu: r.gpu,
                state: &r.state,
                signals: &r.signals,
                sockets: r
                    .sockets
                    .iter()
                    .map(|s| Socket {
                        local: &s.local,
                        remote: &s.remote,
                        state: &s.state,
                        tx_queue: s.tx_queue,
                        rx_queue: s.rx_queue,
                        rtt_us: s.info.as_ref().map(|i| i.rtt_us),
                        total_retrans: s.info.as_ref().map(|i| i.total_retrans),
                        signals: &s.signals,
                    })
                    .collect(),
                threads: &r.threads,
                affinity: &r.affinity,
                ran_instead: &r.ran_instead,
                cgroup_cpu: r.cgroup_cpu.as_ref(),
                nics: &r.nics,
                collectives: &r.collectives,
            })
            .collect(),
        gpus: f
            .gpus
            .iter()
            .map(|g| Gpu {
                index: g.index,
                name: &g.name,
                status: g.status,
                error: g.error.as_ref(),
                signals: &g.signals,
                throttle: &g.throttle,
                xid_recent: g.xid_recent,
                xid_last: &g.xid_last,
                processes: g
                    .processes
                    .iter()
                    .map(|(pid, used_bytes)| GpuProcess {
                        pid: *pid,
                        used_bytes: *used_bytes,
                    })
                    .collect(),
            })
            .collect(),
        nics: &f.nics,
        host: Host {
            signals: &f.host.signals,
            cpu_pct: &f.host.cpu_pct,
        },
        netns: f
            .netns
            .iter()
            .map(|n| Netns {
                inode: n.inode,
                pids: &n.pids,
                signals: &n.signals,
            })
            .collect(),
        verdicts: &f.verdicts,
        node_verdicts: &f.node_verdicts,
        stale_nodes: {
            let mut n: Vec<&Text> = f
                .ranks
                .iter()
                .filter(|r| r.stale)
                .filter_map(|r| r.node.as_ref())
                .collect();
            n.sort();
            n.dedup();
            n
        },
        findings: &f.findings,
        job_step_ms: &f.job_step_ms,
        flows: &f.flows,
        events: f.events.iter().map(snapshot_event).collect(),
    }
}

fn snapshot_event(e: &Event) -> SnapshotEvent<'_> {
    SnapshotEvent {
        time: rfc3339_ns(e.wall_ns),
        kind: e.kind,
        message: &e.message,
    }
}

/// The document as a JSON value.
pub fn snapshot_json(f: &Frame) -> serde_json::Value {
    serde_json::to_value(snapshot(f)).expect("the snapshot serializes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versioned_with_one_time_form() {
        let mut f = Frame {
            wall_ns: 1_764_403_200_123_456_789,
            ..Default::default()
        };
        f.events
            .push(Event::new(f.wall_ns, EventKind::RankAppeared, "x"));
        let v = snapshot_json(&f);
        assert_eq!(v["schema_version"], SCHEMA_VERSION);
        assert_eq!(v["taken_at"], "2025-11-29T08:00:00.123456789Z");
        assert_eq!(v["events"][0]["time"], v["taken_at"]);
        assert!(v["events"][0].get("wall_ns").is_none());
    }
}
