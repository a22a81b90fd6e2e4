//! The cluster sampler: one frame of every node's ranks, read back from
//! Prometheus (the series each node's `kitty-tui serve` exports), so that
//! the same analysis compares the ranks of a job across nodes. Each refresh
//! runs a fixed set of PromQL queries, independent of the number of ranks
//! or nodes: the nodes' clocks, every rank gauge in one selector, one
//! `rate()` per counter the view needs, four histogram quantiles, the GPUs
//! and the sources, sent at once. A node whose clock stops is stale: its ranks stay on
//! screen with their last data, out of the comparison. A slow or failing
//! Prometheus is shown with its error and the view keeps the last data.

use crate::engine::FrameSource;
use crate::model::named::Named;
use crate::model::signal::{scope, GPU_TO_RANK};
use crate::model::time::{mono_ns, wall_ns};
use crate::model::{
    Event, EventKind, Frame, Labels, ProcKey, RankFrame, Sig, Source, SourceStatus, Text,
};
use crate::sinks::exporter::names::{export, Export};
use crate::sources::prometheus::{Prometheus, Sample};
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// How often the view refreshes.
    pub interval: Duration,
    /// The `rate()` window (at least two scrape intervals).
    pub window: Duration,
    /// A node whose last frame is older than this is stale.
    pub stale_after: Duration,
    /// Only this training job (`training_job` label), when given.
    pub job: Option<String>,
    /// Only nodes whose name matches this regular expression (PromQL `=~`).
    pub node_selector: Option<String>,
}

/// The counters the view reads as rates (the rank table's columns and the
/// rules' signals).
const RATES: &[Sig] = &[
    Sig::CpuPct,
    Sig::RunDelayMsPerS,
    Sig::MigrationsPerS,
    Sig::CfsThrottledMsPerS,
    Sig::RetransPerS,
    Sig::OutSegsPerS,
    Sig::BytesSentPerS,
    Sig::BytesRecvPerS,
    // RDMA congestion across nodes (the NCCL and port-health signals are
    // gauges: they come with the rank gauges).
    Sig::RdmaXmitWaitPerS,
    Sig::RdmaCnpPerS,
];

/// Histogram quantiles: (family, quantile, signal). Taken by Prometheus
/// (`histogram_quantile`): fetching the buckets to take them here costs
/// more (20 buckets per rank cross the wire).
const QUANTILES: &[(&str, f64, Sig)] = &[
    ("kitty_rank_tcp_rtt_seconds", 0.5, Sig::RttP50Us),
    ("kitty_rank_tcp_rtt_seconds", 0.99, Sig::RttP99Us),
    ("kitty_rank_runq_latency_seconds", 0.5, Sig::RunqP50Us),
    ("kitty_rank_runq_latency_seconds", 0.99, Sig::RunqP99Us),
];

/// The labels that identify a rank across nodes.
const RANK_ID: &[&str] = &["node", "training_job", "training_job_id", "rank", "pid"];

pub struct ClusterSampler {
    prom: Prometheus,
    cfg: ClusterConfig,
    /// Every rank seen, with its last data (stale nodes keep theirs).
    ranks: BTreeMap<String, RankFrame>,
    /// Node -> wall time of its last frame (s), from the clock query.
    clocks: HashMap<String, f64>,
    stale: Vec<String>,
    seq: u64,
    last_error: Option<String>,
    queries: usize,
    /// The nodes' sources, as last reported.
    sources: crate::model::Sources,
}

/// The vector of one query, with the query's error if it failed.
type Answer = Result<Vec<Sample>, String>;

impl ClusterSampler {
    pub fn new(prom: Prometheus, cfg: ClusterConfig) -> Self {
        ClusterSampler {
            prom,
            cfg,
            ranks: BTreeMap::new(),
            clocks: HashMap::new(),
            stale: Vec::new(),
            seq: 0,
            last_error: None,
            queries: 0,
            sources: Default::default(),
        }
    }

    /// Queries the last refresh sent (bounded: it does not grow with ranks).
    pub fn queries_per_refresh(&self) -> usize {
        self.queries
    }

