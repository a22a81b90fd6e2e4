//! kitty's eBPF probes: raw TCP RTT, run-queue latency, flow bytes and
//! OOM / fatal-signal / execve events. The BPF programs are C
//! (`src/bpf/*.bpf.c`, objects committed beside them, rebuilt by
//! `just ebpf`); this crate loads them with aya and turns their maps into
//! frame signals as an `Enricher`. Each probe degrades on its own.

pub mod events;
pub mod flow;
pub mod hist;
pub mod load;
pub mod profile;
pub mod rtt;
pub mod runq;
mod watched;

use kitty_core::engine::Enricher;
use kitty_core::frame::{Frame, SourceStatus};

/// The probes that attached, and why the others did not.
pub struct Probes {
    rtt: Result<rtt::RttProbe, String>,
    runq: Result<runq::RunqProbe, String>,
    flow: Result<flow::FlowProbe, String>,
    events: Result<events::EventsProbe, String>,
    /// Fixed once the probes have loaded: put in every frame.
    statuses: Vec<(String, SourceStatus)>,
}

impl Probes {
    /// Loads and attaches every probe; failures are kept as reasons.
    pub fn start() -> Probes {
        let mut p = Probes {
            rtt: rtt::RttProbe::start(),
            runq: runq::RunqProbe::start(),
            flow: flow::FlowProbe::start(),
            events: events::EventsProbe::start(),
            statuses: Vec::new(),
        };
        p.statuses = p.compute_statuses();
        p
    }

    /// Source status per probe, as `doctor` and the header show them.
    pub fn statuses(&self) -> &[(String, SourceStatus)] {
        &self.statuses
    }

    fn compute_statuses(&self) -> Vec<(String, SourceStatus)> {
        fn st<T>(r: &Result<T, String>, strategy: Option<String>) -> SourceStatus {
            match r {
                Ok(_) => SourceStatus {
                    strategy,
                    ..SourceStatus::ok()
                },
                Err(e) => SourceStatus::unavailable(e.clone()),
            }
        }
        let rtt_strategy = self.rtt.as_ref().ok().map(|p| p.strategy.clone());
        vec![
            ("ebpf.rtt".into(), st(&self.rtt, rtt_strategy)),
            (
                "ebpf.runq".into(),
                st(&self.runq, Some("tp_btf/sched_wakeup+sched_switch".into())),
            ),
            (
                "ebpf.flow".into(),
                st(
                    &self.flow,
                    Some("tp_btf/sock_send_length+sock_recv_length".into()),
                ),
            ),
            (
                "ebpf.events".into(),
                st(
                    &self.events,
                    Some("tp_btf/mark_victim+sched_process_exit+sched_process_exec".into()),
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
    fn enrich(&mut self, frame: &mut Frame) {
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
            frame.sources.insert(name.clone(), status.clone());
        }
    }
}
