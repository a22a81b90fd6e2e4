//! Snapshot tests of every view, rendered from fixed frames into ratatui's
//! TestBackend and compared with insta.

use super::app::{App, View};
use super::keymap::KeyMap;
use super::views::draw;
use kitty_core::model::*;
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use std::time::Duration;

fn rank(i: u32, run_delay: f64) -> RankFrame {
    let mut s = Signals::new();
    for (k, v) in [
        (Sig::CpuPct, 12.0 + i as f64),
        (Sig::RunDelayMsPerS, run_delay),
        (Sig::MigrationsPerS, 0.0),
        (Sig::AffinityCpus, 1.0),
        (Sig::RetransPerS, 0.0),
        (Sig::OutSegsPerS, 450.0),
        (Sig::TxQueueBytes, 0.0),
        (Sig::BytesSentPerS, 9_800_000.0),
        (Sig::SrttMaxUs, 40.0),
        (Sig::Threads, 2.0),
    ] {
        s.set(k, v);
    }
    RankFrame {
        key: ProcKey {
            pid: 4000 + i,
            start_time: 1,
        },
        comm: "train.py".into(),
        labels: Labels {
            rank: Some(i),
            job: Some("gpt2-ddp".into()),
            ..Default::default()
        },
        state: "S".into(),
        netns: Some(1),
        gpu: None,
        counters: RankCounters::default(),
        signals: s,
        histograms: Default::default(),
        sockets: vec![SocketFrame {
            inode: 10 + i as u64,
            local: format!("127.0.0.1:{}", 5000 + i).into(),
            remote: format!("127.0.0.1:{}", 5001 + i).into(),
            state: "ESTABLISHED".into(),
            tx_queue: 0,
            rx_queue: 0,
            info: Some(TcpInfo {
                rtt_us: 40,
                total_retrans: 0,
                ..Default::default()
            }),
            signals: Signals::new(),
        }],
        threads: vec![ThreadFrame {
            tid: 4000 + i,
            comm: "train.py".into(),
            run_delay_ms_per_s: run_delay,
            cpu_pct: 10.0,
        }],
        ..Default::default()
    }
}

fn frame(t: u64, straggler: bool, nranks: u32) -> Frame {
    let mut f = Frame {
        version: FRAME_VERSION,
        seq: t,
        wall_ns: 1_764_403_200_000_000_000 + t * 500_000_000,
        mono_ns: 1_000_000_000 + t * 500_000_000,
        node: "gpu-node-7".into(),
        interval_ms: 500,
        ..Default::default()
    };
    for i in 0..nranks {
        let rd = if straggler && i == 2 {
            100.0 + t as f64 * 4.0
        } else {
            0.5 + (i as f64) * 0.1
        };
        f.ranks.push(rank(i, rd));
    }
    f.sources.insert(Source::Procfs, SourceStatus::ok());
    f.sources.insert(Source::SockDiag, SourceStatus::ok());
    for (k, v) in [
        (Sig::CpuUtilPct, 41.5),
        (Sig::ProcsRunning, 3.0),
        (Sig::ProcsBlocked, 0.0),
        (Sig::Load1, 1.2),
        (Sig::MemUsedPct, 12.0),
        (Sig::MemAvailableBytes, 20e9),
        (Sig::ShmUsedBytes, 1e6),
        (Sig::ShmTotalBytes, 12e9),
        (Sig::PsiCpuSomePct, 0.5),
        (Sig::PsiMemorySomePct, 0.0),
        (Sig::PsiIoSomePct, 0.0),
    ] {
        f.host.signals.set(k, v);
    }
    f.host.cpu_pct = vec![20.0, 63.0];
    f.job_step_ms.set("gpt2-ddp".into(), 21.3);
    if straggler && t >= 3 {
        f.verdicts.push(Verdict {
            rank: Some(2),
            pid: 4002,
            job: Some("gpt2-ddp".into()),
            signal: Sig::RunDelayMsPerS,
            value: 100.0 + t as f64 * 4.0,
            peer_median: 0.6,
            ratio: (100.0 + t as f64 * 4.0) / 0.6,
            for_s: (t - 2) as f64 * 0.5,
            severity: Severity::Critical,
            peak: 100.0 + t as f64 * 4.0,
            score: (100.0 + t as f64 * 4.0 - 0.6) / 25.0,
            consequence_of: None,
            culprits: vec![],
            detail: None,
            message: format!(
                "rank 2: run-queue delay {:.0} ms/s vs peers 0.60 ms/s ({:.0}x) for {} s",
                100.0 + t as f64 * 4.0,
                (100.0 + t as f64 * 4.0) / 0.6,
                (t - 2) / 2
            )
            .into(),
        });
    }
    if t == 0 {
        f.events.push(Event::new(
            f.wall_ns,
            EventKind::RankAppeared,
            "rank 0 appeared (pid 4000, train.py)",
        ));
    }
    if straggler && t == 3 {
        f.events.push(Event::new(
            f.wall_ns,
            EventKind::VerdictRaised,
            f.verdicts[0].message.as_str(),
        ));
    }
    f
}

