//! One rank's frame from its sample, its sockets and the previous tick:
//! gauges always, rates once there is a previous sample.

use super::procs::ProcPrev;
use crate::model::addr::addr_text;
use crate::model::rates::{counter_rates, hundredths, rate, TcpDeltas};
use crate::model::{
    Histograms, RankCounters, RankFrame, Sig, Signals, SocketFrame, TcpInfo, Text, ThreadFrame,
};
use crate::sources::discovery::Watched;
use crate::sources::process::ProcSample;
use crate::sources::tcp_table::SocketRaw;
use std::net::SocketAddr;

/// Everything one rank's frame is built from.
pub(super) struct RankInput<'a> {
    pub w: &'a Watched,
    pub s: &'a ProcSample,
    pub cfs_ns: Option<u64>,
    pub sockets: &'a [&'a SocketRaw],
    pub prev: Option<&'a ProcPrev>,
    pub dt_s: Option<f64>,
    pub migrations_rate: Option<f64>,
    pub migrations: Option<(u64, u64)>,
}

/// The busiest threads kept per rank.
const THREADS_KEPT: usize = 8;

pub(super) fn build_rank(input: RankInput) -> RankFrame {
    let RankInput {
        w,
        s,
        cfs_ns,
        sockets,
        prev,
        dt_s,
        migrations_rate,
        migrations,
    } = input;
    let mut sig = gauges(s, sockets);
    let infos = || sockets.iter().filter_map(|x| x.info.as_ref());

    let mut socket_frames = Vec::with_capacity(sockets.len());
    let mut deltas = TcpDeltas::default();
    for raw in sockets {
        let before = prev.and_then(|p| p.sockets.get(&raw.inode));
        // Its rates, and the RTT probe's median where the probe runs.
        let mut ssig = Signals::with_capacity(TcpDeltas::SIGNALS + 1);
        if let (Some(_), Some(info), Some(dt)) = (prev, &raw.info, dt_s) {
            let was = before.and_then(|b| b.info.as_ref());
            let mut d = TcpDeltas::default();
            d.add(was, info);
            d.write(dt, &mut ssig);
            deltas.add(was, info);
        }
        socket_frames.push(SocketFrame {
            inode: raw.inode,
            local: endpoint_text(&raw.local, before.map(|b| &b.local)),
            remote: endpoint_text(&raw.remote, before.map(|b| &b.remote)),
            state: Text::of_static(raw.state),
            tx_queue: raw.tx_queue,
            rx_queue: raw.rx_queue,
            info: raw.info.clone(),
            signals: ssig,
        });
    }

    let any_info = infos().next().is_some();
    let sum = |f: &dyn Fn(&TcpInfo) -> Option<u64>| -> Option<u64> {
        any_info.then(|| infos().filter_map(f).sum())
    };
    let counters = RankCounters {
        nr_migrations: migrations.map_or(0, |(_, total)| total),
        tcp_total_retrans: sum(&|i| Some(i.total_retrans as u64)),
        tcp_segs_out: sum(&|i| i.segs_out.map(u64::from)),
        tcp_segs_in: sum(&|i| i.segs_in.map(u64::from)),
        tcp_bytes_acked: sum(&|i| i.bytes_acked),
        tcp_bytes_received: sum(&|i| i.bytes_received),
        ..sample_counters(s, cfs_ns)
    };

    let mut threads = Vec::new();
    if let (Some(p), Some(dt)) = (prev, dt_s) {
        let ps = &p.sample;
        counter_rates(&sample_counters(ps, p.cfs_ns), &counters, dt, &mut sig);
        sig.set_opt(Sig::MigrationsPerS, migrations_rate);
        if any_info {
            deltas.write(dt, &mut sig);
        }
        threads = busiest_threads(s, ps, dt);
    }

    RankFrame {
        node: None,
        stale: false,
        endpoint: None,
        nic_numa: w.nic_numa.clone(),
        nics: Vec::new(),
        collectives: Vec::new(),
        flight_recorder: None,
        key: w.key,
        comm: Text::new(&s.comm),
        labels: w.labels.clone(),
        state: state_text(s.state),
        netns: w.netns,
        gpu: None,
        counters,
        signals: sig,
        sockets: socket_frames,
        threads,
        histograms: Histograms::default(),
        affinity: s.affinity.clone(),
        ran_instead: Vec::new(),
        cgroup_cpu: None,
    }
}

/// A socket's endpoint as text: the last tick's while the address holds
/// (a connected socket's never changes), so it is printed and allocated
/// once in the socket's life rather than every tick.
fn endpoint_text(addr: &SocketAddr, before: Option<&(SocketAddr, Text)>) -> Text {
    match before {
        Some((was, text)) if was == addr => text.clone(),
        _ => addr_text(addr),
    }
}

/// A process's state letter (`stat`'s third field) as text, shared for
/// the letters the kernel prints.
fn state_text(state: char) -> Text {
    const LETTERS: &str = "RSDZTtXxKWPI";
    match LETTERS.find(state) {
        Some(i) => Text::of_static(&LETTERS[i..i + state.len_utf8()]),
        None => Text::new(state.encode_utf8(&mut [0; 4])),
    }
}

