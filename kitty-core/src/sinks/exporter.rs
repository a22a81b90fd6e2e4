//! The Prometheus / OpenMetrics model: frames in, exposition text out.
//!
//! Every signal becomes `kitty_<signal>` (a gauge: kitty's signals are already
//! rates or levels); cumulative process counters become `_total` counters;
//! per-socket smoothed RTT samples feed a histogram per rank; verdicts become
//! `kitty_straggler{signal}` with the ratio. Series of exited ranks stay for a
//! grace period and are then dropped, so cardinality follows the live job.

use crate::model::{scope, Frame, ProcKey, RankFrame, Sig, Unit};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::collections::HashMap;
use std::sync::atomic::AtomicU64;

type LabelSet = Vec<(String, String)>;
type GaugeF = Gauge<f64, AtomicU64>;
type CounterF = Counter<f64, AtomicU64>;
/// A cumulative counter: exported name, help, and how to read it off a rank.
type CounterDef = (&'static str, &'static str, fn(&RankFrame) -> Option<f64>);

fn rtt_histogram() -> Histogram {
    // 25 us .. ~0.8 s, doubling.
    Histogram::new(exponential_buckets(25e-6, 2.0, 16))
}

#[derive(Debug, Clone)]
pub struct ExporterConfig {
    /// How long an exited rank's series stay.
    pub grace: std::time::Duration,
    /// Per-socket series (opt-in): at most this many sockets per rank.
    pub socket_series: usize,
}

impl Default for ExporterConfig {
    fn default() -> Self {
        ExporterConfig {
            grace: std::time::Duration::from_secs(60),
            socket_series: 0,
        }
    }
}

pub struct Exporter {
    cfg: ExporterConfig,
    /// Last frame of each rank and when it was last seen (monotonic ns).
    seen: HashMap<ProcKey, (RankFrame, u64)>,
    srtt: Family<LabelSet, Histogram, fn() -> Histogram>,
}

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

fn label(k: &str, v: &str) -> (String, String) {
    (k.to_string(), label_value(v))
}

/// Labels of a rank: node, job, rank, pid, gpu, pod, container where known.
pub fn rank_labels(node: &str, r: &RankFrame) -> LabelSet {
    let mut l = vec![label("node", node)];
    if let Some(j) = &r.labels.job {
        l.push(label("job", j));
    }
    if let Some(x) = r.labels.rank {
        l.push(("rank".into(), x.to_string()));
    }
    l.push(("pid".into(), r.key.pid.to_string()));
    if let Some(g) = r.gpu {
        l.push(("gpu".into(), g.to_string()));
    }
    if let Some(p) = &r.labels.pod_uid {
        l.push(label("pod_uid", p));
    }
    if let Some(c) = &r.labels.container_id {
        l.push(label("container_id", c));
    }
    l
}

impl Exporter {
    pub fn new(cfg: ExporterConfig) -> Self {
        Exporter {
            cfg,
            seen: HashMap::new(),
            srtt: Family::new_with_constructor(rtt_histogram),
        }
    }

