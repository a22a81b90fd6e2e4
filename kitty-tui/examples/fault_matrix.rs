//! The fault matrix (issue 13; run it through `scripts/fault-matrix.sh`,
//! as root): a 4-rank ring job, each rank in its own network namespace of
//! the fault lab and pinned (rank 2 alone on the last CPU), recorded by the
//! real `kitty-tui record` with the NVML stub. From a healthy baseline, each
//! fault in turn on rank 2 and its removal; then healthy minutes. For each
//! fault it prints the rank and cause kitty flagged, the time to flag and to
//! clear, the consequences it showed, and any false straggler.
//!
//! Usage: fault_matrix KITTY_BIN NVML_STUB_LIB [--healthy SECONDS] [--hold SECONDS]

// The table is this program's output.
#![allow(clippy::print_stdout)]

use kitty_core::model::{FindingKind, Frame, Sig};
use kitty_faultlab::Lab;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The rank every fault is put on.
const SLOW: u32 = 2;
const RANKS: usize = 4;

/// What kitty should say about a fault.
#[derive(Clone, Copy)]
enum Expect {
    /// A straggler verdict on rank 2 for one of these signals.
    Verdict(&'static [Sig]),
    /// A finding about rank 2.
    Finding(FindingKind),
}

struct Fault {
    name: &'static str,
    expect: Expect,
}

const FAULTS: &[Fault] = &[
    Fault {
        name: "CPU co-location (8 busy threads on rank 2's CPU)",
        expect: Expect::Verdict(&[Sig::RunDelayMsPerS, Sig::RunqP99Us]),
    },
    Fault {
        name: "CFS quota (rank 2's cgroup at 1 % of a CPU)",
        expect: Expect::Verdict(&[Sig::CfsThrottledMsPerS]),
    },
    Fault {
        name: "unpinned rank (rank 2 on every CPU)",
        expect: Expect::Finding(FindingKind::AffinityAsymmetry),
    },
    Fault {
        name: "50 ms delay on rank 2's link",
        expect: Expect::Verdict(&[Sig::RttP50Us, Sig::RttP99Us, Sig::SrttMaxUs]),
    },
    Fault {
        name: "5 % loss on rank 2's link",
        expect: Expect::Verdict(&[Sig::RetransPerS]),
    },
    Fault {
        name: "8 Mbit/s throttle on rank 2's link",
        expect: Expect::Verdict(&[
            Sig::TxQueueBytes,
            Sig::RttP50Us,
            Sig::RttP99Us,
            Sig::SrttMaxUs,
        ]),
    },
    Fault {
        name: "GPU throttle (NVML stub: HW slowdown on rank 2's GPU)",
        expect: Expect::Verdict(&[Sig::GpuThrottleSlowing, Sig::GpuSmClockMhz]),
    },
];

fn wall_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

fn pause(secs: f64) {
    std::thread::sleep(Duration::from_secs_f64(secs));
}

struct Setup {
    lab: Lab,
    kitty: PathBuf,
    ranks: Vec<Child>,
    nvml_cfg: PathBuf,
    cgroup: Option<PathBuf>,
    hog: Option<Child>,
    last_cpu: usize,
}

impl Setup {
    fn pid(&self, rank: u32) -> u32 {
        self.ranks[rank as usize].id()
    }

    fn nvml(&self, slow: bool) {
        let mut text = format!("count={RANKS}\n");
        for (i, r) in self.ranks.iter().enumerate() {
            text.push_str(&format!("gpu.{i}.pids={}:{}\n", r.id(), 1u64 << 30));
        }
        if slow {
            text.push_str(&format!("gpu.{SLOW}.throttle=8\ngpu.{SLOW}.sm_clock=900\n"));
        }
        std::fs::write(&self.nvml_cfg, text).expect("write the NVML stub's file");
    }

    fn pin_all(&self, rank: u32, cpus: &str) {
        let st = Command::new("taskset")
            .args(["-a", "-c", "-p", cpus, &self.pid(rank).to_string()])
            .stdout(Stdio::null())
            .status();
        assert!(
            st.is_ok_and(|s| s.success()),
            "taskset {cpus} on rank {rank}"
        );
    }