/// The counters a process's own sample gives (the rank adds its
/// migrations and its sockets' sums).
fn sample_counters(s: &ProcSample, cfs_ns: Option<u64>) -> RankCounters {
    RankCounters {
        cpu_ticks: s.cpu_ticks,
        ctx_voluntary: s.ctx_voluntary,
        ctx_involuntary: s.ctx_involuntary,
        run_delay_ns: s.run_delay_ns,
        exec_ns: s.exec_ns,
        io_read_bytes: s.io_read_bytes,
        io_write_bytes: s.io_write_bytes,
        cfs_throttled_ns: cfs_ns,
        ..Default::default()
    }
}

/// Room for a rank's signals in one allocation: the sampler's, the
/// rates' and the probes' (~35 on the 8-rank ring with the probes; grown
/// from empty they took five, doubling from four).
const RANK_SIGNALS: usize = 48;

/// Levels that need no previous sample: threads, memory, fds, queues, RTTs.
fn gauges(s: &ProcSample, sockets: &[&SocketRaw]) -> Signals {
    let mut sig = Signals::with_capacity(RANK_SIGNALS);
    sig.set(Sig::Threads, s.threads as f64);
    sig.set_opt(Sig::RssBytes, s.rss_bytes.map(|v| v as f64));
    sig.set_opt(Sig::AffinityCpus, s.affinity_cpus.map(|v| v as f64));
    sig.set_opt(Sig::Fds, s.fds.map(|v| v as f64));
    sig.set_opt(Sig::Sockets, s.fds.map(|_| s.socket_inodes.len() as f64));
    sig.set(Sig::TcpSockets, sockets.len() as f64);
    sig.set(
        Sig::TxQueueBytes,
        sockets.iter().map(|x| x.tx_queue).sum::<u64>() as f64,
    );
    sig.set(
        Sig::RxQueueBytes,
        sockets.iter().map(|x| x.rx_queue).sum::<u64>() as f64,
    );
    // Walked as needed, not collected: a vector a rank a tick.
    let infos = || sockets.iter().filter_map(|x| x.info.as_ref());
    if infos().next().is_none() {
        return sig;
    }
    let total = |f: fn(&TcpInfo) -> Option<u64>| infos().filter_map(f).sum::<u64>();
    sig.set(
        Sig::NotsentBytes,
        total(|i| i.notsent_bytes.map(u64::from)) as f64,
    );
    sig.set_opt(
        Sig::SrttMaxUs,
        sockets
            .iter()
            .filter(|x| x.state == "ESTABLISHED")
            .filter_map(|x| x.info.as_ref())
            .map(|i| i.rtt_us as f64)
            .reduce(f64::max),
    );
    sig.set_opt(
        Sig::MinRttUs,
        infos()
            .filter_map(|i| i.min_rtt_us)
            .filter(|v| *v > 0 && *v != u32::MAX)
            .map(|v| v as f64)
            .reduce(f64::min),
    );
    sig.set(
        Sig::DeliveryRateBytesPerS,
        total(|i| i.delivery_rate) as f64,
    );
    sig
}

/// A thread's rates in the interval, before it is named: tid, run delay
/// (ms/s), CPU (%), raw name.
type ThreadRates<'a> = (u32, f64, f64, &'a std::sync::Arc<str>);

