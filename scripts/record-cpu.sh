#!/usr/bin/env bash
# Whole-process CPU of `kitty-tui record` at 500 ms over DURATION seconds
# (default 60) while an 8-rank ring job runs. Prints percent of one core.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${1:-60}
cargo build -q --release -p kitty-tui
BIN=target/release/kitty-tui
PORTS=$(python3 -c 'import socket
s=[socket.socket() for _ in range(8)]
[x.bind(("127.0.0.1",0)) for x in s]
print(",".join(str(x.getsockname()[1]) for x in s))')
PIDS=()
for r in $(seq 0 7); do
  KITTY_WATCH=1 RANK=$r JOB_NAME=bench $BIN demo-rank --rank "$r" --world 8 --ports "$PORTS" >/dev/null 2>&1 &
  PIDS+=($!)
done
trap 'kill ${PIDS[*]} 2>/dev/null || true' EXIT
sleep 1
OUT=$(mktemp -d)/bench.kitty
$BIN record -o "$OUT" --duration "${DURATION}s" 2>/dev/null &
REC=$!
sleep "$((DURATION - 1))"
TICKS=$(awk '{print $14+$15}' /proc/$REC/stat)
HZ=$(getconf CLK_TCK)
wait $REC
python3 -c "print(f'record: {${TICKS}/${HZ}/(${DURATION}-1)*100:.2f}% of one core over ${DURATION}s, 8 ranks')"
ls -l "$OUT" | awk '{print "file size:", $5, "bytes"}'