    /// Takes a frame and returns the OpenMetrics exposition for it.
    pub fn update(&mut self, f: &Frame) -> String {
        let now = f.mono_ns;
        for r in &f.ranks {
            self.seen.insert(r.key, (r.clone(), now));
            let labels = rank_labels(&f.node, r);
            let h = self.srtt.get_or_create(&labels);
            for s in r.sockets.iter().filter(|s| s.state == "ESTABLISHED") {
                if let Some(i) = &s.info {
                    h.observe(i.rtt_us as f64 / 1e6);
                }
            }
        }
        let grace = self.cfg.grace.as_nanos() as u64;
        let expired: Vec<ProcKey> = self
            .seen
            .iter()
            .filter(|(_, (_, t))| now.saturating_sub(*t) > grace)
            .map(|(k, _)| *k)
            .collect();
        for k in expired {
            if let Some((r, _)) = self.seen.remove(&k) {
                self.srtt.remove(&rank_labels(&f.node, &r));
            }
        }

        let mut reg = Registry::with_prefix("kitty");
        let mut ranks: Vec<&RankFrame> = self.seen.values().map(|(r, _)| r).collect();
        ranks.sort_by_key(|r| (r.labels.job.clone(), r.labels.rank, r.key.pid));

        for s in Sig::in_scope(scope::RANK) {
            let fam = Family::<LabelSet, GaugeF>::default();
            let mut any = false;
            for r in &ranks {
                if let Some(v) = r.signal(s) {
                    fam.get_or_create(&rank_labels(&f.node, r)).set(v);
                    any = true;
                }
            }
            if any {
                reg.register(s.name(), help(s), fam);
            }
        }
        let counters: [CounterDef; 6] = [
            ("cpu_seconds", "CPU time of all threads (schedstat)", |r| {
                Some(r.counters.exec_ns as f64 / 1e9)
            }),
            (
                "run_delay_seconds",
                "time runnable but waiting for a CPU, all threads",
                |r| Some(r.counters.run_delay_ns as f64 / 1e9),
            ),
            ("migrations", "cross-CPU migrations, all threads", |r| {
                Some(r.counters.nr_migrations as f64)
            }),
            ("ctx_voluntary", "voluntary context switches", |r| {
                Some(r.counters.ctx_voluntary as f64)
            }),
            ("ctx_involuntary", "involuntary context switches", |r| {
                Some(r.counters.ctx_involuntary as f64)
            }),
            (
                "cfs_throttled_seconds",
                "CFS throttled time of the rank's cgroup",
                |r| r.counters.cfs_throttled_ns.map(|n| n as f64 / 1e9),
            ),
        ];
        for (name, help, get) in counters {
            let fam = Family::<LabelSet, CounterF>::default();
            for r in &ranks {
                if let Some(v) = get(r) {
                    fam.get_or_create(&rank_labels(&f.node, r)).inc_by(v);
                }
            }
            reg.register(name, help, fam);
        }
        reg.register(
            "tcp_srtt_seconds",
            "smoothed RTT of the rank's established sockets, sampled every tick",
            self.srtt.clone(),
        );

        if self.cfg.socket_series > 0 {
            let fam = Family::<LabelSet, GaugeF>::default();
            for r in &ranks {
                for s in r.sockets.iter().take(self.cfg.socket_series) {
                    let mut l = rank_labels(&f.node, r);
                    l.push(label("local", &s.local));
                    l.push(label("remote", &s.remote));
                    if let Some(i) = &s.info {
                        fam.get_or_create(&l).set(i.rtt_us as f64);
                    }
                }
            }
            reg.register(
                "socket_srtt_us",
                "smoothed RTT per socket (opt-in, capped per rank)",
                fam,
            );
        }

        for s in Sig::in_scope(scope::HOST) {
            if let Some(v) = f.host.signals.get(s) {
                let fam = Family::<LabelSet, GaugeF>::default();
                fam.get_or_create(&vec![label("node", &f.node)]).set(v);
                reg.register(s.name(), help(s), fam);
            }
        }

        // Per GPU: kitty_gpu_<signal>{node,gpu,name}, and XIDs over the window.
        for s in Sig::in_scope(scope::GPU) {
            let fam = Family::<LabelSet, GaugeF>::default();
            let mut any = false;
            for g in &f.gpus {
                if let Some(v) = g.signals.get(s) {
                    let l = vec![
                        label("node", &f.node),
                        label("gpu", &g.index.to_string()),
                        label("name", &g.name),
                    ];
                    fam.get_or_create(&l).set(v);
                    any = true;
                }
            }
            if any {
                reg.register(format!("gpu_{}", s.name()), help(s), fam);
            }
        }

        let straggler = Family::<LabelSet, GaugeF>::default();
        let consequence = Family::<LabelSet, GaugeF>::default();
        for v in f.verdicts.iter().filter(|v| v.is_consequence()) {
            let c = v.consequence_of.as_ref().expect("a consequence");
            let mut l = vec![label("node", &f.node)];
            if let Some(j) = &v.job {
                l.push(label("job", j));
            }
            if let Some(r) = v.rank {
                l.push(("rank".into(), r.to_string()));
            }
            l.push(label("signal", v.signal.name()));
            if let Some(r) = c.rank {
                l.push(("cause_rank".into(), r.to_string()));
            }
            l.push(label("cause_signal", c.signal.name()));
            consequence.get_or_create(&l).set(v.score);
        }
        for v in f.verdicts.iter().filter(|v| !v.is_consequence()) {
            let mut l = vec![label("node", &f.node)];
            if let Some(j) = &v.job {
                l.push(label("job", j));
            }
            if let Some(r) = v.rank {
                l.push(("rank".into(), r.to_string()));
            }
            l.push(("pid".into(), v.pid.to_string()));
            l.push(label("signal", v.signal.name()));
            straggler.get_or_create(&l).set(v.score);
        }
        reg.register(
            "straggler",
            "a rank flagged against its peers (not a consequence of another): value is its score, the excess over the peers' median in units of the rule's floor (critical from 8)",
            straggler,
        );
        reg.register(
            "consequence",
            "a rank's symptom caused by another rank's verdict (cause_rank, cause_signal): not a straggler",
            consequence,
        );

        let up = Family::<LabelSet, GaugeF>::default();
        for (name, st) in f.sources.iter() {
            up.get_or_create(&vec![label("node", &f.node), label("source", name.name())])
                .set(if st.is_ok() { 1.0 } else { 0.0 });
        }
        reg.register(
            "source_up",
            "1 when a source works, 0 when it is unavailable or degraded",
            up,
        );

        let mut out = String::new();
        encode(&mut out, &reg).expect("writing to a String cannot fail");
        out
    }
}

