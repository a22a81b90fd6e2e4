#!/bin/sh
# Peak RSS of `kitty-tui export` on synthetic one-hour and one-day
# recordings (8 ranks at 500 ms): export streams one frame at a time, so
# its memory should not grow with the recording's length.
#   scripts/export-rss.sh [DIR]   (default: a temporary directory; ~3 GB for the day)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$(mktemp -d)}
mkdir -p "$dir"
cd "$root"
cargo build -q --release -p kitty-tui -p kitty-core --example synth_recording
bin=$root/target/release/kitty-tui
gen=$root/target/release/examples/synth_recording
for hours in 1 24; do
    f="$dir/synth-${hours}h.kitty"
    [ -f "$f" ] || "$gen" "$f" "$hours" 8 2>/dev/null
    for fmt in "jsonl" "csv --table ranks"; do
        # shellcheck disable=SC2086
        python3 - "$bin" "$f" $fmt <<'PY'
import resource, subprocess, sys, os, time
cmd = [sys.argv[1], "export", sys.argv[2], "--format"] + sys.argv[3:]
t = time.time()
subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True)
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
size = os.path.getsize(sys.argv[2])
print(f"{os.path.basename(sys.argv[2]):<16} {size/1e6:8.0f} MB  export {' '.join(a for a in sys.argv[3:] if a != '--table'):<12} peak RSS {rss/1024:6.1f} MB  {time.time()-t:6.1f} s")
PY
    done
done