fn app_with(frames: impl IntoIterator<Item = Frame>) -> App {
    let mut app = App::new(KeyMap::default(), Duration::from_millis(500));
    app.set_kernel("6.18.0");
    app.set_color(true);
    // Snapshots must not depend on the zone of the machine running them.
    app.set_utc(true);
    for f in frames {
        app.on_frame(f);
    }
    app
}

/// Selects the row of a process, wherever the sort put it.
fn select_pid(app: &mut App, pid: u32) {
    let row = app.rows().iter().position(|r| r.key.pid == pid).unwrap();
    app.select(row);
}

fn render(app: &App, w: u16, h: u16) -> String {
    let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
    term.draw(|f| draw(f, app)).unwrap();
    let buf = term.backend().buffer().clone();
    let mut out = String::new();
    for y in 0..h {
        for x in 0..w {
            out.push_str(buf[(x, y)].symbol());
        }
        out.push('\n');
    }
    out
}

#[test]
fn main_view_healthy() {
    let app = app_with((0..8).map(|t| frame(t, false, 4)));
    insta::assert_snapshot!(render(&app, 160, 45));
}

#[test]
fn main_view_with_straggler_highlights_the_cell() {
    let mut app = app_with((0..8).map(|t| frame(t, true, 4)));
    select_pid(&mut app, 4002);
    let text = render(&app, 160, 45);
    assert!(text.contains("rank 2: run-queue delay"));
    insta::assert_snapshot!(text);
    // The cell, not only the row, carries the severity style.
    let mut term = Terminal::new(TestBackend::new(160, 45)).unwrap();
    app.select(0);
    term.draw(|f| draw(f, &app)).unwrap();
    let buf = term.backend().buffer().clone();
    let y = (0..45)
        .find(|y| {
            (0..20)
                .map(|x| buf[(x, *y)].symbol().to_string())
                .collect::<String>()
                .contains(" 4002 ")
        })
        .unwrap();
    let x = (0..160)
        .find(|x| buf[(*x, y)].bg == ratatui::style::Color::Red)
        .expect("a red cell on rank 2's row");
    assert!(
        buf[(1, y)].bg != ratatui::style::Color::Red,
        "the whole row is not painted, only cells"
    );
    assert!(x > 20);
}

#[test]
fn rank_detail() {
    let mut app = app_with((0..8).map(|t| frame(t, true, 4)));
    select_pid(&mut app, 4002);
    app.show(View::Detail);
    insta::assert_snapshot!(render(&app, 160, 45));
}

#[test]
fn help_lists_every_key() {
    let mut app = app_with([frame(0, false, 4)]);
    app.show(View::Help);
    let text = render(&app, 160, 45);
    for (_, _, _, what) in super::keymap::ACTIONS {
        assert!(text.contains(what), "help lacks {what}");
    }
    insta::assert_snapshot!(text);
}

#[test]
fn empty_state_says_how_to_mark_a_process() {
    let app = app_with([frame(0, false, 0)]);
    let text = render(&app, 120, 30);
    assert!(text.contains("KITTY_WATCH=1"));
    insta::assert_snapshot!(text);
}

#[test]
fn gpu_less_state_says_why() {
    let mut app = app_with([frame(0, false, 4)]);
    app.show(View::Gpus);
    let text = render(&app, 100, 20);
    assert!(text.contains("No GPU telemetry"));
    insta::assert_snapshot!(text);
}

#[test]
fn small_terminals() {
    let app = app_with((0..8).map(|t| frame(t, true, 4)));
    let text = render(&app, 80, 24);
    assert!(text.contains("columns hidden"));
    insta::assert_snapshot!("80x24", text);
    insta::assert_snapshot!("20x10", render(&app, 20, 10));
    // Resize storm: every size from tiny to large renders without panic.
    for w in (1..170).step_by(7) {
        for h in (1..50).step_by(5) {
            render(&app, w, h);
        }
    }
}

#[test]
fn no_color_uses_no_colours() {
    let mut app = app_with((0..8).map(|t| frame(t, true, 4)));
    app.set_color(false);
    let mut term = Terminal::new(TestBackend::new(160, 45)).unwrap();
    term.draw(|f| draw(f, &app)).unwrap();
    let buf = term.backend().buffer().clone();
    for c in buf.content() {
        assert_eq!(c.bg, ratatui::style::Color::Reset);
        assert_eq!(c.fg, ratatui::style::Color::Reset);
    }
}

