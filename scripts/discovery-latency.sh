#!/bin/sh
# How long a new rank takes to appear in kitty's frames, with the eBPF
# probes (exec/fork events hint discovery at the next tick) and without
# (the 5 s discovery scan). Root for the probes.
#   scripts/discovery-latency.sh [RUNS]   (default 10 per mode)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-10}
cd "$root"
cargo build -q --release -p kitty-tui
bin=$root/target/release/kitty-tui
for mode in "probes" "no-ebpf"; do
    python3 - "$bin" "$mode" "$runs" <<'PY'
import json, os, signal, statistics, subprocess, sys, tempfile, time
bin, mode, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
d = tempfile.mkdtemp()
rec = os.path.join(d, "r.kitty")
args = [bin, "record", "-o", rec, "--no-gpu"] + (["--no-ebpf"] if mode == "no-ebpf" else [])
k = subprocess.Popen(args, stderr=subprocess.DEVNULL)
time.sleep(6)  # the probes load and a first discovery pass is done
spawned = []
for i in range(runs):
    env = dict(os.environ, KITTY_WATCH="1", RANK=str(i), JOB_NAME="latency")
    t = time.time_ns()
    p = subprocess.Popen(["sleep", "30"], env=env)
    spawned.append((p, t))
    time.sleep(2.7)  # not in step with the 5 s scan
time.sleep(6)
k.send_signal(signal.SIGINT)
k.wait()
out = subprocess.run([bin, "export", rec, "--format", "jsonl"], capture_output=True, text=True).stdout
first = {}
for line in out.splitlines():
    row = json.loads(line)
    if row["kind"] == "rank" and row["pid"] not in first:
        first[row["pid"]] = row["time_ns"]
lat = []
for p, t in spawned:
    p.kill()
    if p.pid in first:
        lat.append((first[p.pid] - t) / 1e6)
print(f"{mode:8} new rank seen after: median {statistics.median(lat):6.0f} ms, max {max(lat):6.0f} ms ({len(lat)}/{runs} seen)")
PY
done