fn help(s: Sig) -> String {
    let i = s.info();
    let unit = match i.unit {
        Unit::Count => "count",
        Unit::Flag => "0 or 1",
        u => u.suffix(),
    };
    format!("{} ({unit}; {})", i.meaning, i.source)
}

/// The Prometheus text format (0.0.4) from OpenMetrics text: no `# EOF` or
/// `# UNIT`, and a counter's HELP/TYPE name carries its `_total` suffix.
pub fn to_prometheus_text(openmetrics: &str) -> String {
    let counters: std::collections::HashSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let fixed = ["# HELP ", "# TYPE "].iter().find_map(|p| {
            let rest = line.strip_prefix(p)?;
            let (name, tail) = rest.split_once(' ')?;
            counters
                .contains(name)
                .then(|| format!("{p}{name}_total {tail}"))
        });
        out.push_str(fixed.as_deref().unwrap_or(line));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::*;

    fn frame(t: u64, with_rank: bool) -> Frame {
        let mut f = Frame {
            mono_ns: t * 1_000_000_000,
            node: "n1".into(),
            ..Default::default()
        };
        if with_rank {
            let mut signals = Signals::new();
            signals.set(Sig::RunDelayMsPerS, 12.5);
            f.ranks.push(RankFrame {
                key: ProcKey {
                    pid: 7,
                    start_time: 1,
                },
                comm: "x".into(),
                labels: Labels {
                    rank: Some(3),
                    job: Some("j".into()),
                    ..Default::default()
                },
                state: "S".into(),
                netns: None,
                gpu: None,
                counters: RankCounters {
                    run_delay_ns: 2_000_000_000,
                    ..Default::default()
                },
                signals,
                histograms: Default::default(),
                sockets: vec![SocketFrame {
                    state: "ESTABLISHED".into(),
                    info: Some(TcpInfo {
                        rtt_us: 2000,
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                threads: vec![],
                ..Default::default()
            });
        }
        f.sources.insert(Source::Procfs, SourceStatus::ok());
        f
    }

    #[test]
    fn names_help_type_and_grace() {
        let mut e = Exporter::new(ExporterConfig::default());
        let om = e.update(&frame(0, true));
        assert!(om.contains("# TYPE kitty_run_delay_ms_per_s gauge"));
        assert!(om.contains("# HELP kitty_run_delay_ms_per_s "));
        assert!(
            om.contains(r#"kitty_run_delay_ms_per_s{node="n1",job="j",rank="3",pid="7"} 12.5"#),
            "{om}"
        );
        assert!(
            om.contains(r#"kitty_run_delay_seconds_total{node="n1",job="j",rank="3",pid="7"} 2.0"#),
            "{om}"
        );
        assert!(om.contains("kitty_tcp_srtt_seconds_bucket"));
        assert!(om.trim_end().ends_with("# EOF"));
        let text = to_prometheus_text(&om);
        assert!(text.contains("# TYPE kitty_run_delay_seconds_total counter"));
        assert!(!text.contains("# EOF"));
        // Still listed inside the grace period, gone after it.
        assert!(e
            .update(&frame(30, false))
            .contains("kitty_run_delay_ms_per_s{"));
        let later = e.update(&frame(120, false));
        assert!(!later.contains("rank=\"3\""), "{later}");
    }
}