#[test]
fn keys_filter_sort_pause_and_step() {
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    let key = |c: KeyCode| KeyEvent::new(c, KeyModifiers::NONE);
    let mut app = app_with((0..8).map(|t| frame(t, true, 4)));
    for c in "/rank 3".chars() {
        app.on_key(key(KeyCode::Char(c)));
    }
    app.on_key(key(KeyCode::Enter));
    assert_eq!(app.rows().len(), 1);
    app.on_key(key(KeyCode::Esc));
    assert_eq!(app.rows().len(), 4);
    app.run_command("sort runq");
    assert_eq!(app.rows()[0].labels.rank, Some(2));
    app.on_key(key(KeyCode::Char(' ')));
    assert!(app.is_paused());
    let seq = app.frame().unwrap().seq;
    app.on_key(key(KeyCode::Char('T')));
    assert_eq!(app.frame().unwrap().seq, seq - 1);
    app.on_frame(frame(8, true, 4));
    assert_eq!(
        app.frame().unwrap().seq,
        seq - 1,
        "paused view does not move"
    );
    app.on_key(key(KeyCode::Char('t')));
    app.on_key(key(KeyCode::Char('t')));
    assert_eq!(app.frame().unwrap().seq, seq + 1);
    app.on_key(key(KeyCode::Char('q')));
    assert!(app.should_quit());
}

/// Four GPUs: 2 throttled (HW slowdown), 1 with an XID 79, 3 lost; rank i on GPU i.
fn gpu_frame(t: u64) -> Frame {
    let mut f = frame(t, false, 4);
    f.sources.insert(Source::Nvml, SourceStatus::ok());
    for i in 0..4u32 {
        let mut s = Signals::new();
        for (k, v) in [
            (Sig::UtilPct, if i == 2 { 60.0 } else { 90.0 } + t as f64),
            (Sig::MemUtilPct, 40.0),
            (Sig::MemUsedBytes, 60e9),
            (Sig::MemTotalBytes, 141e9),
            (Sig::PowerW, 650.0 - t as f64),
            (Sig::TempC, if i == 2 { 87.0 } else { 62.0 }),
            (Sig::SmClockMhz, if i == 2 { 1100.0 } else { 1980.0 }),
            (Sig::SmClockMaxMhz, 1980.0),
            (Sig::PcieGen, 5.0),
            (Sig::PcieWidth, 16.0),
            (Sig::EccSbeVolatile, 0.0),
            (Sig::EccDbeVolatile, 0.0),
        ] {
            s.set(k, v);
        }
        let mut g = GpuFrame {
            index: i,
            name: "NVIDIA H200".into(),
            signals: s,
            ..Default::default()
        };
        match i {
            1 => {
                g.xid_recent = 1;
                g.xid_last = vec![79];
            }
            2 => g.throttle = vec!["hw_slowdown".into()],
            3 => {
                g.status = GpuStatus::Lost;
                g.signals = Signals::new();
            }
            _ => {}
        }
        f.gpus.push(g);
        f.ranks[i as usize].gpu = Some(i);
    }
    if t >= 3 {
        f.verdicts.push(Verdict {
            rank: Some(2),
            pid: 4002,
            job: Some("gpt2-ddp".into()),
            signal: Sig::GpuThrottleSlowing,
            value: 1.0,
            peer_median: 0.0,
            ratio: 100.0,
            for_s: 1.0,
            severity: Severity::Critical,
            peak: 1.0,
            score: 10.0,
            consequence_of: None,
            culprits: vec![],
            detail: None,
            message: "rank 2: GPU throttled while its peers are not, for 1 s".into(),
        });
    }
    f
}

#[test]
fn gpu_panes_show_badges_and_ranks() {
    let mut app = app_with((0..8).map(gpu_frame));
    let main = render(&app, 160, 45);
    assert!(
        main.contains("HW_SLOWDOWN") && main.contains("XID 79") && main.contains("LOST"),
        "{main}"
    );
    insta::assert_snapshot!("gpu_main", main);
    app.show(View::Gpus);
    let detail = render(&app, 160, 45);
    assert!(detail.contains("GPU2 NVIDIA H200  ranks 2"));
    assert!(detail.contains("1100 / 1980 MHz"));
    insta::assert_snapshot!("gpu_detail", detail);
}