    fn apply(&mut self, i: usize, on: bool) {
        let all = format!("0-{}", self.last_cpu);
        match i {
            0 if on => {
                self.hog = Some(
                    Command::new(&self.kitty)
                        .args([
                            "demo-hog",
                            "--cpu",
                            &self.last_cpu.to_string(),
                            "--threads",
                            "8",
                        ])
                        .stdout(Stdio::null())
                        .spawn()
                        .expect("start the hog"),
                );
            }
            0 => {
                if let Some(mut h) = self.hog.take() {
                    let _ = h.kill();
                    let _ = h.wait();
                }
            }
            1 => self.cfs_quota(on),
            2 if on => self.pin_all(SLOW, &all),
            2 => self.pin_all(SLOW, &self.last_cpu.to_string()),
            3 => self.lab.set_delay(
                SLOW as usize,
                Duration::from_millis(if on { 50 } else { 0 }),
            ),
            4 if on => self.lab.set_loss(SLOW as usize, 0.05).expect("loss filter"),
            4 => self.lab.clear_loss(SLOW as usize),
            5 if on => self.lab.set_throttle(SLOW as usize, "8mbit").expect("tbf"),
            5 => self.lab.clear_throttle(SLOW as usize),
            6 => self.nvml(on),
            _ => {}
        }
    }