    /// Prometheus's URL as shown (without any user:password in it).
    pub fn url(&self) -> String {
        redact(self.prom.url())
    }

    fn node_matcher(&self) -> Option<String> {
        self.cfg
            .node_selector
            .as_ref()
            .map(|n| format!("node=~{}", promql_string(n)))
    }

    /// The label matchers of rank series.
    fn rank_matchers(&self) -> String {
        let mut m: Vec<String> = self.node_matcher().into_iter().collect();
        if let Some(j) = &self.cfg.job {
            m.push(format!("training_job={}", promql_string(j)));
        }
        m.join(",")
    }

    fn window(&self) -> String {
        format!("{}s", self.cfg.window.as_secs().max(1))
    }

    /// This refresh's queries, built from the configuration alone.
    fn plan(&self) -> Plan {
        let node_m = self.node_matcher().unwrap_or_default();
        let rank_m = self.rank_matchers();
        let join = |a: &str, b: &str| match (a.is_empty(), b.is_empty()) {
            (true, _) => b.to_string(),
            (_, true) => a.to_string(),
            _ => format!("{a},{b}"),
        };
        let w = self.window();
        let gauges: Vec<(&'static str, Sig, f64)> = Sig::in_scope(scope::RANK)
            .filter_map(|s| match export(s, scope::RANK) {
                Export::Gauge { name, scale } => Some((name, s, scale)),
                _ => None,
            })
            .collect();
        let names: Vec<&str> = gauges.iter().map(|g| g.0).collect();
        let rates = RATES
            .iter()
            .filter_map(|&sig| match export(sig, scope::RANK) {
                Export::Accumulated { name, scale } => {
                    Some((format!("rate({name}{{{rank_m}}}[{w}])"), sig, scale))
                }
                _ => None,
            })
            .collect();
        let quantiles = QUANTILES
            .iter()
            .map(|&(family, quantile, sig)| {
                (
                    format!(
                        "histogram_quantile({quantile}, sum by (le, {}) (rate({family}_bucket{{{rank_m}}}[{w}])))",
                        RANK_ID.join(", ")
                    ),
                    sig,
                )
            })
            .collect();
        let gpu_gauges: Vec<(&'static str, Sig, f64)> = GPU_TO_RANK
            .iter()
            .filter_map(|(g, r)| match export(*g, scope::GPU) {
                Export::Gauge { name, scale } => Some((name, *r, scale)),
                _ => None,
            })
            .collect();
        let gpu_names: Vec<&str> = gpu_gauges.iter().map(|g| g.0).collect();
        Plan {
            clocks: format!(
                "max by (node) (max_over_time(kitty_last_frame_timestamp_seconds{{{node_m}}}[10m]))"
            ),
            gauges: format!(
                "{{{}}}",
                join(&format!("__name__=~\"{}\"", names.join("|")), &rank_m)
            ),
            gauge_sigs: gauges,
            rates,
            quantiles,
            gpus: format!(
                "{{{}}}",
                join(
                    &format!("__name__=~\"kitty_gpu_up|{}\"", gpu_names.join("|")),
                    &node_m
                )
            ),
            gpu_sigs: gpu_gauges,
            sources: format!("kitty_source_up{{{node_m}}}"),
        }
    }

    /// Runs the queries at once (Prometheus evaluates them in parallel; a
    /// hung server costs one deadline per refresh, not one per query).
    fn run_all(&mut self, queries: &[&str]) -> Vec<Answer> {
        self.queries = queries.len();
        let prom = &self.prom;
        std::thread::scope(|sc| {
            let handles: Vec<_> = queries
                .iter()
                .map(|q| sc.spawn(move || prom.query(q).map_err(|e| e.to_string())))
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err("the query thread panicked".into()))
                })
                .collect()
        })
    }

    /// Reads every node's series into `self.ranks` and the sources into
    /// `f`; returns the errors.
    fn refresh(&mut self, now_wall_s: f64, f: &mut Frame) -> Vec<String> {
        let plan = self.plan();
        let mut all: Vec<&str> = vec![&plan.clocks, &plan.gauges, &plan.gpus, &plan.sources];
        all.extend(plan.rates.iter().map(|r| r.0.as_str()));
        all.extend(plan.quantiles.iter().map(|q| q.0.as_str()));
        let answers = self.run_all(&all);
        let clock_failed = answers[0].is_err();
        let sources_failed = answers[3].is_err();
        let mut answers = answers.into_iter();
        let mut errors = Vec::new();
        let mut next = || -> Vec<Sample> {
            match answers.next() {
                Some(Ok(v)) => v,
                Some(Err(e)) => {
                    errors.push(e);
                    Vec::new()
                }
                None => Vec::new(),
            }
        };
        let (clocks, gauges, gpus, sources) = (next(), next(), next(), next());
        let rates: Vec<Vec<Sample>> = plan.rates.iter().map(|_| next()).collect();
        let quantiles: Vec<Vec<Sample>> = plan.quantiles.iter().map(|_| next()).collect();

        // 1. The nodes' clocks (a stopped node keeps its last value).
        let before = self.clocks.clone();
        if !clock_failed {
            self.clocks = clocks
                .iter()
                .filter_map(|s| Some((s.label("node")?.to_string(), s.value)))
                .collect();
        }
        // Without the clocks, which nodes are stale is not known: as before.
        if !clock_failed {
            let stale_s = self.cfg.stale_after.as_secs_f64();
            let mut stale: Vec<String> = self
                .clocks
                .iter()
                .filter(|(_, t)| now_wall_s - **t > stale_s)
                .map(|(n, _)| n.clone())
                .collect();
            stale.sort();
            self.stale = stale;
        }

        // 2. This refresh's values, per rank.
        let mut fresh: BTreeMap<String, RankFrame> = BTreeMap::new();
        for s in &gauges {
            let Some(name) = s.label("__name__") else {
                continue;
            };
            if let Some((_, sig, scale)) = plan.gauge_sigs.iter().find(|g| g.0 == name) {
                rank_of(&mut fresh, s).signals.set(*sig, s.value / scale);
            }
        }
        for ((_, sig, scale), v) in plan.rates.iter().zip(&rates) {
            for s in v {
                rank_of(&mut fresh, s).signals.set(*sig, s.value / scale);
            }
        }
        for ((_, sig), v) in plan.quantiles.iter().zip(&quantiles) {
            for s in v {
                rank_of(&mut fresh, s).signals.set(*sig, s.value * 1e6);
            }
        }
        // The GPUs' signals join their ranks on (node, gpu).
        let mut by_gpu: HashMap<(String, String), Vec<&Sample>> = HashMap::new();
        for s in &gpus {
            if let (Some(node), Some(gpu)) = (s.label("node"), s.label("gpu")) {
                by_gpu
                    .entry((node.to_string(), gpu.to_string()))
                    .or_default()
                    .push(s);
            }
        }
        for r in fresh.values_mut() {
            let (Some(node), Some(gpu)) = (r.node.as_deref(), r.gpu) else {
                continue;
            };
            for s in by_gpu
                .get(&(node.to_string(), gpu.to_string()))
                .into_iter()
                .flatten()
            {
                let name = s.label("__name__").unwrap_or("");
                if name == "kitty_gpu_up" {
                    r.signals
                        .set(Sig::GpuLost, if s.value == 0.0 { 1.0 } else { 0.0 });
                } else if let Some((_, sig, scale)) = plan.gpu_sigs.iter().find(|g| g.0 == name) {
                    r.signals.set(*sig, s.value / scale);
                }
            }
        }

        // 3. Keep what this refresh saw; stale nodes keep their last data.
        if errors.len() < self.queries {
            // A node with ranks on screen that sent nothing this refresh
            // while its clock stood still has stopped: Prometheus ends its
            // series at the first failed scrape, well before `stale_after`.
            // (A node whose clock moved on is alive and has no ranks now.)
            let seen: std::collections::HashSet<&str> =
                fresh.values().filter_map(|r| r.node.as_deref()).collect();
            let mut stopped: Vec<String> = self
                .ranks
                .values()
                .filter_map(|r| r.node.as_deref())
                .filter(|n| {
                    !seen.contains(n)
                        && before
                            .get(*n)
                            .is_some_and(|t| self.clocks.get(*n) == Some(t))
                })
                .map(str::to_string)
                .collect();
            stopped.retain(|n| !self.stale.contains(n));
            self.stale.extend(stopped);
            self.stale.sort();
            self.stale.dedup();
        }
        for r in self.ranks.values_mut() {
            r.stale = r
                .node
                .as_deref()
                .is_some_and(|n| self.stale.iter().any(|s| s == n));
        }
        if errors.len() < self.queries {
            self.ranks.retain(|_, r| r.stale);
            for (k, mut r) in fresh {
                let node = r.node.as_deref().unwrap_or("");
                if self.stale.iter().any(|s| s == node) {
                    continue;
                }
                r.state = Text::new("R");
                self.ranks.insert(k, r);
            }
        }
        // The nodes' sources as last reported, when Prometheus did not say.
        if !sources_failed {
            let mut now = crate::model::Sources::default();
            sources_of(&sources, &mut now);
            self.sources = now;
        }
        for (k, v) in self.sources.iter() {
            f.sources.insert(k, v.clone());
        }
        errors
    }
}