/// The GPU views over a recording of a real H200 (2 ranks on GPU 0, at its
/// power cap; kitty-core's fixture, taken by `scripts/gpu-check.sh`).
#[test]
fn gpu_views_of_a_real_h200() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../kitty-core/tests/fixtures/recording-v5-h200.kitty");
    let mut reader = kitty_core::sinks::record::Reader::open(&path).unwrap();
    let (frames, _) = reader.read_all();
    let mut app = app_with(frames.into_iter().take(12));
    let main = render(&app, 160, 45);
    assert!(main.contains("GPU0") && main.contains("r0,1"), "{main}");
    insta::assert_snapshot!("gpu_h200_main", main);
    app.show(View::Gpus);
    let detail = render(&app, 160, 45);
    assert!(
        detail.contains("GPU0 NVIDIA H200  ranks 0,1  SW_POWER_CAP"),
        "{detail}"
    );
    assert!(
        detail.contains("SM active") && detail.contains("tensor"),
        "{detail}"
    );
    insta::assert_snapshot!("gpu_h200_detail", detail);
}

fn sample_profile() -> kitty_core::profile::Profile {
    use kitty_core::profile::{Profile, StackSample};
    let s = |tid: u32, thread: &str, frames: &[&str], count| StackSample {
        tid,
        thread: thread.into(),
        frames: frames.iter().map(|f| (*f).into()).collect(),
        count,
    };
    Profile {
        pid: 4002,
        comm: "train.py".into(),
        frequency_hz: 99,
        duration_s: 5.0,
        stacks: vec![
            s(4002, "train.py", &["main", "train_step", "forward", "matmul"], 300),
            s(4002, "train.py", &["main", "train_step", "backward"], 120),
            s(4010, "loader", &["main", "dataloader", "decode_jpeg"], 80),
            s(4010, "loader", &["main", "dataloader", "read", "vfs_read_[k]"], 20),
        ],
        samples: 520,
        lost_user_stacks: 3,
        notes: vec!["user stacks are shallow (median depth 1): the binary was probably built without frame pointers".into()],
        ..Default::default()
    }
}

#[test]
fn flame_view_walks_zooms_and_searches() {
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    let key = |c: KeyCode| KeyEvent::new(c, KeyModifiers::NONE);
    let mut app = app_with((0..4).map(|t| frame(t, true, 4)));
    app.profile_finished(Ok(vec![sample_profile(), sample_off_cpu()]));
    app.show(View::Flame);
    app.set_color(false);
    let text = render(&app, 120, 20);
    insta::assert_snapshot!("flame_all", text);
    // Down to main, down to train_step (the largest callee), right to its sibling.
    for c in [KeyCode::Down, KeyCode::Down, KeyCode::Right] {
        app.on_key(key(c));
    }
    let fl = app.flame().unwrap();
    assert_eq!(fl.tree.nodes[fl.selected].name, "dataloader");
    app.on_key(key(KeyCode::Enter));
    let text = render(&app, 120, 20);
    assert!(
        text.contains("dataloader") && !text.contains("matmul"),
        "{text}"
    );
    assert!(
        text.contains("total 19.2 % (100 samples, 100.0 % of the zoom)"),
        "{text}"
    );
    // Search highlights and reports the share of samples.
    app.on_key(key(KeyCode::Esc)); // zoom out
    app.on_key(key(KeyCode::Char('/')));
    for c in "mat".chars() {
        app.on_key(key(KeyCode::Char(c)));
    }
    app.on_key(key(KeyCode::Enter));
    let text = render(&app, 120, 20);
    assert!(text.contains("/mat: 57.7 % of the total"), "{text}");
    // Per thread: the threads become the roots' children.
    app.on_key(key(KeyCode::Char('t')));
    insta::assert_snapshot!("flame_per_thread", render(&app, 120, 20));
    // Tab: where it waited, runnable and blocked at the root.
    app.on_key(key(KeyCode::Char('t')));
    app.on_key(key(KeyCode::Tab));
    let text = render(&app, 120, 20);
    assert!(
        text.contains("0.40 s runnable (waiting for a CPU) · 1.60 s blocked"),
        "{text}"
    );
    assert!(text.contains("[blocked: sleeping in the kernel]"), "{text}");
    insta::assert_snapshot!("flame_off_cpu", text);
    app.on_key(key(KeyCode::Tab));
    assert!(
        render(&app, 120, 20).contains("samples · 99 Hz"),
        "Tab cycles back to on-CPU"
    );
    // Esc at the top leaves the view; q still quits from it.
    app.on_key(key(KeyCode::Esc));
    app.on_key(key(KeyCode::Esc));
    assert_eq!(app.view(), View::Main);
}

