#!/bin/sh
# Per-event cost of kitty's scheduler, flow and RTT programs for two or more
# builds taking turns under one load (iperf3, 2 streams over loopback, the
# iperf3 server watched: the load of scripts/bpf-overhead.sh), measured by
# the kernel (kernel.bpf_stats_enabled: run_time_ns / run_cnt). Root; needs
# iperf3 and bpftool. Usage: scripts/bpf-ab.sh SECONDS ROUNDS BIN...
# e.g. scripts/bpf-ab.sh 8 3 /tmp/kitty-before target/release/kitty-tui
set -eu
secs=$1
rounds=$2
shift 2
mountpoint -q /sys/kernel/tracing || mount -t tracefs tracefs /sys/kernel/tracing
sysctl -q kernel.bpf_stats_enabled=1
iperf3 -s -p 5299 >/dev/null 2>&1 &
server=$!
trap 'sysctl -q kernel.bpf_stats_enabled=0; kill $server 2>/dev/null || true' EXIT
sleep 0.5
ids() { bpftool prog show --json | python3 -c 'import json,sys; print(" ".join(str(p["id"]) for p in json.load(sys.stdin)))'; }
out=$(mktemp -d)
for _ in $(seq "$rounds"); do
    for bin in "$@"; do
        export BEFORE="$(ids)"
        "$bin" record --pid "$server" -o "$out/ab.kitty" --duration $((secs + 6))s >/dev/null 2>&1 &
        kitty=$!
        sleep 3 # attach
        iperf3 -c 127.0.0.1 -p 5299 -t "$secs" -P 2 >/dev/null
        bpftool prog show --json | LABEL="$bin" python3 -c '
import json, os, sys
label, before = os.environ["LABEL"], set(os.environ["BEFORE"].split())
row = []
for p in json.load(sys.stdin):
    name, cnt, ns = p.get("name", "?"), p.get("run_cnt", 0), p.get("run_time_ns", 0)
    if str(p["id"]) not in before and cnt and name.startswith(("runq", "flow", "tp_tcp")):
        row.append(f"{name} {ns / cnt:.0f} ns ({cnt // 1000}k)")
print(label + ": " + ", ".join(row))
'
        wait $kitty || true
    done
done
rm -rf "$out"
