//! The Prometheus / OpenMetrics model: frames in, exposition text out, in
//! Prometheus' conventions (`names` holds the one mapping table):
//!
//! - `kitty_rank_*{node, training_job, ...}`, `kitty_node_*`, `kitty_gpu_*`,
//!   `kitty_netns_*`: counters (`_total`, base units) for every cumulative
//!   quantity, gauges for levels and states;
//! - `kitty_rank_tcp_rtt_seconds` and `kitty_rank_runq_latency_seconds`:
//!   cumulative histograms from the probes' buckets (any scrape interval
//!   loses nothing); `kitty_rank_tcp_srtt_seconds`: tcp_info's smoothed RTT,
//!   observed once per tick per socket;
//! - `kitty_straggler` (a rank flagged against its peers; the value is its
//!   score), `kitty_consequence` (a symptom caused by another rank),
//!   `kitty_finding` (a placement finding), `kitty_source_up`,
//!   `kitty_last_frame_timestamp_seconds` (the cluster view's staleness
//!   clock) and `kitty_build_info`.
//!
//! Labels join with dcgm-exporter and node_exporter (`labels`). Series of
//! exited ranks stay for a grace period and are then dropped, so
//! cardinality follows the live job.

pub mod histogram;
pub mod labels;
pub mod names;

use crate::model::signal::scope;
use crate::model::{Frame, HistKind, ProcKey, RankFrame, Sig, Signals, SocketFrame};
use histogram::BulkHistogram;
use labels::{gpu_labels, label, nic_labels, rank_labels, LabelSet};
use names::{export, Export};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::AtomicU64;

type GaugeF = Gauge<f64, AtomicU64>;
type CounterF = Counter<f64, AtomicU64>;

/// Latency buckets of the histograms, seconds (1-2-5 from 10 us to 10 s).
const LATENCY_BUCKETS: &[f64] = &[
    10e-6, 20e-6, 50e-6, 100e-6, 200e-6, 500e-6, 1e-3, 2e-3, 5e-3, 10e-3, 20e-3, 50e-3, 0.1, 0.2,
    0.5, 1.0, 2.0, 5.0, 10.0,
];

fn latency_histogram() -> BulkHistogram {
    BulkHistogram::new(LATENCY_BUCKETS)
}

#[derive(Debug, Clone)]
pub struct ExporterConfig {
    /// How long an exited rank's series stay.
    pub grace: std::time::Duration,
    /// Per-socket series (opt-in): at most this many sockets per rank.
    pub socket_series: usize,
    /// A `pid` label on rank series (opt-in: it churns with every restart).
    pub pid_label: bool,
}

impl Default for ExporterConfig {
    fn default() -> Self {
        ExporterConfig {
            grace: std::time::Duration::from_secs(60),
            socket_series: 0,
            pid_label: false,
        }
    }
}

/// What kitty keeps between frames for one rank: what a render reads of
/// its last frame (its sockets only for per-socket series), not a copy of
/// the whole rank.
struct Seen {
    signals: Signals,
    sockets: Vec<SocketFrame>,
    labels: LabelSet,
    at_ns: u64,
    /// Accumulated counters by family.
    totals: BTreeMap<&'static str, f64>,
}

pub struct Exporter {
    cfg: ExporterConfig,
    seen: HashMap<ProcKey, Seen>,
    /// Accumulated counters of the node-wide rows (host, netns, GPU, NIC),
    /// by the row's labels, then by family.
    totals: HashMap<LabelSet, BTreeMap<&'static str, f64>>,
    last_ns: Option<u64>,
    rtt: Family<LabelSet, BulkHistogram, fn() -> BulkHistogram>,
    runq: Family<LabelSet, BulkHistogram, fn() -> BulkHistogram>,
    srtt: Family<LabelSet, BulkHistogram, fn() -> BulkHistogram>,
}