fn sample_off_cpu() -> kitty_core::profile::Profile {
    use kitty_core::profile::{Profile, ProfileKind, StackSample, BLOCKED_FRAME, RUNNABLE_FRAME};
    let s = |frames: &[&str], count| StackSample {
        tid: 4002,
        thread: "train.py".into(),
        frames: frames.iter().map(|f| (*f).into()).collect(),
        count,
    };
    Profile {
        kind: ProfileKind::OffCpu,
        pid: 4002,
        comm: "train.py".into(),
        duration_s: 5.0,
        stacks: vec![
            s(
                &[
                    BLOCKED_FRAME,
                    "main",
                    "recv",
                    "tcp_recvmsg_[k]",
                    "schedule_[k]",
                ],
                1_600_000,
            ),
            s(
                &[RUNNABLE_FRAME, "main", "train_step", "schedule_[k]"],
                400_000,
            ),
        ],
        samples: 900,
        runnable_us: 400_000,
        blocked_us: 1_600_000,
        ..Default::default()
    }
}

#[test]
fn flows_view_lists_top_talkers_with_coverage() {
    let mut f = frame(1, false, 4);
    f.sources.insert(
        Source::EbpfFlow,
        SourceStatus::ok().with_strategy("tp_btf/sock_send_length+sock_recv_length"),
    );
    f.host.signals.set(Sig::FlowCoveragePct, 96.0);
    for (pid, remote, rate) in [(4000, "10.0.0.2:5001", 8e8), (4001, "10.0.0.3:5002", 2e8)] {
        f.flows.push(FlowFrame {
            pid,
            netns: 1,
            protocol: "tcp".into(),
            local: "10.0.0.1:40000".into(),
            remote: remote.into(),
            tx_bytes: (rate * 10.0) as u64,
            tx_bytes_per_s: rate,
            ..Default::default()
        });
    }
    let mut app = app_with([f]);
    app.run_command("flows");
    let text = render(&app, 120, 12);
    assert!(text.contains("coverage of interface bytes 96 %"), "{text}");
    insta::assert_snapshot!(text);
}

#[test]
fn detail_shows_the_run_queue_histogram() {
    let mut frames: Vec<Frame> = (0..4).map(|t| frame(t, true, 4)).collect();
    for f in &mut frames {
        f.ranks[2].histograms.insert(
            HistKind::RunqUs,
            vec![(16.0, 40), (1024.0, 10), (9216.0, 30)],
        );
    }
    let mut app = app_with(frames);
    select_pid(&mut app, 4002);
    app.show(View::Detail);
    let text = render(&app, 160, 45);
    assert!(text.contains("run-queue latency, this tick"), "{text}");
    assert!(
        text.contains("≤16 ms") || text.contains("≤16.4 ms") || text.contains("≤16"),
        "{text}"
    );
}

/// A replay's detail view: the run-queue histogram when the recording kept
/// it, else the tick's percentiles and why there is no histogram.
#[test]
fn a_replay_without_histograms_says_so_and_shows_the_percentiles() {
    use kitty_core::sinks::record::{Header, Reader, Writer};
    let dir = tempfile::tempdir().unwrap();
    let mut frames: Vec<Frame> = (0..4).map(|t| frame(t, true, 4)).collect();
    for f in &mut frames {
        let r = &mut f.ranks[2];
        r.histograms.insert(
            HistKind::RunqUs,
            vec![(16.0, 40), (1024.0, 10), (9216.0, 30)],
        );
        r.signals.set(Sig::RunqP50Us, 16.0);
        r.signals.set(Sig::RunqP99Us, 9216.0);
        r.signals.set(Sig::RunqMaxUs, 9000.0);
    }
    for keep in [false, true] {
        let path = dir.path().join(format!("{keep}.kitty"));
        let header = Header::now("gpu-node-7", Duration::from_millis(500)).with_histograms(keep);
        let mut w = Writer::create(&path, &header).unwrap();
        frames.iter().for_each(|f| w.append(f).unwrap());
        w.finish().unwrap();
        let mut app = App::new(KeyMap::default(), Duration::from_millis(500))
            .with_replay(super::app::ReplayState::new(Reader::open(&path).unwrap()));
        app.replay_show(3);
        select_pid(&mut app, 4002);
        app.show(View::Detail);
        let text = render(&app, 160, 45);
        assert!(text.contains("run-queue latency, this tick"), "{text}");
        assert_eq!(
            text.contains("histogram not recorded (record --histograms keeps it)"),
            !keep,
            "{text}"
        );
        assert!(
            text.contains("p50 16 us  p99 9.22 ms  max 9 ms"),
            "the percentiles with or without the histogram: {text}"
        );
        assert_eq!(
            text.contains("≤16 us ███"),
            keep,
            "the histogram's bars: {text}"
        );
    }
}

