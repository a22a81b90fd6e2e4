#!/usr/bin/env bash
# kitty against the anchor, side by side in one run: an 8-rank ring job,
# `scripts/anchor-sampler.py` (stdlib Python, seed 003's field set) and
# `kitty-tui record` on the same 8 processes at the same interval, for
# DURATION seconds (default 60). Prints each one's CPU per sample (steady
# state: from 5 s to the end) and the ratio, plus the recording's size.
#   scripts/anchor-compare.sh [DURATION] [record options, e.g. --no-ebpf]
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${1:-60}
cargo build -q --release -p kitty-tui
BIN=target/release/kitty-tui
source scripts/ring-job.sh
start_ring $BIN anchor
DIR=$(mktemp -d)
trap 'stop_ring; rm -rf "$DIR"' EXIT
python3 scripts/anchor-sampler.py --pids "$(IFS=,; echo "${RING_PIDS[*]}")" --interval 0.5 \
  --out "$DIR/anchor.jsonl" --duration "$DURATION" &
PY=$!
$BIN record -o "$DIR/kitty.kitty" --interval 500ms --duration "${DURATION}s" "${@:2}" 2>/dev/null &
REC=$!
cpu() { awk '{print $14+$15}' "/proc/$1/stat"; }
sleep 5
P0=$(cpu $PY); K0=$(cpu $REC)
sleep "$((DURATION - 6))"
P1=$(cpu $PY); K1=$(cpu $REC)
wait $PY $REC || true
HZ=$(getconf CLK_TCK)
SAMPLES=$(( (DURATION - 6) * 2 ))
SIZE=$(stat -c %s "$DIR/kitty.kitty")
python3 - "$P0" "$P1" "$K0" "$K1" "$HZ" "$SAMPLES" "$SIZE" "$DURATION" <<'PY'
import sys
p0, p1, k0, k1, hz, n, size, dur = (float(x) for x in sys.argv[1:])
py = (p1 - p0) / hz / n * 1e3
kt = (k1 - k0) / hz / n * 1e3
print(f"anchor (Python, seed 003 fields): {py:.2f} ms CPU per sample ({py / 5:.2f} % of a core at 500 ms)")
print(f"kitty-tui record:                 {kt:.2f} ms CPU per sample ({kt / 5:.2f} % of a core at 500 ms)")
print(f"ratio: kitty is {py / kt:.1f}x cheaper per sample" if kt > 0 else "kitty: below the clock tick")
print(f"recording: {size / 1024 / (dur / 60):.0f} KB per minute for 8 ranks at 500 ms")
PY