impl Exporter {
    pub fn new(cfg: ExporterConfig) -> Self {
        Exporter {
            cfg,
            seen: HashMap::new(),
            totals: HashMap::new(),
            last_ns: None,
            rtt: Family::new_with_constructor(latency_histogram),
            runq: Family::new_with_constructor(latency_histogram),
            srtt: Family::new_with_constructor(latency_histogram),
        }
    }

    /// Takes a frame and returns the OpenMetrics exposition for it: for a
    /// caller that renders every frame (tests, the cluster bench).
    pub fn update(&mut self, f: &Frame) -> String {
        self.observe(f);
        self.render(f)
    }

    /// Takes a frame into what accumulates between frames: counters
    /// integrated over time, the histograms, the ranks seen (kept for the
    /// grace period after they exit). Every frame must pass through here;
    /// rendering can wait for a scrape.
    pub fn observe(&mut self, f: &Frame) {
        let now = f.mono_ns;
        let dt = self
            .last_ns
            .map(|t| now.saturating_sub(t) as f64 / 1e9)
            .unwrap_or(0.0);
        self.last_ns = Some(now);
        for r in &f.ranks {
            self.observe_rank(f, r, now);
        }
        self.expire(now);
        for row in scope_rows(f) {
            let totals = self.totals.entry(row.labels).or_default();
            for (sig, v) in row.signals.iter() {
                if let Export::Accumulated { name, scale } = export(sig, row.scope) {
                    *totals.entry(name).or_default() += v * dt * scale;
                }
            }
        }
    }

    /// The OpenMetrics exposition of the last frame observed (`f`) and
    /// of everything accumulated up to it.
    pub fn render(&self, f: &Frame) -> String {
        let mut reg = Registry::default();
        let rows = scope_rows(f);
        self.register_ranks(&mut reg);
        self.register_node(&mut reg, f, &rows);
        self.register_gpus(&mut reg, f, &rows);
        self.register_nics(&mut reg, f, &rows);
        self.register_verdicts(&mut reg, f);
        let mut out = String::new();
        encode(&mut out, &reg).expect("writing to a String cannot fail");
        out
    }

    fn observe_rank(&mut self, f: &Frame, r: &RankFrame, now: u64) {
        let labels = rank_labels(f, r, self.cfg.pid_label);
        let entry = self.seen.entry(r.key).or_insert_with(|| Seen {
            signals: Signals::new(),
            sockets: Vec::new(),
            labels: Vec::new(),
            at_ns: now,
            totals: BTreeMap::new(),
        });
        let dt = now.saturating_sub(entry.at_ns) as f64 / 1e9;
        for (sig, v) in r.signals.iter() {
            if let Export::Accumulated { name, scale } = export(sig, scope::RANK) {
                *entry.totals.entry(name).or_default() += v * dt * scale;
            }
        }
        entry.signals.clone_from(&r.signals);
        if self.cfg.socket_series > 0 {
            let n = r.sockets.len().min(self.cfg.socket_series);
            entry.sockets = r.sockets[..n].to_vec();
        }
        entry.labels = labels;
        entry.at_ns = now;
        let labels = &entry.labels;
        // The probes' buckets (upper bound, us) into the exported ones; a
        // bucket's samples are observed at its upper bound (the probes'
        // buckets are an eighth of an octave: the sum is within ~9 %).
        for (kind, fam) in [(HistKind::RttUs, &self.rtt), (HistKind::RunqUs, &self.runq)] {
            if let Some(buckets) = r.histograms.get(kind) {
                let h = fam.get_or_create(labels);
                for &(ub_us, n) in buckets {
                    h.observe_n(ub_us * 1e-6, n);
                }
            }
        }
        let h = self.srtt.get_or_create(labels);
        for s in r.sockets.iter().filter(|s| s.state == "ESTABLISHED") {
            if let Some(i) = &s.info {
                h.observe_n(i.rtt_us as f64 * 1e-6, 1);
            }
        }
    }