#[test]
fn a_view_slower_than_the_sampler_reports_its_skips() {
    let mut app = app_with((0..3).map(|t| frame(t, false, 4)));
    let mut f = frame(5, false, 4);
    f.dropped_frames = 2;
    app.on_frame(f);
    assert_eq!(app.skipped(), 2);
    assert!(app.events().any(|e| e.kind == EventKind::FramesSkipped));
    let text = render(&app, 160, 45);
    assert!(text.contains("the view skipped 2 frame(s)"), "{text}");
}

#[test]
fn hostile_names_are_drawn_as_visible_escapes() {
    let mut frames: Vec<Frame> = (0..4).map(|t| frame(t, true, 4)).collect();
    for f in &mut frames {
        f.ranks[0].comm = Text::new("\x1b]0;PWNED\x07");
        f.ranks[1].labels.job = Some(Text::new("evil\r\x1b[2J\u{9b}31m"));
        f.ranks[2].threads[0].comm = Text::new("\x1b]52;c;eA==\x07");
    }
    let mut app = app_with(frames);
    for view in [View::Main, View::Detail, View::Events] {
        app.show(view);
        for sel in 0..3 {
            app.select(sel);
            let text = render(&app, 160, 45);
            assert!(
                !text.chars().any(|c| c.is_control() && c != '\n'),
                "a raw control character in {view:?}"
            );
        }
    }
    app.show(View::Main);
    select_pid(&mut app, 4000);
    assert!(render(&app, 160, 45).contains("\\e]0;PWNED\\x07"));
}

#[test]
fn findings_have_their_own_pane_with_the_remedy() {
    use kitty_core::model::{Finding, FindingKind};
    let app = app_with((0..8).map(|t| {
        let mut f = frame(t, false, 4);
        f.findings.push(Finding {
            kind: FindingKind::AffinityAsymmetry,
            job: Some("train".into()),
            pids: vec![4003],
            ranks: vec![Some(3)],
            message: "rank 3 is unpinned (may run on all 8 CPUs) while its peers may run on 1 each"
                .into(),
            remedy: "pin every rank the same way".into(),
            for_s: 12.0,
        });
        f
    }));
    let text = render(&app, 160, 45);
    assert!(text.contains(" findings (steady window"), "{text}");
    assert!(text.contains("rank 3 is unpinned"), "{text}");
    assert!(text.contains("→ pin every rank the same way"), "{text}");
    // No verdict: a finding is not a straggler.
    assert!(!text.contains("rank 3: "), "{text}");
    insta::assert_snapshot!(text);
}

/// Three jobs of 4 ranks, rank 2 of each a straggler (job names differ so
/// the JOB column appears).
fn three_jobs(t: u64) -> Frame {
    let mut f = frame(t, true, 4);
    let one = f.clone();
    for (j, name) in ["bert-ft", "llama-70b"].iter().enumerate() {
        let base = 100 * (j as u32 + 1);
        for r in &one.ranks {
            let mut r = r.clone();
            r.key.pid += base;
            r.labels.job = Some((*name).into());
            f.ranks.push(r);
        }
        for v in &one.verdicts {
            let mut v = v.clone();
            v.pid += base;
            v.job = Some((*name).into());
            v.ratio *= (j + 2) as f64;
            f.verdicts.push(v);
        }
    }
    f
}

#[test]
fn every_flagged_ratio_and_the_mode_fit_at_every_size() {
    for jobs in [1, 3] {
        let frames: Vec<Frame> = (0..8)
            .map(|t| {
                if jobs == 1 {
                    frame(t, true, 4)
                } else {
                    three_jobs(t)
                }
            })
            .collect();
        let app = app_with(frames.clone());
        for (w, h) in [(80, 24), (120, 40), (160, 45)] {
            let text = render(&app, w, h);
            assert!(
                text.contains("LIVE 08:00:03 UTC"),
                "{jobs} jobs {w}x{h}: mode\n{text}"
            );
            let last = frames.last().unwrap();
            for v in &last.verdicts {
                let cell = format!("runq {:.0}x", v.ratio);
                assert!(text.contains(&cell), "{jobs} jobs {w}x{h}: {cell}\n{text}");
            }
            assert_eq!(
                text.lines().nth(3).unwrap().contains("JOB"),
                jobs > 1,
                "{jobs} jobs {w}x{h}: a JOB column only for several jobs\n{text}"
            );
        }
        if jobs == 3 {
            insta::assert_snapshot!("three_jobs_80x24", render(&app, 80, 24));
        }
    }
}

