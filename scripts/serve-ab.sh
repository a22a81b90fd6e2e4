#!/usr/bin/env bash
# Two builds of kitty-tui serving one 8-rank ring job (500 ms) in turns,
# ROUNDS times, each scraped once every 15 s as Prometheus would: each
# one's whole-process CPU per sample over DURATION seconds (steady state,
# from 5 s in; schedstat of all its threads). The last scrape of each is
# left in $TMPDIR/serve-ab-{old,new}.txt to compare.
#   scripts/serve-ab.sh OLD_BIN NEW_BIN [ROUNDS] [DURATION]
set -euo pipefail
cd "$(dirname "$0")/.."
OLD=$1 NEW=$2
ROUNDS=${3:-2} DURATION=${4:-30}
PORT=19977
source scripts/ring-job.sh
start_ring "$NEW" serve-ab
trap 'stop_ring' EXIT
turn() {
  local name=$1 bin=$2 p a b
  "$bin" serve --listen "127.0.0.1:$PORT" >/dev/null 2>&1 &
  p=$!
  sleep 5
  a=$(cpu_ns $p)
  for _ in $(seq $((DURATION / 15))); do
    sleep 15
    curl -sf "127.0.0.1:$PORT/metrics" > "${TMPDIR:-/tmp}/serve-ab-$name.txt"
  done
  b=$(cpu_ns $p)
  kill -INT $p
  wait $p || true
  python3 -c "print('%-4s %.3f ms CPU per sample' % ('$name', ($b - $a) / 1e6 / ($DURATION * 2)))"
}
for r in $(seq "$ROUNDS"); do
  echo "round $r"
  turn old "$OLD"
  turn new "$NEW"
done