    fn expire(&mut self, now: u64) {
        let grace = self.cfg.grace.as_nanos() as u64;
        let gone: Vec<ProcKey> = self
            .seen
            .iter()
            .filter(|(_, s)| now.saturating_sub(s.at_ns) > grace)
            .map(|(k, _)| *k)
            .collect();
        for k in gone {
            if let Some(s) = self.seen.remove(&k) {
                self.rtt.remove(&s.labels);
                self.runq.remove(&s.labels);
                self.srtt.remove(&s.labels);
            }
        }
    }

    fn register_ranks(&self, reg: &mut Registry) {
        let mut ranks: Vec<&Seen> = self.seen.values().collect();
        ranks.sort_by(|a, b| a.labels.cmp(&b.labels));
        let mut gauges: BTreeMap<&'static str, (Sig, Family<LabelSet, GaugeF>)> = BTreeMap::new();
        let mut counters: BTreeMap<&'static str, (Sig, Family<LabelSet, CounterF>)> =
            BTreeMap::new();
        for s in &ranks {
            for (sig, v) in s.signals.iter() {
                match export(sig, scope::RANK) {
                    Export::Gauge { name, scale } => {
                        gauges
                            .entry(name)
                            .or_insert_with(|| (sig, Family::default()))
                            .1
                            .get_or_create(&s.labels)
                            .set(v * scale);
                    }
                    Export::Cumulative { name, scale } => {
                        counters
                            .entry(name)
                            .or_insert_with(|| (sig, Family::default()))
                            .1
                            .get_or_create(&s.labels)
                            .inc_by(v * scale);
                    }
                    _ => {}
                }
            }
            for (name, total) in &s.totals {
                let sig = accumulated_sig(name);
                counters
                    .entry(name)
                    .or_insert_with(|| (sig, Family::default()))
                    .1
                    .get_or_create(&s.labels)
                    .inc_by(*total);
            }
        }
        for (name, (sig, fam)) in gauges {
            reg.register(name, help(sig), fam);
        }
        for (name, (sig, fam)) in counters {
            // The registry adds `_total` to a counter's name.
            reg.register(strip_counter(name), help(sig), fam);
        }
        reg.register(
            "kitty_rank_tcp_rtt_seconds",
            "raw TCP RTT samples of the rank's connections (eBPF tcp_probe), cumulative",
            self.rtt.clone(),
        );
        reg.register(
            "kitty_rank_runq_latency_seconds",
            "runnable-to-running latency of the rank's threads (eBPF sched_switch), cumulative",
            self.runq.clone(),
        );
        reg.register(
            "kitty_rank_tcp_srtt_seconds",
            "smoothed RTT (tcp_info) of the rank's established sockets, observed every tick",
            self.srtt.clone(),
        );
        if self.cfg.socket_series > 0 {
            let fam = Family::<LabelSet, GaugeF>::default();
            for s in &ranks {
                for sock in &s.sockets {
                    let mut l = s.labels.clone();
                    l.push(label("local", &sock.local));
                    l.push(label("remote", &sock.remote));
                    if let Some(i) = &sock.info {
                        fam.get_or_create(&l).set(i.rtt_us as f64 * 1e-6);
                    }
                }
            }
            reg.register(
                "kitty_socket_srtt_seconds",
                "smoothed RTT per socket (opt-in, capped per rank)",
                fam,
            );
        }
    }

