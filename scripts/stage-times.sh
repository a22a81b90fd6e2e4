#!/usr/bin/env bash
# What each stage of a `record` tick costs on the 8-rank ring (500 ms), by
# the sampling thread's own CPU clock (kernel time included): the sampler's
# tick, the enrichers (the probes, NVML), the analysis, and the delivery
# (the recorder's encode, zstd and write, and dropping the frame). Mean
# and median over the ticks after the first ten. A count of CPU by stage,
# where a profile gives shares of samples. Needs root for the probes.
# INTERVAL=100ms samples faster (a tick at 100 ms cost what one at 500 ms
# does: 817 against 839 us, median; what a tick done again at once is
# spared is gone within 100 ms).
#   scripts/stage-times.sh BIN [SECONDS] [RECORD_ARGS...]
#   INTERVAL=100ms scripts/stage-times.sh BIN [SECONDS] [RECORD_ARGS...]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$(realpath "$1") SECS=${2:-40} INTERVAL=${INTERVAL:-500ms}
source scripts/ring-job.sh
start_ring "$BIN" stages
DIR=$(mktemp -d)
trap 'stop_ring; rm -rf "$DIR"' EXIT
KITTY_STAGE_TIMES="$DIR/stages" "$BIN" record -o "$DIR/a.kitty" --interval "$INTERVAL" \
  --duration "${SECS}s" "${@:3}" 2>/dev/null
python3 - "$DIR/stages" <<'PY'
import statistics, sys
lines = open(sys.argv[1]).read().split("\n")
names = [n.removesuffix("_ns") for n in lines[0].split()]
ticks = [list(map(int, l.split())) for l in lines[1:] if l][10:]
if not ticks:
    sys.exit("too few ticks: record longer")
print(f"{len(ticks)} ticks; us of the sampling thread's CPU a tick, mean (median)")
for i, n in enumerate(names):
    v = [t[i] / 1000 for t in ticks]
    print(f"  {n:9s} {statistics.mean(v):7.0f} ({statistics.median(v):.0f})")
tot = [sum(t) / 1000 for t in ticks]
print(f"  {'all':9s} {statistics.mean(tot):7.0f} ({statistics.median(tot):.0f})")
PY
