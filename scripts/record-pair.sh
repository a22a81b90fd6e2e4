#!/usr/bin/env bash
# Two builds of kitty-tui recording one 8-rank ring job (500 ms) at the
# same time, ROUNDS times: each one's CPU per sample over the same DURATION
# seconds (steady state, from 5 s in; schedstat of all its threads) and
# the ratio. Unlike scripts/record-ab.sh (turns, one at a time), both see
# the same stretch of this VM's drift; they share its two CPUs, so run it
# A/A first to see the spread (here: 0.92-1.07). Each build's page faults
# per sample too: memory the allocator gives back and takes again every
# tick costs CPU that a hot benchmark does not show.
# THREADS=N records 8 idle processes of N threads each instead of the ring
# (a GPU node's thread counts: the task iterator's walk is then the cost).
#   scripts/record-pair.sh OLD_BIN NEW_BIN [ROUNDS] [DURATION]
#   THREADS=150 scripts/record-pair.sh OLD_BIN NEW_BIN [ROUNDS] [DURATION]
set -euo pipefail
cd "$(dirname "$0")/.."
A=$1 B=$2
ROUNDS=${3:-4} DURATION=${4:-30}
source scripts/ring-job.sh
if [ -n "${THREADS:-}" ]; then
  start_threads "$THREADS" pair
else
  start_ring "$B" pair
fi
DIR=$(mktemp -d)
trap 'stop_ring; rm -rf "$DIR"' EXIT
for r in $(seq "$ROUNDS"); do
  "$A" record -o "$DIR/a.kitty" --interval 500ms --duration "$((DURATION + 8))s" 2>/dev/null &
  PA=$!
  "$B" record -o "$DIR/b.kitty" --interval 500ms --duration "$((DURATION + 8))s" 2>/dev/null &
  PB=$!
  sleep 5
  A0=$(cpu_ns $PA) B0=$(cpu_ns $PB) FA0=$(minor_faults $PA) FB0=$(minor_faults $PB)
  sleep "$DURATION"
  A1=$(cpu_ns $PA) B1=$(cpu_ns $PB) FA1=$(minor_faults $PA) FB1=$(minor_faults $PB)
  wait $PA $PB || true
  python3 -c "
n = $DURATION * 2
a = ($A1 - $A0) / 1e6 / n; b = ($B1 - $B0) / 1e6 / n
fa = ($FA1 - $FA0) / n; fb = ($FB1 - $FB0) / n
print(f'round $r: old {a:.3f} ms, new {b:.3f} ms CPU per sample (new/old {b / a:.3f}); page faults per sample old {fa:.1f}, new {fb:.1f}')"
done
