//! The `snapshot --json` document (DESIGN's shape): the final state of a
//! short sampling run. Scripts and tests parse it.

use crate::frame::Frame;
use serde_json::{json, Map, Value};

pub fn snapshot_json(f: &Frame) -> Value {
    let sources: Map<String, Value> = f
        .sources
        .iter()
        .map(|(k, v)| {
            (
                k.clone(),
                serde_json::to_value(v).expect("status serializes"),
            )
        })
        .collect();
    let ranks: Vec<Value> = f
        .ranks
        .iter()
        .map(|r| {
            json!({
                "rank": r.labels.rank,
                "local_rank": r.labels.local_rank,
                "pid": r.key.pid,
                "start_time": r.key.start_time,
                "comm": r.comm,
                "job": r.labels.job,
                "pod_uid": r.labels.pod_uid,
                "container_id": r.labels.container_id,
                "gpu": r.gpu,
                "state": r.state,
                "signals": r.signals,
                "sockets": r.sockets.iter().map(|s| json!({
                    "local": s.local, "remote": s.remote, "state": s.state,
                    "tx_queue": s.tx_queue, "rx_queue": s.rx_queue,
                    "rtt_us": s.info.as_ref().map(|i| i.rtt_us),
                    "total_retrans": s.info.as_ref().map(|i| i.total_retrans),
                    "signals": s.signals,
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    let gpus: Vec<Value> = f
        .gpus
        .iter()
        .map(|g| {
            let procs: Vec<Value> = g
                .processes
                .iter()
                .map(|(pid, mem)| json!({"pid": pid, "used_bytes": mem}))
                .collect();
            json!({
                "index": g.index, "name": g.name, "status": g.status, "signals": g.signals,
                "throttle": g.throttle, "xid_recent": g.xid_recent, "xid_last": g.xid_last,
                "processes": procs,
            })
        })
        .collect();
    json!({
        "kitty_version": crate::KITTY_VERSION,
        "node": f.node,
        "taken_at": crate::timefmt::rfc3339(f.wall_ns),
        "interval_ms": f.interval_ms,
        "sources": sources,
        "ranks": ranks,
        "gpus": gpus,
        "host": {"signals": f.host.signals, "cpu_pct": f.host.cpu_pct},
        "netns": f.netns.iter().map(|n| json!({"inode": n.inode, "pids": n.pids, "signals": n.signals})).collect::<Vec<_>>(),
        "verdicts": f.verdicts,
        "job_step_ms": f.job_step_ms,
        "flows": f.flows,
        "events": f.events,
    })
}
