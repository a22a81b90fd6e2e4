#!/usr/bin/env bash
# Two builds of kitty-tui recording one 8-rank ring job (500 ms) at the
# same time, ROUNDS times: each one's CPU per sample over the same DURATION
# seconds (steady state, from 5 s in; schedstat of all its threads) and
# the ratio. Unlike scripts/record-ab.sh (turns, one at a time), both see
# the same stretch of this VM's drift; they share its two CPUs, so run it
# A/A first to see the spread (here: 0.92-1.07).
#   scripts/record-pair.sh OLD_BIN NEW_BIN [ROUNDS] [DURATION]
set -euo pipefail
cd "$(dirname "$0")/.."
A=$1 B=$2
ROUNDS=${3:-4} DURATION=${4:-30}
PORTS=$(python3 -c 'import socket
s=[socket.socket() for _ in range(8)]
[x.bind(("127.0.0.1",0)) for x in s]
print(",".join(str(x.getsockname()[1]) for x in s))')
PIDS=()
for r in $(seq 0 7); do
  KITTY_WATCH=1 RANK=$r JOB_NAME=pair "$B" demo-rank --rank "$r" --world 8 --ports "$PORTS" >/dev/null 2>&1 &
  PIDS+=($!)
done
DIR=$(mktemp -d)
trap 'kill ${PIDS[*]} 2>/dev/null || true; rm -rf "$DIR"' EXIT
sleep 1
ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {print s}'; }
for r in $(seq "$ROUNDS"); do
  "$A" record -o "$DIR/a.kitty" --interval 500ms --duration "$((DURATION + 8))s" 2>/dev/null &
  PA=$!
  "$B" record -o "$DIR/b.kitty" --interval 500ms --duration "$((DURATION + 8))s" 2>/dev/null &
  PB=$!
  sleep 5
  A0=$(ns $PA) B0=$(ns $PB)
  sleep "$DURATION"
  A1=$(ns $PA) B1=$(ns $PB)
  wait $PA $PB || true
  python3 -c "
a = ($A1 - $A0) / 1e6 / ($DURATION * 2); b = ($B1 - $B0) / 1e6 / ($DURATION * 2)
print(f'round $r: old {a:.3f} ms, new {b:.3f} ms CPU per sample (new/old {b / a:.3f})')"
done
