//! The network fault lab: ranks in their own network namespaces, each joined
//! to a switch namespace through a userspace relay between two TAP devices
//! (so that a link can be given pure delay: this kernel has no netem), with
//! bandwidth throttling (tbf on the rank's egress) and packet loss (a tc BPF
//! classifier on the switch side, where a real lossy link would drop). Every
//! fault can be added and removed while traffic runs. Used by the tests and
//! by `kitty-tui demo --straggler net-*`. Needs root.

mod netns;
mod relay;
mod tap;

use std::fs::File;
use std::io;
use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

pub use netns::in_netns;

/// The loss program, built by `just ebpf` like the probes.
static DROP_OBJ: &[u8] = aya::include_bytes_aligned!("bpf/drop.bpf.o");

struct Link {
    ns: String,
    ns_file: File,
    /// The TAP device's name in the switch namespace.
    sw_if: String,
    delay_us: Arc<AtomicU64>,
    loss: Option<aya::Ebpf>,
    throttled: bool,
}

/// A switch and `n` ranks' namespaces; all removed on drop.
pub struct Lab {
    prefix: String,
    switch: String,
    switch_file: File,
    links: Vec<Link>,
    stop: Arc<AtomicBool>,
    relays: Vec<JoinHandle<()>>,
}

/// The subnet every lab uses inside its own namespaces.
pub fn addr(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 77, 0, (i + 1) as u8)
}

fn ip(args: &[&str]) -> io::Result<()> {
    run("ip", args)
}

