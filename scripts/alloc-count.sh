#!/usr/bin/env bash
# Heap allocations a tick of `record` on the 8-rank ring (500 ms), counted
# by uprobes on mimalloc's entry points (kitty's allocator): a count, not
# a time, so it is the same on a busy VM as on a quiet one. Needs root and
# `perf` with uprobes; BIN needs its symbol table (release builds keep it).
# Each allocation a tick is memory touched again 500 ms later, cold.
# SITES=1 also says where they are made: each allocation's stack unwound
# by DWARF (the uprobe fires before the allocator's frame exists, so frame
# pointers name the caller's caller), the first of kitty's own functions
# above the allocator and std, inlined ones included; BIN then needs line
# tables (`cargo build --profile profiling`).
#   scripts/alloc-count.sh BIN [SECONDS]
#   SITES=1 scripts/alloc-count.sh target/profiling/kitty-tui [SECONDS]
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
if [ -n "${SITES:-}" ]; then
  perf record -q -e 'kitty_allocs:mi_malloc_aligned,kitty_allocs:mi_zalloc_aligned,kitty_allocs:mi_realloc_aligned' \
    --call-graph dwarf,16384 -o "$DIR/perf.data" -p "$P" -- sleep "$SECS" 2>/dev/null
  wait "$P" || true
  perf script -i "$DIR/perf.data" -F ip,sym --inline 2>/dev/null | python3 -c '
import collections, sys
ticks = int(sys.argv[1]) * 2
# Frames that are the allocator, the standard library or a container,
# not the code that asked for memory.
skip = ("mi_", "_mi", "<mimalloc", "__rustc::", "alloc::", "<alloc", "core::", "<core", "std::",
        "<std", "hashbrown", "<hashbrown", "serde", "<serde", "<&mut serde", "itoa",
        "<T as alloc", "<[", "<str", "<u8 as", "<&str", "<&std")
stacks, cur = [], []
for line in sys.stdin:
    line = line.strip()
    if not line:
        stacks.append(cur); cur = []
        continue
    cur.append(line.split(None, 1)[-1])
stacks.append(cur)
stacks = [s for s in stacks if s]
sites = collections.Counter()
for s in stacks:
    own = [f for f in s[1:] if not f.startswith(skip)]
    sites[" <- ".join(f.removesuffix(" (inlined)")[:90] for f in own[:2])] += 1
print(f"{len(stacks) / ticks:.0f} allocations a tick unwound (some stacks do not unwind: the count without SITES is exact); where, a tick:")
for site, n in sites.most_common(30):
    print(f"  {n / ticks:6.1f}  {site}")
' "$SECS"
  exit 0
fi
perf stat -x, -e 'kitty_allocs:*' -p "$P" -- sleep "$SECS" 2>"$DIR/stat" >/dev/null
wait "$P" || true
awk -F, -v ticks="$((SECS * 2))" '
  { n = $1; sub(/.*:/, "", $3); per[$3] = n / ticks }
  END {
    printf "per tick: %.0f allocations (malloc %.0f, zalloc %.0f, realloc %.0f), %.0f frees\n",
      per["mi_malloc_aligned"] + per["mi_zalloc_aligned"] + per["mi_realloc_aligned"],
      per["mi_malloc_aligned"], per["mi_zalloc_aligned"], per["mi_realloc_aligned"], per["mi_free"]
  }' "$DIR/stat"
