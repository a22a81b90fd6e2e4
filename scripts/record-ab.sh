#!/usr/bin/env bash
# Two builds of kitty-tui taking turns at `record` on one 8-rank ring job
# (500 ms): each one's steady-state CPU per sample, summed over its threads'
# schedstat (nanoseconds, not clock ticks), ROUNDS times each, then the
# means. This VM's runs drift by ~5 % over minutes: turns on one job are
# how a change smaller than that is told from the drift.
#   scripts/record-ab.sh OLD_BIN NEW_BIN [ROUNDS] [DURATION] [record options]
# e.g. build the old version into a copy: git stash; cargo build --release
# -p kitty-tui; cp target/release/kitty-tui /tmp/kt-old; git stash pop.
set -euo pipefail
cd "$(dirname "$0")/.."
OLD=$1 NEW=$2
ROUNDS=${3:-5} DURATION=${4:-40}
(( DURATION >= 10 )) || { echo "DURATION: at least 10 s" >&2; exit 2; }
source scripts/ring-job.sh
start_ring "$NEW" ab
DIR=$(mktemp -d)
trap 'stop_ring; rm -rf "$DIR"' EXIT
# CPU time of a live process's main thread (where
# `record` encodes and writes frames: the recorder's share on its own).
main_ns() { awk '{print $1}' /proc/"$1"/task/"$1"/schedstat 2>/dev/null; }
declare -A SUM=([old]=0 [new]=0) MAIN=([old]=0 [new]=0)
for i in $(seq "$ROUNDS"); do
  for which in old new; do
    bin=$OLD; [[ $which == new ]] && bin=$NEW
    "$bin" record -o "$DIR/$which.kitty" --interval 500ms --duration "${DURATION}s" "${@:5}" 2>/dev/null &
    rec=$!
    # Steady state: from 5 s (the probes loaded) to 1 s before the end.
    sleep 5; t0=$(cpu_ns $rec); m0=$(main_ns $rec)
    sleep $((DURATION - 6)); t1=$(cpu_ns $rec); m1=$(main_ns $rec)
    wait $rec || true
    ms=$(python3 -c "print(f'{($t1 - $t0) / 1e6 / (($DURATION - 6) * 2):.3f}')")
    mm=$(python3 -c "print(f'{($m1 - $m0) / 1e6 / (($DURATION - 6) * 2):.3f}')")
    SUM[$which]=$(python3 -c "print(${SUM[$which]} + $ms)")
    MAIN[$which]=$(python3 -c "print(${MAIN[$which]} + $mm)")
    echo "round $i $which: $ms ms CPU per sample ($mm the recorder's thread)"
  done
done
python3 -c "
old, new = ${SUM[old]} / $ROUNDS, ${SUM[new]} / $ROUNDS
mo, mn = ${MAIN[old]} / $ROUNDS, ${MAIN[new]} / $ROUNDS
print(f'means: old {old:.3f} ms, new {new:.3f} ms per sample ({(new - old) / old * 100:+.1f} %)')
print(f'the recorder thread: old {mo:.3f} ms, new {mn:.3f} ms ({(mn - mo) / mo * 100:+.1f} %)')"
