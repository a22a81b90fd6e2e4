//! Seed 000's validation table, reproduced on this kernel: a 4-rank ring job
//! across network namespaces, with 50 ms of delay, then 5 % loss, then a
//! bandwidth throttle on rank 2's link, each added and removed while the job
//! runs and `kitty-tui record` watches. Needs root (namespaces, TAP, BPF).

use kitty_core::model::{Frame, Sig};
use kitty_faultlab::Lab;
mod support;
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use support::*;

const SLOW: u32 = 2;
const NETWORK: &[&str] = &[
    "rtt_p50_us",
    "rtt_p99_us",
    "srtt_max_us",
    "retrans_per_s",
    "tx_queue_bytes",
];

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

/// (wall_ns, value) of one rank's signal over the recording.
fn series(frames: &[Frame], rank: u32, sig: &str) -> Vec<(u64, f64)> {
    frames
        .iter()
        .filter_map(|f| {
            let r = f.ranks.iter().find(|r| r.labels.rank == Some(rank))?;
            Some((f.wall_ns, r.signal(Sig::from_name(sig)?)?))
        })
        .collect()
}

fn in_window(s: &[(u64, f64)], from: u64, to: u64) -> Vec<f64> {
    s.iter()
        .filter(|(t, _)| *t >= from && *t <= to)
        .map(|(_, v)| *v)
        .collect()
}

/// Seconds from `t` to the first sample after it that satisfies `ok`.
fn seconds_until(s: &[(u64, f64)], t: u64, ok: impl Fn(f64) -> bool) -> Option<f64> {
    s.iter()
        .find(|(w, v)| *w >= t && ok(*v))
        .map(|(w, _)| (*w - t) as f64 / 1e9)
}

/// Network verdicts raised in a window: (rank, signal). (On a 2-core machine
/// the ranks' CPU signals, migrations say, are not this test's subject.)
fn verdicts(frames: &[Frame], from: u64, to: u64) -> Vec<(Option<u32>, String)> {
    let mut v: Vec<_> = frames
        .iter()
        .filter(|f| f.wall_ns >= from && f.wall_ns <= to)
        .flat_map(|f| {
            f.verdicts
                .iter()
                .map(|v| (v.rank, v.signal.name().to_string()))
        })
        .filter(|(_, sig)| NETWORK.contains(&sig.as_str()))
        .collect();
    v.sort();
    v.dedup();
    v
}