/// One refresh's PromQL, with how each answer is read.
struct Plan {
    clocks: String,
    gauges: String,
    gauge_sigs: Vec<(&'static str, Sig, f64)>,
    /// (query, signal, scale from the counter's base unit).
    rates: Vec<(String, Sig, f64)>,
    quantiles: Vec<(String, Sig)>,
    gpus: String,
    gpu_sigs: Vec<(&'static str, Sig, f64)>,
    sources: String,
}

/// The sources, as the nodes report them.
fn sources_of(v: &[Sample], out: &mut crate::model::Sources) {
    let mut by: BTreeMap<String, Vec<(String, bool)>> = BTreeMap::new();
    for s in v {
        if let (Some(src), Some(node)) = (s.label("source"), s.label("node")) {
            by.entry(src.to_string())
                .or_default()
                .push((node.to_string(), s.value == 1.0));
        }
    }
    for (src, nodes) in by {
        let Some(source) = Source::from_name(&src) else {
            continue;
        };
        let down: Vec<&str> = nodes
            .iter()
            .filter(|(_, up)| !up)
            .map(|(n, _)| n.as_str())
            .collect();
        let st = if down.is_empty() {
            SourceStatus::ok()
        } else if down.len() == nodes.len() {
            SourceStatus::unavailable(format!("down on every node ({})", down.len()))
        } else {
            SourceStatus::degraded(format!("down on {}", down.join(", ")))
        };
        out.insert(source, st);
    }
}

impl FrameSource for ClusterSampler {
    fn interval(&self) -> Duration {
        self.cfg.interval
    }

    fn tick(&mut self) -> Frame {
        let wall = wall_ns();
        let mut f = Frame {
            version: crate::model::FRAME_VERSION,
            seq: self.seq,
            mono_ns: mono_ns(),
            wall_ns: wall,
            interval_ms: self.cfg.interval.as_millis() as u64,
            node: Text::new(&format!("cluster via {}", self.url())),
            ..Default::default()
        };
        self.seq += 1;
        let was_stale = self.stale.clone();
        let errors = self.refresh(wall as f64 / 1e9, &mut f);
        for n in self.stale.iter().filter(|n| !was_stale.contains(n)) {
            f.events.push(Event::new(
                wall,
                EventKind::SourceLost,
                format!("node {n}: its series stopped; shown stale with its last data"),
            ));
        }
        for n in was_stale.iter().filter(|n| !self.stale.contains(n)) {
            f.events.push(Event::new(
                wall,
                EventKind::SourceRecovered,
                format!("node {n}: its series are back"),
            ));
        }
        let status = match errors.first() {
            None => SourceStatus::ok(),
            Some(e) if errors.len() >= self.queries => {
                SourceStatus::unavailable(format!("{e} (showing the last data)"))
            }
            Some(e) => SourceStatus::degraded(format!(
                "{} of {} queries failed: {e}",
                errors.len(),
                self.queries
            )),
        };
        let now_err = errors.first().cloned();
        if now_err.is_some() && self.last_error.is_none() {
            f.events.push(Event::new(
                wall,
                EventKind::SourceLost,
                format!("prometheus: {}", now_err.as_deref().unwrap_or("")),
            ));
        } else if now_err.is_none() && self.last_error.is_some() {
            f.events.push(Event::new(
                wall,
                EventKind::SourceRecovered,
                "prometheus answers again",
            ));
        }
        self.last_error = now_err;
        f.sources.insert(Source::Prometheus, status);
        f.ranks = self.ranks.values().cloned().collect();
        f.ranks.sort_by(|a, b| {
            (a.labels.job_key(), a.labels.rank, a.node.as_deref()).cmp(&(
                b.labels.job_key(),
                b.labels.rank,
                b.node.as_deref(),
            ))
        });
        f
    }
}

/// The key of a rank across nodes, from a sample's labels.
fn rank_key(s: &Sample) -> String {
    let id: Vec<&str> = RANK_ID.iter().map(|k| s.label(k).unwrap_or("")).collect();
    id.join("\u{1f}")
}

/// The rank a sample belongs to, created from its labels on first sight.
fn rank_of<'a>(ranks: &'a mut BTreeMap<String, RankFrame>, s: &Sample) -> &'a mut RankFrame {
    let key = rank_key(s);
    ranks.entry(key.clone()).or_insert_with(|| {
        let num = |k: &str| s.label(k).and_then(|v| v.parse::<u32>().ok());
        let text = |k: &str| s.label(k).map(Text::new);
        RankFrame {
            key: ProcKey {
                pid: num("pid").unwrap_or_else(|| synthetic_pid(&key)),
                start_time: 0,
            },
            node: text("node"),
            // The series carry no process name; the node's snapshot does.
            comm: Text::default(),
            endpoint: text("instance"),
            labels: Labels {
                rank: num("rank"),
                local_rank: num("local_rank"),
                job: text("training_job"),
                job_id: text("training_job_id"),
                slurm_job_id: text("slurm_job_id"),
                pod_uid: text("pod_uid"),
                container_id: text("container_id"),
                ..Default::default()
            },
            gpu: num("gpu"),
            state: Text::new("R"),
            ..Default::default()
        }
    })
}