    fn register_node(&self, reg: &mut Registry, f: &Frame, rows: &[Row]) {
        let node = vec![label("node", &f.node)];
        for bit in [scope::HOST, scope::NETNS] {
            self.scope_signals(reg, bit, rows);
        }
        let up = Family::<LabelSet, GaugeF>::default();
        for (name, st) in f.sources.iter() {
            let mut l = node.clone();
            l.push(label("source", name.name()));
            up.get_or_create(&l).set(if st.is_ok() { 1.0 } else { 0.0 });
        }
        reg.register(
            "kitty_source_up",
            "1 when a source works, 0 when it is degraded or unavailable (alert on a source that was up and went down)",
            up,
        );
        let last = Family::<LabelSet, GaugeF>::default();
        last.get_or_create(&node).set(f.wall_ns as f64 / 1e9);
        reg.register(
            "kitty_last_frame_timestamp_seconds",
            "wall time of the frame this exposition was made from (the cluster view's staleness clock)",
            last,
        );
        let info = Family::<LabelSet, GaugeF>::default();
        let mut l = node;
        l.push(label("version", crate::KITTY_VERSION));
        info.get_or_create(&l).set(1.0);
        reg.register("kitty_build_info", "kitty's version, always 1", info);
    }

    /// Gauges and counters of one scope (node, netns, GPU or NIC): the
    /// accumulated ones from what `observe` added up.
    fn scope_signals(&self, reg: &mut Registry, scope_bit: u8, rows: &[Row]) {
        let mut gauges: BTreeMap<&'static str, (Sig, Family<LabelSet, GaugeF>)> = BTreeMap::new();
        let mut counters: BTreeMap<&'static str, (Sig, Family<LabelSet, CounterF>)> =
            BTreeMap::new();
        for row in rows.iter().filter(|r| r.scope == scope_bit) {
            for (sig, v) in row.signals.iter() {
                match export(sig, scope_bit) {
                    Export::Gauge { name, scale } => {
                        gauges
                            .entry(name)
                            .or_insert_with(|| (sig, Family::default()))
                            .1
                            .get_or_create(&row.labels)
                            .set(v * scale);
                    }
                    Export::Accumulated { name, .. } => {
                        let total = self
                            .totals
                            .get(&row.labels)
                            .and_then(|t| t.get(name))
                            .copied()
                            .unwrap_or(0.0);
                        counters
                            .entry(name)
                            .or_insert_with(|| (sig, Family::default()))
                            .1
                            .get_or_create(&row.labels)
                            .inc_by(total);
                    }
                    Export::Cumulative { name, scale } => {
                        counters
                            .entry(name)
                            .or_insert_with(|| (sig, Family::default()))
                            .1
                            .get_or_create(&row.labels)
                            .inc_by(v * scale);
                    }
                    _ => {}
                }
            }
        }
        for (name, (sig, fam)) in gauges {
            reg.register(name, help(sig), fam);
        }
        for (name, (sig, fam)) in counters {
            reg.register(strip_counter(name), help(sig), fam);
        }
    }

    fn register_gpus(&self, reg: &mut Registry, f: &Frame, rows: &[Row]) {
        if f.gpus.is_empty() {
            return;
        }
        let up = Family::<LabelSet, GaugeF>::default();
        for g in &f.gpus {
            let lost = g.status == crate::model::GpuStatus::Lost;
            up.get_or_create(&gpu_labels(f, g))
                .set(if lost { 0.0 } else { 1.0 });
        }
        reg.register(
            "kitty_gpu_up",
            "1 while the GPU answers, 0 when it fell off the bus",
            up,
        );
        self.scope_signals(reg, scope::GPU, rows);
    }

    /// The RDMA ports: their signals, and every raw counter the device
    /// keeps (`kitty_rdma_port_hw_counter_total{counter="np_cnp_sent"}`),
    /// for rates of counters kitty has no signal for.
    fn register_nics(&self, reg: &mut Registry, f: &Frame, rows: &[Row]) {
        if f.nics.is_empty() {
            return;
        }
        let raw = Family::<LabelSet, CounterF>::default();
        for n in &f.nics {
            let labels = nic_labels(f, n);
            for (name, v) in &n.counters {
                let mut l = labels.clone();
                l.push(label("counter", name));
                raw.get_or_create(&l).inc_by(*v as f64);
            }
        }
        reg.register(
            "kitty_rdma_port_hw_counter",
            "an RDMA port's raw sysfs counter (counters/, hw_counters/, dev.* device-wide, eth.* from the netdev); port_xmit_data and port_rcv_data count 4-octet words",
            raw,
        );
        self.scope_signals(reg, scope::NIC, rows);
    }

