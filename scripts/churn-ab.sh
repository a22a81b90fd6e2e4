#!/bin/sh
# Per-event cost of the programs that count node-wide churn (`flow_state`,
# which counts closed connections, and the events probe's `ev_exec`,
# `ev_fork`, `ev_exit`) for two or more builds taking turns under one load:
# two processes each opening and closing 4,000 loopback TCP connections and
# two shells each running /bin/true 600 times, while the build records.
# Measured by the kernel (kernel.bpf_stats_enabled: run_time_ns / run_cnt).
# Root; needs python3 and bpftool. Usage: scripts/churn-ab.sh ROUNDS BIN...
# e.g. scripts/churn-ab.sh 3 /tmp/kitty-before target/release/kitty-tui
set -eu
rounds=$1
shift
sysctl -q kernel.bpf_stats_enabled=1
out=$(mktemp -d)
trap 'sysctl -q kernel.bpf_stats_enabled=0; rm -rf "$out"' EXIT
ids() { bpftool prog show --json | python3 -c 'import json,sys; print(" ".join(str(p["id"]) for p in json.load(sys.stdin)))'; }
churn='import socket
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(128); a = l.getsockname()
for _ in range(4000):
    c = socket.create_connection(a); s, _ = l.accept(); c.close(); s.close()'
for _ in $(seq "$rounds"); do
    for bin in "$@"; do
        export BEFORE="$(ids)"
        "$bin" record -o "$out/churn.kitty" --duration 60s >/dev/null 2>&1 &
        kitty=$!
        sleep 3 # attach
        python3 -c "$churn" & c1=$!
        python3 -c "$churn" & c2=$!
        sh -c 'for i in $(seq 600); do /bin/true; done' & e1=$!
        sh -c 'for i in $(seq 600); do /bin/true; done' & e2=$!
        wait $c1 $c2 $e1 $e2
        bpftool prog show --json | LABEL="$bin" python3 -c '
import json, os, sys
label, before = os.environ["LABEL"], set(os.environ["BEFORE"].split())
row = []
for p in json.load(sys.stdin):
    name, cnt, ns = p.get("name", "?"), p.get("run_cnt", 0), p.get("run_time_ns", 0)
    if str(p["id"]) not in before and cnt and name.startswith(("flow_state", "ev_")):
        row.append(f"{name} {ns / cnt:.0f} ns ({cnt})")
print(label + ": " + ", ".join(sorted(row)))
'
        kill -INT $kitty
        wait $kitty || true
    done
done