    /// Moves rank 2 into a cgroup with a 1 % quota (cgroup v1 `cpu` or v2),
    /// and back.
    fn cfs_quota(&mut self, on: bool) {
        let v1 = Path::new("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").exists();
        let root = if v1 {
            Path::new("/sys/fs/cgroup/cpu")
        } else {
            Path::new("/sys/fs/cgroup")
        };
        let pid = self.pid(SLOW).to_string();
        if on {
            let dir = root.join(format!("kitty-matrix-{}", std::process::id()));
            std::fs::create_dir_all(&dir).expect("create the cgroup");
            if v1 {
                std::fs::write(dir.join("cpu.cfs_quota_us"), "1000").expect("set the quota");
            } else {
                std::fs::write(dir.join("cpu.max"), "1000 100000").expect("set cpu.max");
            }
            std::fs::write(dir.join("cgroup.procs"), &pid).expect("move rank 2");
            self.cgroup = Some(dir);
        } else if let Some(dir) = self.cgroup.take() {
            let _ = std::fs::write(root.join("cgroup.procs"), &pid);
            pause(0.2);
            let _ = std::fs::remove_dir(&dir);
        }
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        self.apply(0, false);
        self.cfs_quota(false);
        for r in &mut self.ranks {
            let _ = r.kill();
            let _ = r.wait();
        }
    }
}

/// When kitty said what about rank 2, within [from, to).
fn flagged(frames: &[Frame], expect: Expect, from: u64, to: u64) -> Vec<(u64, String)> {
    frames
        .iter()
        .filter(|f| f.wall_ns >= from && f.wall_ns < to)
        .filter_map(|f| {
            let said = match expect {
                Expect::Verdict(sigs) => f
                    .verdicts
                    .iter()
                    .find(|v| {
                        v.rank == Some(SLOW) && !v.is_consequence() && sigs.contains(&v.signal)
                    })
                    .map(|v| v.message.to_string()),
                Expect::Finding(kind) => f
                    .findings
                    .iter()
                    .find(|x| x.kind == kind && x.ranks.contains(&Some(SLOW)))
                    .map(|x| x.message.to_string()),
            };
            said.map(|s| (f.wall_ns, s))
        })
        .collect()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let kitty = PathBuf::from(
        args.next()
            .expect("usage: fault_matrix KITTY_BIN NVML_STUB_LIB"),
    );
    let stub = PathBuf::from(
        args.next()
            .expect("usage: fault_matrix KITTY_BIN NVML_STUB_LIB"),
    );
    let (mut healthy, mut hold) = (300.0, 10.0);
    while let Some(a) = args.next() {
        let v: f64 = args
            .next()
            .and_then(|v| v.parse().ok())
            .expect("a number of seconds");
        match a.as_str() {
            "--healthy" => healthy = v,
            "--hold" => hold = v,
            _ => panic!("unknown option {a}"),
        }
    }
    let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert!(ncpu >= 2, "the matrix needs 2 CPUs: rank 2 alone on one");
    let last_cpu = ncpu - 1;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let lab = Lab::new(RANKS).expect("create the fault lab (root, ip, tc)");
    let ports: Vec<String> = (0..RANKS).map(|i| (29400 + i).to_string()).collect();
    let hosts: Vec<String> = (0..RANKS)
        .map(|i| kitty_faultlab::addr(i).to_string())
        .collect();
    let mut ranks = Vec::new();
    for rank in 0..RANKS {
        // One CPU each: rank 2 alone on the last, the others on the rest
        // (sharing them when there are fewer CPUs than ranks).
        let cpus = if rank as u32 == SLOW {
            last_cpu.to_string()
        } else {
            let nth = if rank as u32 > SLOW { rank - 1 } else { rank };
            (nth % last_cpu).to_string()
        };
        let mut cmd = Command::new(&kitty);
        cmd.args([
            "demo-rank",
            "--rank",
            &rank.to_string(),
            "--world",
            &RANKS.to_string(),
        ])
        .args(["--ports", &ports.join(","), "--hosts", &hosts.join(",")])
        .args(["--chunk-kb", "256", "--work", "400", "--cpus", &cpus])
        .env("KITTY_WATCH", "1")
        .env("RANK", rank.to_string())
        .env("JOB_NAME", "matrix")
        .env("MASTER_ADDR", &hosts[0])
        .env("MASTER_PORT", &ports[0])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        lab.enter(rank, &mut cmd)
            .expect("enter the rank's namespace");
        ranks.push(cmd.spawn().expect("start a rank"));
    }
    let mut setup = Setup {
        lab,
        kitty: kitty.clone(),
        ranks,
        nvml_cfg: dir.path().join("nvml.cfg"),
        cgroup: None,
        hog: None,
        last_cpu,
    };
    setup.nvml(false);
    let file = dir.path().join("matrix.kitty");
    let mut recorder = Command::new(&kitty)
        .args(["record", "-o"])
        .arg(&file)
        .args(["--findings-window", "12s", "--nvml-lib"])
        .arg(&stub)
        .env("KITTY_NVML_STUB", &setup.nvml_cfg)
        .stderr(Stdio::null())
        .spawn()
        .expect("start kitty-tui record");
    eprintln!("baseline (10 s)...");
    pause(10.0);
    let mut times = Vec::new();
    for (i, f) in FAULTS.iter().enumerate() {
        eprintln!("{} ({hold:.0} s on, {hold:.0} s off)...", f.name);
        let on = wall_ns();
        setup.apply(i, true);
        pause(hold);
        let off = wall_ns();
        setup.apply(i, false);
        pause(hold);
        times.push((on, off, wall_ns()));
    }
    eprintln!("healthy ({healthy:.0} s)...");
    let h_from = wall_ns();
    let started = Instant::now();
    while started.elapsed().as_secs_f64() < healthy {
        pause(1.0);
    }
    let h_to = wall_ns();
    // SAFETY: signalling our own child (a clean close of the recording).
    unsafe { libc::kill(recorder.id() as i32, libc::SIGINT) };
    let _ = recorder.wait();
    drop(setup);
    let (frames, errs) = kitty_core::sinks::record::Reader::open(&file)
        .expect("open the recording")
        .read_all();
    assert!(errs.is_empty(), "{errs:?}");
    // KITTY_MATRIX_KEEP=FILE keeps the recording (replay it to see why).
    if let Some(keep) = std::env::var_os("KITTY_MATRIX_KEEP") {
        let _ = std::fs::copy(&file, keep);
    }

    println!("| fault | flagged (rank 2) | time to flag | time to clear | consequences shown | false stragglers |");
    println!("|---|---|---|---|---|---|");
    let mut ok = true;
    for (f, &(on, off, end)) in FAULTS.iter().zip(&times) {
        let during = flagged(&frames, f.expect, on, off + 1_000_000_000);
        let first = during.first();
        let t_flag = first.map(|(t, _)| (*t as f64 - on as f64) / 1e9);
        let after = flagged(&frames, f.expect, off, end);
        let last_after = after.last().map(|(t, _)| *t).unwrap_or(off);
        let t_clear = (last_after as f64 - off as f64) / 1e9;
        let cleared = frames
            .iter()
            .filter(|x| x.wall_ns > last_after && x.wall_ns < end)
            .count()
            > 0;
        let window = |x: &&Frame| x.wall_ns >= on && x.wall_ns < end;
        let mut consequences: Vec<String> = frames
            .iter()
            .filter(window)
            .flat_map(|x| x.verdicts.iter().filter(|v| v.is_consequence()))
            .map(|v| {
                format!(
                    "rank {} {}",
                    v.rank.map_or("-".into(), |r| r.to_string()),
                    v.signal.name()
                )
            })
            .collect();
        consequences.sort();
        consequences.dedup();
        let mut false_v: Vec<String> = frames
            .iter()
            .filter(window)
            .flat_map(|x| {
                x.verdicts
                    .iter()
                    .filter(|v| v.job.as_deref() == Some("matrix"))
                    .filter(|v| v.rank != Some(SLOW) && !v.is_consequence())
            })
            .map(|v| {
                format!(
                    "rank {} {}",
                    v.rank.map_or("-".into(), |r| r.to_string()),
                    v.signal.name()
                )
            })
            .collect();
        false_v.sort();
        false_v.dedup();
        let what = first.map_or("**not flagged**".to_string(), |(_, m)| {
            m.chars().take(90).collect::<String>()
        });
        let secs = |t: Option<f64>| t.map_or("-".into(), |t| format!("{t:.1} s"));
        ok &= first.is_some() && cleared && false_v.is_empty();
        println!(
            "| {} | {} | {} | {} | {} | {} |",
            f.name,
            what.replace('|', "/"),
            secs(t_flag),
            if cleared {
                secs(Some(t_clear))
            } else {
                "**not cleared**".into()
            },
            if consequences.is_empty() {
                "-".into()
            } else {
                consequences.join(", ")
            },
            if false_v.is_empty() {
                "0".into()
            } else {
                false_v.join(", ")
            },
        );
    }
    // Healthy: nothing at all, after the last fault's removal has settled.
    let healthy_frames: Vec<&Frame> = frames
        .iter()
        .filter(|f| f.wall_ns >= h_from && f.wall_ns <= h_to)
        .collect();
    let v = healthy_frames
        .iter()
        .flat_map(|f| f.verdicts.iter())
        .filter(|v| v.job.as_deref() == Some("matrix"))
        .count();
    // The lab's own packet relay (this process) is the simulated network,
    // not a neighbour of the job: its busy-neighbour finding is left out.
    let me = std::process::id();
    let not_the_lab = |x: &&kitty_core::model::Finding| !x.pids.contains(&me);
    let fi = healthy_frames
        .iter()
        .flat_map(|f| f.findings.iter())
        .filter(|x| x.job.as_deref() == Some("matrix"))
        .filter(not_the_lab)
        .count();
    println!();
    println!(
        "healthy pinned job, {:.0} s ({} frames): {v} verdict-frames, {fi} finding-frames",
        (h_to - h_from) as f64 / 1e9,
        healthy_frames.len()
    );
    let mut said: Vec<String> = healthy_frames
        .iter()
        .flat_map(|f| {
            f.verdicts
                .iter()
                .filter(|v| v.job.as_deref() == Some("matrix"))
                .map(|v| v.message.to_string())
                .chain(
                    f.findings
                        .iter()
                        .filter(|x| x.job.as_deref() == Some("matrix"))
                        .filter(not_the_lab)
                        .map(|x| format!("finding: {}", x.message)),
                )
        })
        .collect();
    said.sort();
    said.dedup();
    for m in said.iter().take(10) {
        println!("  {m}");
    }
    ok &= v == 0 && fi == 0;
    std::process::exit(if ok { 0 } else { 1 });
}