/// The threads with the most run-queue delay (then CPU) in the interval,
/// the lower tid first among equals. Only those kept are named: a GPU
/// rank has a hundred threads and more, and each tick named and sorted
/// every one of them before.
fn busiest_threads(s: &ProcSample, ps: &ProcSample, dt: f64) -> Vec<ThreadFrame> {
    // Both samples' threads in tid order: the one before's entry for a tid
    // is found by walking it alongside, not by a lookup per thread (a
    // GPU node's rank has ~150).
    let mut before = ps.per_thread.iter().peekable();
    let mut rates: Vec<ThreadRates> = s
        .per_thread
        .iter()
        .filter_map(|(tid, t)| {
            while before.next_if(|(p, _)| *p < tid).is_some() {}
            let (_, pt) = before.next_if(|(p, _)| *p == tid)?;
            let delay = rate(pt.run_delay_ns, t.run_delay_ns, dt).unwrap_or(0.0) / 1e6;
            let cpu = rate(pt.exec_ns, t.exec_ns, dt).unwrap_or(0.0) / 1e7;
            Some((*tid, hundredths(delay), hundredths(cpu), &t.comm))
        })
        .collect();
    let busier = |a: &ThreadRates, b: &ThreadRates| {
        b.1.total_cmp(&a.1)
            .then(b.2.total_cmp(&a.2))
            .then(a.0.cmp(&b.0))
    };
    if rates.len() > THREADS_KEPT {
        rates.select_nth_unstable_by(THREADS_KEPT - 1, busier);
        rates.truncate(THREADS_KEPT);
    }
    rates.sort_unstable_by(busier);
    rates
        .into_iter()
        .map(|(tid, delay, cpu, comm)| ThreadFrame {
            tid,
            comm: Text::of_shared(comm),
            run_delay_ms_per_s: delay,
            cpu_pct: cpu,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::process::ThreadSample;

    fn sample(threads: impl Iterator<Item = (u32, u64, u64)>) -> ProcSample {
        let mut s = ProcSample::default();
        for (tid, run_delay_ns, exec_ns) in threads {
            let t = ThreadSample {
                comm: format!("worker-{tid}").into(),
                run_delay_ns,
                exec_ns,
            };
            s.per_thread.insert(tid, t);
        }
        s
    }

    #[test]
    fn the_busiest_threads_of_many_are_those_a_full_sort_puts_first() {
        // 150 threads over 1 s: delays in five steps (many equal), CPU in
        // seven, so ties are broken by CPU and then by the lower tid.
        let before = sample((1..=150).map(|tid| (tid, 0, 0)));
        let after = sample((1..=150).map(|tid| {
            let t = u64::from(tid);
            (tid, (t * 37 % 5) * 1_000_000, (t * 11 % 7) * 10_000_000)
        }));
        let kept = busiest_threads(&after, &before, 1.0);

        let mut all: Vec<(u32, f64, f64)> = (1..=150u32)
            .map(|tid| {
                let t = u64::from(tid);
                (tid, (t * 37 % 5) as f64, (t * 11 % 7) as f64)
            })
            .collect();
        all.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.2.total_cmp(&a.2)));
        let want: Vec<(u32, f64, f64)> = all.into_iter().take(THREADS_KEPT).collect();
        let got: Vec<(u32, f64, f64)> = kept
            .iter()
            .map(|t| (t.tid, t.run_delay_ms_per_s, t.cpu_pct))
            .collect();
        assert_eq!(got, want);
        assert_eq!(kept[0].comm.as_str(), format!("worker-{}", kept[0].tid));
    }

    #[test]
    fn a_thread_new_in_the_interval_is_left_out_and_few_are_all_kept() {
        let before = sample([(1, 0, 0), (2, 0, 0)].into_iter());
        let after = sample([(1, 5_000_000, 0), (2, 0, 30_000_000), (3, 9, 9)].into_iter());
        let kept = busiest_threads(&after, &before, 1.0);
        let tids: Vec<u32> = kept.iter().map(|t| t.tid).collect();
        assert_eq!(tids, [1, 2], "most delay first; tid 3 has no rate yet");
        assert_eq!((kept[0].run_delay_ms_per_s, kept[1].cpu_pct), (5.0, 3.0));
    }

    #[test]
    fn threads_gone_and_new_between_two_samples_are_matched_by_tid() {
        // 1 and 5 exited, 2, 4 and 9 are new; 3 and 7 ran in both.
        let before = sample([(1, 0, 0), (3, 0, 0), (5, 0, 0), (7, 0, 0)].into_iter());
        let after = sample(
            [
                (2, 50_000_000, 0),
                (3, 1_000_000, 0),
                (4, 90_000_000, 0),
                (7, 2_000_000, 0),
                (9, 70_000_000, 0),
            ]
            .into_iter(),
        );
        let kept = busiest_threads(&after, &before, 1.0);
        let got: Vec<(u32, f64)> = kept.iter().map(|t| (t.tid, t.run_delay_ms_per_s)).collect();
        assert_eq!(got, [(7, 2.0), (3, 1.0)]);
    }

    #[test]
    fn a_kept_threads_plain_name_is_its_rows_own_allocation() {
        let before = sample([(1, 0, 0)].into_iter());
        let after = sample([(1, 5_000_000, 0)].into_iter());
        let kept = busiest_threads(&after, &before, 1.0);
        let raw = &after.per_thread[&1].comm;
        assert_eq!(kept[0].comm.as_str().as_ptr(), raw.as_ptr());
    }

    #[test]
    fn an_endpoints_text_is_the_last_ticks_while_its_address_holds() {
        let a: SocketAddr = "10.0.0.7:29500".parse().unwrap();
        let b: SocketAddr = "[fe80::1]:29500".parse().unwrap();
        let first = endpoint_text(&a, None);
        assert_eq!(first.as_str(), "10.0.0.7:29500");
        let kept = (a, first.clone());
        let again = endpoint_text(&a, Some(&kept));
        assert_eq!(again.as_str().as_ptr(), first.as_str().as_ptr());
        // Another address (an inode reused by a new socket): printed anew.
        assert_eq!(endpoint_text(&b, Some(&kept)).as_str(), b.to_string());
    }

    #[test]
    fn a_process_state_letter_is_its_text() {
        for c in "RSDZTtXxKWPI".chars() {
            assert_eq!(state_text(c).as_str(), c.to_string());
        }
        assert_eq!(state_text('?').as_str(), "?");
        assert_eq!(state_text('\u{1b}').as_str(), "\\e");
    }
}