    fn register_verdicts(&self, reg: &mut Registry, f: &Frame) {
        let straggler = Family::<LabelSet, GaugeF>::default();
        let consequence = Family::<LabelSet, GaugeF>::default();
        for v in &f.verdicts {
            let mut l = match f.rank_by_pid(v.pid) {
                Some(r) => rank_labels(f, r, self.cfg.pid_label),
                None => vec![label("node", &f.node)],
            };
            l.push(label("signal", v.signal.name()));
            match &v.consequence_of {
                Some(c) => {
                    if let Some(r) = c.rank {
                        l.push(label("cause_rank", &r.to_string()));
                    }
                    l.push(label("cause_signal", c.signal.name()));
                    consequence.get_or_create(&l).set(v.score);
                }
                None => {
                    l.push(label(
                        "severity",
                        match v.severity {
                            crate::model::Severity::Warning => "warning",
                            crate::model::Severity::Critical => "critical",
                        },
                    ));
                    straggler.get_or_create(&l).set(v.score);
                }
            }
        }
        reg.register(
            "kitty_straggler",
            "a rank flagged against its peers (not a consequence of another): its score, the excess over the peers' median in units of the rule's floor (critical from 8)",
            straggler,
        );
        reg.register(
            "kitty_consequence",
            "a rank's symptom caused by another rank's trouble (cause_rank, cause_signal): not a straggler",
            consequence,
        );
        let finding = Family::<LabelSet, GaugeF>::default();
        for x in &f.findings {
            let mut l = vec![label("node", &f.node)];
            if let Some(j) = &x.job {
                l.push(label("training_job", j));
            }
            l.push(label("kind", x.kind.name()));
            let ranks: Vec<String> = x
                .ranks
                .iter()
                .map(|r| r.map_or("-".into(), |r| r.to_string()))
                .collect();
            l.push(label("ranks", &ranks.join(",")));
            finding.get_or_create(&l).set(1.0);
        }
        reg.register(
            "kitty_finding",
            "a steady-window placement finding (kind; ranks): pinning or co-location, not a straggler",
            finding,
        );
    }
}

/// One node-wide row of a frame: the host, a network namespace, a GPU or
/// an RDMA port.
struct Row<'a> {
    scope: u8,
    labels: LabelSet,
    signals: &'a Signals,
}

fn scope_rows(f: &Frame) -> Vec<Row<'_>> {
    let mut rows = vec![Row {
        scope: scope::HOST,
        labels: vec![label("node", &f.node)],
        signals: &f.host.signals,
    }];
    rows.extend(f.netns.iter().map(|n| Row {
        scope: scope::NETNS,
        labels: vec![label("node", &f.node), label("netns", &n.inode.to_string())],
        signals: &n.signals,
    }));
    rows.extend(f.gpus.iter().map(|g| Row {
        scope: scope::GPU,
        labels: gpu_labels(f, g),
        signals: &g.signals,
    }));
    rows.extend(f.nics.iter().map(|n| Row {
        scope: scope::NIC,
        labels: nic_labels(f, n),
        signals: &n.signals,
    }));
    rows
}

/// The signal an accumulated rank family comes from (for its help text).
fn accumulated_sig(family: &str) -> Sig {
    Sig::in_scope(scope::RANK)
        .find(|s| matches!(export(*s, scope::RANK), Export::Accumulated { name, .. } if name == family))
        .unwrap_or(Sig::CpuPct)
}

/// prometheus-client adds `_total` to a counter's name itself.
fn strip_counter(name: &'static str) -> &'static str {
    name.strip_suffix("_total").unwrap_or(name)
}

fn help(s: Sig) -> String {
    let i = s.info();
    format!("{} ({}; kitty signal {})", i.meaning, i.source, i.name)
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
mod tests;
