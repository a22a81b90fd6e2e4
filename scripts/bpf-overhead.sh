#!/bin/sh
# Per-event cost of kitty's BPF programs under a bulk TCP load, measured by
# the kernel itself (kernel.bpf_stats_enabled: run_time_ns / run_cnt per
# program), next to the same measure for the equivalent bpftrace one-liners.
# Root; needs iperf3, bpftool and bpftrace. Usage: scripts/bpf-overhead.sh [SECONDS]
set -eu
secs=${1:-10}
cd "$(dirname "$0")/.."
cargo build -q --release -p kitty-tui
bin=target/release/kitty-tui
out=$(mktemp -d)
mountpoint -q /sys/kernel/tracing || mount -t tracefs tracefs /sys/kernel/tracing
sysctl -q kernel.bpf_stats_enabled=1
cleanup() { sysctl -q kernel.bpf_stats_enabled=0; pkill -f "iperf3 -s -p 5299" 2>/dev/null || true; rm -rf "$out"; }
trap cleanup EXIT
iperf3 -s -p 5299 >/dev/null 2>&1 &
server=$!
sleep 0.5

ids() { bpftool prog show --json | python3 -c 'import json,sys; print(" ".join(str(p["id"]) for p in json.load(sys.stdin)))'; }

# Runs the load while the programs loaded since $BEFORE (program ids) are
# attached, and prints each one's ns/event. $1: label.
measure() {
    sleep 3   # attach
    iperf3 -c 127.0.0.1 -p 5299 -t "$secs" -P 2 >/dev/null
    bpftool prog show --json | LABEL="$1" python3 -c '
import json, os, sys
label, before = os.environ["LABEL"], set(os.environ["BEFORE"].split())
for p in json.load(sys.stdin):
    if str(p["id"]) in before:
        continue
    cnt, ns = p.get("run_cnt", 0), p.get("run_time_ns", 0)
    name = p.get("name", "?")
    if cnt:
        print(f"{label:9} {name:22} {cnt:>11} events {ns / cnt:8.0f} ns/event")
    else:
        print(f"{label:9} {name:22} {0:>11} events        -")
'
}

echo "kernel $(uname -r), $(nproc) CPUs, iperf3 -P 2 over loopback for ${secs}s"
# The iperf3 server is the watched process, so the run-queue probe times it.
export BEFORE="$(ids)"
"$bin" record --pid "$server" -o "$out/k.kitty" --duration $((secs + 8))s >/dev/null 2>&1 &
measure kitty
wait $! || true

export BEFORE="$(ids)"
bpftrace -e 'tracepoint:tcp:tcp_probe { @rtt[args->sport, args->dport] = hist(args->srtt); }' >/dev/null 2>&1 &
measure bpftrace
kill -INT $! 2>/dev/null; wait $! 2>/dev/null || true

export BEFORE="$(ids)"
bpftrace -e 'tracepoint:sched:sched_wakeup,tracepoint:sched:sched_wakeup_new { @q[args->pid] = nsecs; }
tracepoint:sched:sched_switch { if (args->prev_state == 0) { @q[args->prev_pid] = nsecs; }
  $t = @q[args->next_pid]; if ($t) { @us[args->next_comm] = hist((nsecs - $t) / 1000); delete(@q[args->next_pid]); } }' >/dev/null 2>&1 &
measure bpftrace
kill -INT $! 2>/dev/null; wait $! 2>/dev/null || true

export BEFORE="$(ids)"
bpftrace -e 'tracepoint:sock:sock_send_length { @tx[pid, args->sk] = sum(args->ret); }
tracepoint:sock:sock_recv_length { @rx[pid, args->sk] = sum(args->ret); }' >/dev/null 2>&1 &
measure bpftrace
kill -INT $! 2>/dev/null; wait $! 2>/dev/null || true
