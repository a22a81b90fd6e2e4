#!/usr/bin/env python3
"""The anchor: a stdlib-only /proc sampler with seed 003's field set (its
host_sampler.py: per process status, stat, fd count, schedstat, sched
(nr_migrations), affinity; host stat, meminfo, loadavg and the established
TCP count), written for the comparison with `kitty-tui record`. It does the
least such a sampler must: read, parse, compute rates, write one JSON line
per sample.

    anchor-sampler.py --pids 1,2,3 --interval 0.5 --out samples.jsonl [--duration S]
"""
import argparse
import json
import os
import signal
import time

HZ = os.sysconf("SC_CLK_TCK")


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def process(pid):
    stat = read(f"/proc/{pid}/stat")
    status = read(f"/proc/{pid}/status")
    if stat is None or status is None:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    st = {}
    for line in status.splitlines():
        k, _, v = line.partition(":")
        st[k] = v.strip()
    sched = read(f"/proc/{pid}/schedstat") or "0 0 0"
    run_ns, delay_ns, _ = (int(x) for x in sched.split()[:3])
    migrations = 0
    for line in (read(f"/proc/{pid}/sched") or "").splitlines():
        if line.startswith("se.nr_migrations"):
            migrations = int(line.split(":")[1])
    try:
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        fds = None
    try:
        ncpus = len(os.sched_getaffinity(pid))
    except OSError:
        ncpus = None
    return {
        "pid": pid,
        "comm": st.get("Name"),
        "state": fields[0],
        "utime": int(fields[11]) / HZ,
        "stime": int(fields[12]) / HZ,
        "threads": int(st.get("Threads", "0")),
        "rss_kb": int(st.get("VmRSS", "0 kB").split()[0]),
        "ctx_vol": int(st.get("voluntary_ctxt_switches", "0")),
        "ctx_invol": int(st.get("nonvoluntary_ctxt_switches", "0")),
        "run_ns": run_ns,
        "run_delay_ns": delay_ns,
        "nr_migrations": migrations,
        "fds": fds,
        "affinity_ncpus": ncpus,
    }


def host():
    h = {}
    for line in (read("/proc/stat") or "").splitlines():
        p = line.split()
        if p and p[0] == "cpu":
            h["cpu_ticks"] = [int(x) for x in p[1:]]
        elif p and p[0] in ("procs_running", "procs_blocked"):
            h[p[0]] = int(p[1])
    for line in (read("/proc/meminfo") or "").splitlines():
        k, _, v = line.partition(":")
        if k in ("MemTotal", "MemAvailable"):
            h[k] = int(v.split()[0])
    h["load1"] = float((read("/proc/loadavg") or "0").split()[0])
    est = 0
    for t in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in (read(t) or "").splitlines()[1:]:
            if line.split()[3] == "01":
                est += 1
    h["tcp_established"] = est
    return h


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pids", required=True)
    ap.add_argument("--interval", type=float, default=0.5)
    ap.add_argument("--out", required=True)
    ap.add_argument("--duration", type=float)
    a = ap.parse_args()
    pids = [int(p) for p in a.pids.split(",")]
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    prev = {}
    t0 = time.monotonic()
    nxt = t0
    with open(a.out, "w") as out:
        while not stop and (a.duration is None or time.monotonic() - t0 < a.duration):
            now = time.monotonic()
            procs = []
            for pid in pids:
                p = process(pid)
                if p is None:
                    continue
                q = prev.get(pid)
                if q:
                    dt = now - q[0]
                    old = q[1]
                    p["cpu_pct"] = 100 * (p["utime"] + p["stime"] - old["utime"] - old["stime"]) / dt
                    p["run_delay_ms_per_s"] = (p["run_delay_ns"] - old["run_delay_ns"]) / 1e6 / dt
                    p["migrations_per_s"] = (p["nr_migrations"] - old["nr_migrations"]) / dt
                prev[pid] = (now, p)
                procs.append(p)
            out.write(json.dumps({"t_mono": now, "t_wall": time.time(), "host": host(), "procs": procs}) + "\n")
            out.flush()
            nxt += a.interval
            time.sleep(max(0.0, nxt - time.monotonic()))


if __name__ == "__main__":
    main()