/// A stable stand-in pid for a rank without one (the series carry none by
/// default): verdicts and views key ranks by pid. High bit set, so it is
/// never a real pid.
fn synthetic_pid(key: &str) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in key.bytes() {
        h = (h ^ b as u32).wrapping_mul(0x0100_0193);
    }
    h | 0x8000_0000
}

/// A URL without the user information of its authority.
fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let end = rest.find('/').unwrap_or(rest.len());
    match rest[..end].rfind('@') {
        Some(at) => format!("{scheme}://{}", &rest[at + 1..]),
        None => url.to_string(),
    }
}

/// A PromQL string literal.
fn promql_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_quoted_for_promql() {
        assert_eq!(promql_string(r#"a"b\c"#), r#""a\"b\\c""#);
    }

    #[test]
    fn urls_are_shown_without_credentials() {
        assert_eq!(redact("http://u:p@prom:9090/x@y"), "http://prom:9090/x@y");
        assert_eq!(redact("https://prom:9090"), "https://prom:9090");
    }

    #[test]
    fn synthetic_pids_are_stable_and_not_real() {
        let a = synthetic_pid("n1\u{1f}job\u{1f}id\u{1f}3\u{1f}");
        assert_eq!(a, synthetic_pid("n1\u{1f}job\u{1f}id\u{1f}3\u{1f}"));
        assert!(a >= 0x8000_0000);
        assert_ne!(a, synthetic_pid("n2\u{1f}job\u{1f}id\u{1f}3\u{1f}"));
    }
}
