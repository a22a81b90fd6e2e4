#!/usr/bin/env bash
# Whole-process CPU of `kitty-tui record` at 500 ms over DURATION seconds
# (default 60) while an 8-rank ring job runs. Prints percent of one core.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${1:-60}
cargo build -q --release -p kitty-tui
BIN=target/release/kitty-tui
source scripts/ring-job.sh
start_ring $BIN bench
trap stop_ring EXIT
OUT=$(mktemp -d)/bench.kitty
# Extra arguments go to `record` (e.g. --no-ebpf). Steady state: the CPU
# between 5 s and DURATION-1 s, after loading the BPF programs (~0.25 s of
# CPU once, for BTF parsing and verification) is done.
$BIN record -o "$OUT" --duration "${DURATION}s" "${@:2}" 2>/dev/null &
REC=$!
sleep 5
T0=$(awk '{print $14+$15}' /proc/$REC/stat)
sleep "$((DURATION - 6))"
T1=$(awk '{print $14+$15}' /proc/$REC/stat)
HZ=$(getconf CLK_TCK)
wait $REC
python3 -c "print(f'record ${*:2}: {(${T1}-${T0})/${HZ}/(${DURATION}-6)*100:.2f}% of one core (steady state, {${T0}/${HZ}:.2f} s CPU in the first 5 s), 8 ranks')"
ls -l "$OUT" | awk '{print "file size:", $5, "bytes"}'