#[test]
fn a_click_on_a_header_sorts_by_it() {
    use crossterm::event::{KeyModifiers, MouseButton, MouseEvent, MouseEventKind};
    let mut app = app_with((0..8).map(|t| frame(t, true, 4)));
    let text = render(&app, 160, 45);
    let lines: Vec<&str> = text.lines().collect();
    let header = lines.iter().position(|l| l.starts_with("│RANK")).unwrap();
    let head: Vec<char> = lines[header].chars().collect();
    let at = (0..head.len())
        .find(|&i| head[i..].starts_with(&['R', 'U', 'N', 'Q']))
        .unwrap();
    let click = |col: usize, row: usize| MouseEvent {
        kind: MouseEventKind::Down(MouseButton::Left),
        column: col as u16,
        row: row as u16,
        modifiers: KeyModifiers::NONE,
    };
    assert!(
        app.on_mouse(click(at + 1, header)),
        "{:?}",
        app.layout.sort_headers.borrow()
    );
    assert_eq!(app.sort().0, "runq");
    let text = render(&app, 160, 45);
    assert!(text.contains("RUNQ ms/s▼"), "{text}");
    // Again: reversed.
    app.on_mouse(click(at + 1, header));
    assert!(app.sort_reversed());
}

/// A frame of a node with four RDMA ports (one per rank): rank 2's port
/// congested, mlx5_3 down; each rank with its latest collectives, rank 2
/// arriving late.
fn rdma_frame(t: u64) -> Frame {
    let mut f = frame(t, false, 4);
    for i in 0..4u32 {
        let mut s = Signals::new();
        let hot = i == 2;
        for (k, v) in [
            (Sig::RdmaRateGbps, 400.0),
            (Sig::RdmaWidth, 4.0),
            (Sig::RdmaActive, if i == 3 { 0.0 } else { 1.0 }),
            (Sig::RdmaXmitWaitPerS, if hot { 4.2e6 } else { 1200.0 }),
            (Sig::RdmaCnpPerS, if hot { 850.0 } else { 0.0 }),
            (Sig::RdmaEcnMarkedPerS, if hot { 900.0 } else { 0.0 }),
            (Sig::RdmaRetransPerS, 0.0),
            (Sig::RdmaErrorsPerS, 0.0),
            (Sig::RdmaTxBytesPerS, 21e9),
            (Sig::RdmaRxBytesPerS, 20e9),
            (Sig::RdmaPortDegraded, if i == 3 { 1.0 } else { 0.0 }),
        ] {
            s.set(k, v);
        }
        f.nics.push(NicFrame {
            device: format!("mlx5_{i}").into(),
            port: 1,
            link_layer: Some("InfiniBand".into()),
            state: Some(if i == 3 { "DOWN" } else { "ACTIVE" }.into()),
            phys_state: Some("LinkUp".into()),
            signals: s.clone(),
            problem: (i == 3).then(|| "state DOWN".into()),
            pids: vec![4000 + i],
            ..Default::default()
        });
        let r = &mut f.ranks[i as usize];
        r.nics = vec![format!("mlx5_{i}/1").into()];
        for sig in [
            Sig::RdmaXmitWaitPerS,
            Sig::RdmaCnpPerS,
            Sig::RdmaPortDegraded,
        ] {
            r.signals.set(sig, s.get(sig).unwrap());
        }
        r.signals.set(Sig::NcclLateMs, if hot { 38.0 } else { 0.0 });
        r.collectives = (0..3)
            .map(|k| CollectiveFrame {
                comm: "0x7f8c496ae9f661".into(),
                coll: "AllReduce".into(),
                seq: 1204 - k,
                msg_bytes: 1 << 30,
                exec_us: if hot { 21_000 } else { 59_000 },
                busbw_gbs: if hot { 190.0 } else { 68.0 },
                late_us: Some(if hot { 38_000.0 } else { 0.0 }),
            })
            .collect();
    }
    f.sources.insert(
        Source::Rdma,
        SourceStatus::ok().with_strategy("sysfs, 4 ports"),
    );
    if t >= 3 {
        let v = |signal: Sig, pid: u32, value: f64, message: &str| Verdict {
            rank: Some(pid - 4000),
            pid,
            job: Some("gpt2-ddp".into()),
            signal,
            value,
            peak: value,
            peer_median: 0.0,
            ratio: 100.0,
            score: 10.0,
            for_s: 2.0,
            severity: Severity::Critical,
            message: message.into(),
            consequence_of: None,
            culprits: vec![],
            detail: None,
        };
        f.verdicts = vec![
            v(
                Sig::RdmaXmitWaitPerS,
                4002,
                4.2e6,
                "rank 2: RDMA xmit wait 4.2M/s vs peers 1200/s (3500x) for 2 s",
            ),
            v(
                Sig::NcclLateMs,
                4002,
                38.0,
                "rank 2 arrives 38 ms late to AllReduce (seq 1204) while its peers wait, for 2 s",
            ),
            v(
                Sig::RdmaPortDegraded,
                4003,
                1.0,
                "rank 3: RDMA port degraded while its peers are not, for 2 s",
            ),
        ];
    }
    f
}