fn run(prog: &str, args: &[&str]) -> io::Result<()> {
    let out = Command::new(prog).args(args).output()?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "{prog} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

impl Lab {
    /// Creates the namespaces, the switch and one relayed link per rank.
    pub fn new(n: usize) -> io::Result<Lab> {
        if n == 0 || n > 200 {
            return Err(io::Error::other("a lab has 1 to 200 ranks"));
        }
        netns::remove_stale();
        let prefix = format!("kl{}", std::process::id());
        let switch = format!("{prefix}-sw");
        netns::add(&switch)?;
        let switch_file = File::open(netns::path(&switch))?;
        let stop = Arc::new(AtomicBool::new(false));
        let mut lab = Lab {
            prefix: prefix.clone(),
            switch: switch.clone(),
            switch_file,
            links: Vec::new(),
            stop: stop.clone(),
            relays: Vec::new(),
        };
        ip(&["-n", &switch, "link", "add", "br0", "type", "bridge"])?;
        ip(&["-n", &switch, "link", "set", "br0", "up"])?;
        for i in 0..n {
            let ns = format!("{prefix}-r{i}");
            netns::add(&ns)?;
            let (a, b) = (format!("{prefix}r{i}a"), format!("{prefix}r{i}b"));
            let ta = tap::open(&a)?;
            let tb = tap::open(&b)?;
            ip(&["link", "set", &a, "netns", &ns])?;
            ip(&["-n", &ns, "link", "set", &a, "name", "eth0"])?;
            ip(&[
                "-n",
                &ns,
                "addr",
                "add",
                &format!("{}/24", addr(i)),
                "dev",
                "eth0",
            ])?;
            ip(&["-n", &ns, "link", "set", "eth0", "up"])?;
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
            ip(&["link", "set", &b, "netns", &switch])?;
            ip(&["-n", &switch, "link", "set", &b, "master", "br0"])?;
            ip(&["-n", &switch, "link", "set", &b, "up"])?;
            let delay_us = Arc::new(AtomicU64::new(0));
            let (ta2, tb2) = (ta.try_clone()?, tb.try_clone()?);
            lab.relays
                .push(relay::spawn(ta, tb, delay_us.clone(), stop.clone()));
            lab.relays
                .push(relay::spawn(tb2, ta2, delay_us.clone(), stop.clone()));
            lab.links.push(Link {
                ns_file: File::open(netns::path(&ns))?,
                ns,
                sw_if: b,
                delay_us,
                loss: None,
                throttled: false,
            });
        }
        Ok(lab)
    }

    pub fn len(&self) -> usize {
        self.links.len()
    }

    pub fn is_empty(&self) -> bool {
        self.links.is_empty()
    }

    /// The rank's network namespace name (for `ip -n`).
    pub fn netns(&self, i: usize) -> &str {
        &self.links[i].ns
    }

    pub fn netns_path(&self, i: usize) -> PathBuf {
        netns::path(&self.links[i].ns)
    }

    /// Makes `cmd` run inside rank `i`'s namespace.
    pub fn enter(&self, i: usize, cmd: &mut Command) -> io::Result<()> {
        let fd = self.links[i].ns_file.try_clone()?;
        // SAFETY: setns is async-signal-safe; the fd stays open in the child.
        unsafe {
            cmd.pre_exec(move || {
                if libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        Ok(())
    }

    /// Adds `rtt` of pure delay to every connection through rank `i`'s link
    /// (half in each direction). Zero removes it.
    pub fn set_delay(&self, i: usize, rtt: Duration) {
        self.links[i]
            .delay_us
            .store(rtt.as_micros() as u64 / 2, Ordering::SeqCst);
    }

    /// Drops `fraction` (0..1) of the frames rank `i` sends, on the switch
    /// side (the far end, as a lossy cable would), so TCP retransmits.
    pub fn set_loss(&mut self, i: usize, fraction: f64) -> io::Result<()> {
        self.clear_loss(i);
        let per_million = (fraction.clamp(0.0, 1.0) * 1e6) as u32;
        let iface = self.links[i].sw_if.clone();
        let ebpf = in_netns(self.switch_file.try_clone()?, move || {
            load_drop(&iface, per_million)
        })?;
        self.links[i].loss = Some(ebpf);
        Ok(())
    }

    pub fn clear_loss(&mut self, i: usize) {
        // Closing the program's link detaches it.
        self.links[i].loss = None;
    }

    /// Throttles what rank `i` sends with tbf (`rate` like "4mbit").
    pub fn set_throttle(&mut self, i: usize, rate: &str) -> io::Result<()> {
        self.clear_throttle(i);
        let ns = self.links[i].ns.clone();
        ip_tc(
            &ns,
            &[
                "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", rate, "burst", "16kb",
                "latency", "400ms",
            ],
        )?;
        self.links[i].throttled = true;
        Ok(())
    }

    pub fn clear_throttle(&mut self, i: usize) {
        if self.links[i].throttled {
            let ns = self.links[i].ns.clone();
            let _ = ip_tc(&ns, &["qdisc", "del", "dev", "eth0", "root"]);
            self.links[i].throttled = false;
        }
    }

    pub fn prefix(&self) -> &str {
        &self.prefix
    }
}

fn ip_tc(ns: &str, args: &[&str]) -> io::Result<()> {
    let mut full = vec!["netns", "exec", ns, "tc"];
    full.extend_from_slice(args);
    ip(&full)
}

fn load_drop(iface: &str, per_million: u32) -> io::Result<aya::Ebpf> {
    use aya::programs::{tc, SchedClassifier, TcAttachType};
    let err = |e: &dyn std::fmt::Display| io::Error::other(format!("loss filter on {iface}: {e}"));
    let mut ebpf = aya::EbpfLoader::new()
        .override_global("drop_per_million", &per_million, true)
        .load(DROP_OBJ)
        .map_err(|e| err(&e))?;
    // Kernels before 6.6 attach through a clsact qdisc; newer ones use tcx.
    let _ = tc::qdisc_add_clsact(iface);
    let prog: &mut SchedClassifier = ebpf
        .program_mut("drop_fraction")
        .ok_or_else(|| err(&"program missing"))?
        .try_into()
        .map_err(|e| err(&e))?;
    prog.load().map_err(|e| err(&e))?;
    prog.attach(iface, TcAttachType::Ingress)
        .map_err(|e| err(&e))?;
    Ok(ebpf)
}

impl Drop for Lab {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for l in &mut self.links {
            l.loss = None;
        }
        for h in self.relays.drain(..) {
            let _ = h.join();
        }
        for l in &self.links {
            netns::del(&l.ns);
        }
        netns::del(&self.switch);
    }
}
