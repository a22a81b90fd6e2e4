#!/usr/bin/env bash
# Heap allocations a tick of `record` on the 8-rank ring (500 ms), counted
# by uprobes on mimalloc's entry points (kitty's allocator): a count, not
# a time, so it is the same on a busy VM as on a quiet one. Needs root and
# `perf` with uprobes; BIN needs its symbol table (release builds keep it).
# Each allocation a tick is memory touched again 500 ms later, cold.
#   scripts/alloc-count.sh BIN [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$(realpath "$1") SECS=${2:-20}
source scripts/ring-job.sh
start_ring "$BIN" allocs
DIR=$(mktemp -d)
cleanup() {
  stop_ring
  rm -rf "$DIR"
  perf probe -q -d 'kitty_allocs:*' 2>/dev/null || true
}
trap cleanup EXIT
perf probe -q -d 'kitty_allocs:*' 2>/dev/null || true
for f in mi_malloc_aligned mi_zalloc_aligned mi_realloc_aligned mi_free; do
  perf probe -q -x "$BIN" -a "kitty_allocs:$f=$f" >/dev/null
done
"$BIN" record -o "$DIR/a.kitty" --interval 500ms --duration "$((SECS + 8))s" 2>/dev/null &
P=$!
sleep 6
perf stat -x, -e 'kitty_allocs:*' -p "$P" -- sleep "$SECS" 2>"$DIR/stat" >/dev/null
wait "$P" || true
awk -F, -v ticks="$((SECS * 2))" '
  { n = $1; sub(/.*:/, "", $3); per[$3] = n / ticks }
  END {
    printf "per tick: %.0f allocations (malloc %.0f, zalloc %.0f, realloc %.0f), %.0f frees\n",
      per["mi_malloc_aligned"] + per["mi_zalloc_aligned"] + per["mi_realloc_aligned"],
      per["mi_malloc_aligned"], per["mi_zalloc_aligned"], per["mi_realloc_aligned"], per["mi_free"]
  }' "$DIR/stat"
