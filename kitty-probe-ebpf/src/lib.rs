//! kitty's eBPF probes: raw TCP RTT, run-queue latency, flow bytes and
//! OOM / fatal-signal / execve events. The BPF programs are C
//! (`src/bpf/*.bpf.c`, objects committed beside them, rebuilt by
//! `just ebpf`); this crate loads them with aya and turns their maps into
//! frame signals as an `Enricher`. Each probe degrades on its own. The
//! profiler (`profile`) is separate: it runs on request, not every tick.

mod culprits;
pub mod events;
pub mod flow;
pub mod hist;
mod iter_link;
pub mod kfuncs;
pub mod load;
mod map_batch;
mod mapped;
pub mod profile;
pub mod rtt;
pub mod runq;
pub mod tasks;
mod tcp_socks;
mod watched;

pub use load::ProbeError;

use kitty_core::model::{Frame, Source, SourceStatus};
use kitty_core::sampler::WatchHints;
use kitty_core::sources::Enricher;

/// The probes that attached, and why the others did not.
pub struct Probes {
    rtt: Result<rtt::RttProbe, ProbeError>,
    runq: Result<runq::RunqProbe, ProbeError>,
    flow: Result<flow::FlowProbe, ProbeError>,
    events: Result<events::EventsProbe, ProbeError>,
    /// Fixed once the probes have loaded: put in every frame.
    statuses: Vec<(Source, SourceStatus)>,
    /// Whether the kernel's BTF was let go (the first tick, when the
    /// sampler's task iterator has loaded too).
    released_btf: bool,
}

impl Probes {
    /// Loads and attaches every probe; failures are kept as reasons. New
    /// execs and forks the events probe sees go to `hints`, so the sampler
    /// looks at them on the next tick.
    pub fn start(hints: WatchHints) -> Probes {
        let mut p = Probes {
            rtt: rtt::RttProbe::start(),
            runq: runq::RunqProbe::start(),
            flow: flow::FlowProbe::start(),
            events: events::EventsProbe::start(hints),
            statuses: Vec::new(),
            released_btf: false,
        };
        p.statuses = p.compute_statuses();
        p
    }

    /// Source status per probe, as `doctor` and the header show them.
    pub fn statuses(&self) -> &[(Source, SourceStatus)] {
        &self.statuses
    }

    fn compute_statuses(&self) -> Vec<(Source, SourceStatus)> {
        fn st<T>(r: &Result<T, ProbeError>, strategy: &str) -> SourceStatus {
            match r {
                Ok(_) => SourceStatus::ok().with_strategy(strategy),
                Err(e) => SourceStatus::unavailable(e.to_string()),
            }
        }
        let rtt_strategy = self
            .rtt
            .as_ref()
            .map(|p| p.strategy.clone())
            .unwrap_or_default();
        vec![
            (Source::EbpfRtt, st(&self.rtt, &rtt_strategy)),
            (
                Source::EbpfRunq,
                st(
                    &self.runq,
                    &self
                        .runq
                        .as_ref()
                        .map(runq::RunqProbe::strategy)
                        .unwrap_or_default(),
                ),
            ),
            (
                Source::EbpfFlow,
                st(
                    &self.flow,
                    &self
                        .flow
                        .as_ref()
                        .map(flow::FlowProbe::strategy)
                        .unwrap_or_default(),
                ),
            ),
            (
                Source::EbpfEvents,
                st(
                    &self.events,
                    "tp_btf/mark_victim+sched_process_exit+sched_process_exec+sched_process_fork",
                ),
            ),
        ]
    }

    /// The strategies the RTT probe tried before the one that attached.
    pub fn rtt_tried(&self) -> Vec<String> {
        self.rtt
            .as_ref()
            .map(|p| p.tried.clone())
            .unwrap_or_default()
    }
}

impl Enricher for Probes {
    fn name(&self) -> &'static str {
        "ebpf"
    }

    fn enrich(&mut self, frame: &mut Frame) {
        if !self.released_btf {
            // Everything that loads at start has (the sampler opens its
            // task iterator before its first tick).
            load::release_kernel_btf();
            self.released_btf = true;
        }
        if let Ok(p) = &mut self.rtt {
            p.enrich(frame);
        }
        if let Ok(p) = &mut self.runq {
            p.enrich(frame);
        }
        if let Ok(p) = &mut self.flow {
            p.enrich(frame);
        }
        if let Ok(p) = &mut self.events {
            p.enrich(frame);
        }
        for (name, status) in &self.statuses {
            frame.sources.insert(*name, status.clone());
        }
    }
}