#[test]
fn delay_loss_and_throttle_on_one_link_flag_that_rank_only() {
    let _g = serial();
    if !is_root() {
        return skip("the fault lab needs root (network namespaces, TAP devices, BPF)");
    }
    let mut lab = Lab::new(4).expect("create the lab");
    let ports = free_ports(4);
    let ports_arg = ports
        .iter()
        .map(|p| p.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let hosts = (0..4)
        .map(|i| kitty_faultlab::addr(i).to_string())
        .collect::<Vec<_>>()
        .join(",");
    let mut procs = Procs::default();
    for rank in 0..4 {
        let mut cmd = Command::new(kitty_bin());
        cmd.args(["demo-rank", "--rank", &rank.to_string(), "--world", "4"])
            .args([
                "--ports",
                &ports_arg,
                "--hosts",
                &hosts,
                "--chunk-kb",
                "512",
                "--work",
                "1",
            ])
            .env("KITTY_WATCH", "1")
            .env("RANK", rank.to_string())
            .env("JOB_NAME", "faultlab")
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        lab.enter(rank, &mut cmd).unwrap();
        procs.push(cmd.spawn().expect("start rank"));
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("faults.kitty");
    let recorder = Command::new(kitty_bin())
        .args(["record", "-o"])
        .arg(&file)
        .args(["--duration", "90s"])
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let rec_pid = recorder.id();
    procs.push(recorder);
    phase(6.0); // the probes load, the ring connects, a baseline accrues

    let d_on = now_ns();
    lab.set_delay(SLOW as usize, Duration::from_millis(50));
    phase(6.0);
    let d_off = now_ns();
    lab.set_delay(SLOW as usize, Duration::ZERO);
    phase(5.0);

    let l_on = now_ns();
    lab.set_loss(SLOW as usize, 0.05).expect("loss filter");
    phase(8.0);
    let l_off = now_ns();
    lab.clear_loss(SLOW as usize);
    phase(5.0);

    let t_on = now_ns();
    lab.set_throttle(SLOW as usize, "8mbit").expect("tbf");
    phase(8.0);
    let t_off = now_ns();
    lab.clear_throttle(SLOW as usize);
    phase(5.0);
    let end = now_ns();

    // SAFETY: signalling our own child.
    unsafe { libc::kill(rec_pid as i32, libc::SIGINT) };
    phase(1.5);
    drop(procs);
    drop(lab);
    let (frames, errs) = kitty_core::sinks::record::Reader::open(&file)
        .unwrap()
        .read_all();
    assert!(errs.is_empty(), "{errs:?}");
    let s = 1_000_000_000u64;
    let src = &frames.last().unwrap().sources;
    let rtt = src.get(kitty_core::model::Source::EbpfRtt).unwrap();
    assert!(rtt.is_ok(), "{rtt:?}");

    // 1. Delay: raw RTT p50 from baseline to 45-80 ms within 2 s and back:
    // the 50 ms set, plus what the user-space switch and the data queued
    // behind the delay add on a busy 2-vCPU machine (a clean-clone run saw
    // 63.5 ms over a 4 ms baseline; alone 51.2 ms over 2.6 ms).
    let delayed = 45_000.0..=80_000.0;
    let rtt = series(&frames, SLOW, "rtt_p50_us");
    let base = median(in_window(&rtt, d_on - 3 * s, d_on));
    let during = median(in_window(&rtt, d_on + 2 * s, d_off));
    let after = median(in_window(&rtt, d_off + 2 * s, l_on));
    eprintln!("RTT p50 of rank 2: {base:.0} us -> {during:.0} us -> {after:.0} us");
    assert!(base < 10_000.0, "baseline {base}");
    assert!(delayed.contains(&during), "during the delay: {during}");
    let up = seconds_until(&rtt, d_on, |v| delayed.contains(&v));
    assert!(
        up.is_some_and(|t| t <= 2.0),
        "reached 45-80 ms after {up:?} s"
    );
    let down = seconds_until(&rtt, d_off, |v| v < 10_000.0);
    assert!(down.is_some_and(|t| t <= 2.0), "back after {down:?} s");
    let v = verdicts(&frames, d_on + 3 * s, d_off + 2 * s);
    assert!(v.contains(&(Some(SLOW), "rtt_p50_us".into())), "{v:?}");
    assert!(
        v.iter().all(|(r, _)| *r == Some(SLOW)),
        "a healthy link flagged: {v:?}"
    );

    // 2. Loss: retransmits/s from ~0 to clearly positive and back.
    let re = series(&frames, SLOW, "retrans_per_s");
    let (b, d, a) = (
        median(in_window(&re, d_off + 2 * s, l_on)),
        median(in_window(&re, l_on + 2 * s, l_off)),
        median(in_window(&re, l_off + 2 * s, t_on)),
    );
    eprintln!("retransmits/s of rank 2: {b:.1} -> {d:.1} -> {a:.1}");
    assert!(b <= 1.0 && a <= 1.0, "before {b}, after {a}");
    assert!(d >= 20.0, "during the loss: {d}");
    let v = verdicts(&frames, l_on + 3 * s, l_off + 2 * s);
    assert!(v.contains(&(Some(SLOW), "retrans_per_s".into())), "{v:?}");
    assert!(
        v.iter().all(|(r, _)| *r == Some(SLOW)),
        "a healthy link flagged: {v:?}"
    );

    // 3. Throttle: out segs/s collapse and the tx queue builds, then recover.
    let out = series(&frames, SLOW, "out_segs_per_s");
    let q = series(&frames, SLOW, "tx_queue_bytes");
    let (ob, od, oa) = (
        median(in_window(&out, l_off + 2 * s, t_on)),
        median(in_window(&out, t_on + 2 * s, t_off)),
        median(in_window(&out, t_off + 2 * s, end)),
    );
    let (qb, qd, qa) = (
        median(in_window(&q, l_off + 2 * s, t_on)),
        median(in_window(&q, t_on + 2 * s, t_off)),
        median(in_window(&q, t_off + 2 * s, end)),
    );
    eprintln!("out segs/s of rank 2: {ob:.0} -> {od:.0} -> {oa:.0}; tx queue {qb:.0} -> {qd:.0} -> {qa:.0} B");
    assert!(od < ob / 4.0, "out segs did not collapse: {ob} -> {od}");
    assert!(oa > ob / 2.0, "out segs did not recover: {od} -> {oa}");
    assert!(
        qd > 1_000_000.0 && qd > 2.0 * qb.max(1.0),
        "tx queue {qb} -> {qd}"
    );
    assert!(qa < qd / 3.0, "tx queue did not drain: {qd} -> {qa}");
    let v = verdicts(&frames, t_on + 3 * s, t_off + 2 * s);
    assert!(v.contains(&(Some(SLOW), "tx_queue_bytes".into())), "{v:?}");
    assert!(
        v.iter().all(|(r, _)| *r == Some(SLOW)),
        "a healthy link flagged: {v:?}"
    );
}
