//! The labels of kitty's series, chosen to join with what runs beside it:
//! `node` (NODE_NAME or the host's name: dcgm-exporter's `Hostname`,
//! node_exporter's `nodename`), `training_job` (the training job: `job` is
//! Prometheus' own target label), `training_job_id` (the launch),
//! `slurm_job_id` and `hpc_job` (SLURM's job, the label NCCL Inspector and
//! dcgm-exporter use), `rank`, `local_rank`, `gpu` and `UUID` (as
//! dcgm-exporter names them), `pod_uid`, `container_id`; `pid` only when
//! asked for (it changes with every restart).

use crate::model::{Frame, GpuFrame, RankFrame};

pub type LabelSet = Vec<(String, String)>;

/// A label value escaped for the text formats (backslash, quote, newline):
/// prometheus-client 0.23 writes label values as they are, so a quote in a
/// process's job name would break the scrape, and a newline would forge a
/// series. kitty escapes at its own boundary.
pub fn label_value(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

pub fn label(k: &str, v: &str) -> (String, String) {
    (k.to_string(), label_value(v))
}

/// The labels of a rank's series.
pub fn rank_labels(f: &Frame, r: &RankFrame, pid_label: bool) -> LabelSet {
    let l = &r.labels;
    let mut out = vec![label("node", r.node.as_deref().unwrap_or(&f.node))];
    if let Some(j) = &l.job {
        out.push(label("training_job", j));
    }
    if let Some(j) = &l.job_id {
        out.push(label("training_job_id", j));
    }
    if let Some(s) = &l.slurm_job_id {
        out.push(label("slurm_job_id", s));
        out.push(label("hpc_job", s));
    }
    match l.rank {
        Some(x) => out.push(label("rank", &x.to_string())),
        // Without a rank label the pid is what tells processes apart.
        None => out.push(label("pid", &r.key.pid.to_string())),
    }
    if let Some(x) = l.local_rank {
        out.push(label("local_rank", &x.to_string()));
    }
    if pid_label && l.rank.is_some() {
        out.push(label("pid", &r.key.pid.to_string()));
    }
    if let Some(g) = r.gpu {
        out.push(label("gpu", &g.to_string()));
        if let Some(u) = f
            .gpus
            .iter()
            .find(|x| x.index == g)
            .and_then(|x| x.uuid.as_ref())
        {
            out.push(label("UUID", u));
        }
    }
    if let Some(p) = &l.pod_uid {
        out.push(label("pod_uid", p));
    }
    if let Some(c) = &l.container_id {
        out.push(label("container_id", c));
    }
    out
}

/// The labels of a GPU's series (dcgm-exporter's `gpu` and `UUID`; the model name).
pub fn gpu_labels(f: &Frame, g: &GpuFrame) -> LabelSet {
    let mut out = vec![label("node", &f.node), label("gpu", &g.index.to_string())];
    if let Some(u) = &g.uuid {
        out.push(label("UUID", u));
    }
    out.push(label("model", &g.name));
    out
}

/// An RDMA port's labels: node, device, port.
pub fn nic_labels(f: &Frame, n: &crate::model::NicFrame) -> LabelSet {
    vec![
        label("node", &f.node),
        label("device", &n.device),
        label("port", &n.port.to_string()),
    ]
}