#[test]
fn rdma_pane_columns_and_nics_view() {
    let mut app = app_with((0..8).map(rdma_frame));
    let main = render(&app, 160, 45);
    assert!(main.contains("NIC") && main.contains("mlx5_2/1"), "{main}");
    assert!(
        main.contains("LATE ms") && main.contains("IB WAIT/s"),
        "{main}"
    );
    assert!(main.contains("rdma (:nics for detail)"), "{main}");
    assert!(main.contains("mlx5_3/1 DOWN 400Gb r3"), "{main}");
    assert!(main.contains("4.20M"), "large rates get a prefix: {main}");
    insta::assert_snapshot!("rdma_main", main);
    app.show(View::Nics);
    let nics = render(&app, 160, 45);
    assert!(
        nics.contains("rdma ports (4)") && nics.contains("ACTIVE IB"),
        "{nics}"
    );
    insta::assert_snapshot!("rdma_nics", nics);
}

#[test]
fn rank_detail_with_rdma_counters_and_collective_timings() {
    let mut app = app_with((0..8).map(rdma_frame));
    select_pid(&mut app, 4002);
    app.show(View::Detail);
    let text = render(&app, 160, 45);
    assert!(text.contains("rdma ports · NCCL collectives"), "{text}");
    assert!(text.contains("mlx5_2/1 ACTIVE 400 Gb/s"), "{text}");
    assert!(text.contains("AllReduce    1204"), "{text}");
    assert!(
        text.contains("arrives 38 ms late to AllReduce (seq 1204)"),
        "{text}"
    );
    insta::assert_snapshot!("rdma_detail", text);
}

#[test]
fn a_node_without_rdma_says_why_in_the_nics_view() {
    let mut app = app_with([frame(0, false, 4)]);
    app.show(View::Nics);
    let text = render(&app, 100, 20);
    assert!(text.contains("No RDMA ports."), "{text}");
}

#[test]
fn f_asks_the_jobs_flight_recorders_and_the_view_says_who_is_behind() {
    use super::app::dumps::DumpTarget;
    use kitty_core::sources::flight_recorder::{Dump, Entry, PgStatus};
    let with_paths = |t: u64| {
        let mut f = frame(t, false, 3);
        for r in &mut f.ranks {
            let i = r.labels.rank.unwrap();
            r.flight_recorder = Some(FlightRecorderPaths {
                pipe: format!("/proc/{}/root/tmp/fr_{i}.pipe", r.key.pid).into(),
                dump: format!("/proc/{}/root/tmp/nccl_trace_rank_{i}", r.key.pid).into(),
            });
        }
        f
    };
    let mut app = app_with((0..4).map(with_paths));
    app.on_key(crossterm::event::KeyEvent::from(
        crossterm::event::KeyCode::Char('F'),
    ));
    let reqs = app.take_requests();
    let Some(super::app::Request::FlightRecorder(targets)) = reqs.first() else {
        panic!("F asks for dumps: {reqs:?}");
    };
    assert_eq!(targets.len(), 3, "every rank of the job");
    assert!(render(&app, 120, 30).contains("asking 3 ranks' Flight Recorders"));
    let dump = |done: i64| Dump {
        version: "2.4".into(),
        pg_status: vec![PgStatus {
            pg: "0".into(),
            last_enqueued: 1205,
            last_started: done + 1,
            last_completed: done,
        }],
        entries: vec![Entry {
            pg: "0".into(),
            seq: done as u64 + 1,
            op: "nccl:all_reduce".into(),
            state: "started".into(),
            duration_ms: None,
        }],
    };
    let answers: Vec<(DumpTarget, Result<Dump, String>)> = targets
        .iter()
        .map(|t| {
            let r = match t.rank {
                Some(2) => Ok(dump(1200)),
                Some(1) => Err("nothing reads /tmp/fr_1.pipe (Flight Recorder off: TORCH_NCCL_TRACE_BUFFER_SIZE unset?)".into()),
                _ => Ok(dump(1204)),
            };
            (t.clone(), r)
        })
        .collect();
    app.dumps_finished(answers);
    let text = render(&app, 120, 30);
    assert!(
        text.contains("rank 2 is behind in process group 0: completed 1200, its peers up to 1204"),
        "{text}"
    );
    assert!(text.contains("rank 1: nothing reads"), "{text}");
    insta::assert_snapshot!("flight_recorder", text);
}
