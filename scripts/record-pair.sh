#!/usr/bin/env bash
# Two builds of kitty-tui recording one 8-rank ring job (500 ms) at the
# same time, ROUNDS times: each one's CPU per sample over the same DURATION
# seconds (steady state, from 5 s in; schedstat of all its threads) and
# the ratio. Unlike scripts/record-ab.sh (turns, one at a time), both see
# the same stretch of this VM's drift; they share its two CPUs, so run it
# A/A first to see the spread (here: 0.92-1.07).
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
  A0=$(cpu_ns $PA) B0=$(cpu_ns $PB)
  sleep "$DURATION"
  A1=$(cpu_ns $PA) B1=$(cpu_ns $PB)
  wait $PA $PB || true
  python3 -c "
a = ($A1 - $A0) / 1e6 / ($DURATION * 2); b = ($B1 - $B0) / 1e6 / ($DURATION * 2)
print(f'round $r: old {a:.3f} ms, new {b:.3f} ms CPU per sample (new/old {b / a:.3f})')"
done
