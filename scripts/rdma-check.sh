#!/usr/bin/env bash
# The real-hardware check of the RDMA and NCCL sources (issue 15), for a
# node with an InfiniBand / RoCE / EFA device: what the kernel shows
# (ibv_devinfo, the sysfs counters), what kitty reads (doctor, a snapshot),
# and which ports each watched rank maps to (its uverbs fds, NCCL_IB_HCA).
# Run it as root while a job runs (or not: the ports alone are checked).
# Output goes to ${OUT:-/tmp}/rdma-check.txt as well.
# Usage: scripts/rdma-check.sh [--sys-root DIR] [--proc-root DIR]
set -uo pipefail
cd "$(dirname "$0")/.."
OUTDIR=${OUT:-/tmp}
LOG=$OUTDIR/rdma-check.txt
exec > >(tee "$LOG") 2>&1
SYS=/sys
for ((i = 1; i <= $#; i++)); do
  [ "${!i}" = "--sys-root" ] && { j=$((i + 1)); SYS=${!j}; }
done
echo "== kernel $(uname -r), $(date -u +%FT%TZ)"
command -v ibv_devinfo >/dev/null && ibv_devinfo -l
command -v rdma >/dev/null && { rdma link show; rdma resource show qp 2>/dev/null | head -20; }
echo "== sysfs ($SYS/class/infiniband)"
for p in "$SYS"/class/infiniband/*/ports/*; do
  [ -d "$p" ] || continue
  echo "-- $p: $(cat "$p/state" 2>/dev/null) / $(cat "$p/phys_state" 2>/dev/null) / $(cat "$p/rate" 2>/dev/null) / $(cat "$p/link_layer" 2>/dev/null)"
  for c in "$p"/counters/* "$p"/hw_counters/*; do
    [ -f "$c" ] && printf '   %s %s\n' "${c#"$p"/}" "$(cat "$c" 2>/dev/null)"
  done
done
for u in "$SYS"/class/infiniband_verbs/uverbs*; do
  [ -f "$u/ibdev" ] && echo "-- ${u##*/} -> $(cat "$u/ibdev")"
done
cargo build -q --release -p kitty-tui || exit 1
BIN=target/release/kitty-tui
echo "== doctor"; $BIN doctor --json "$@"
echo "== snapshot (10 s: two counter readings and the verdicts' persistence)"
$BIN snapshot --json --duration 10s "$@" > "$OUTDIR/rdma-snapshot.json"
python3 - "$OUTDIR/rdma-snapshot.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print("sources:", {k: v.get("status") for k, v in d["sources"].items() if k in ("rdma", "nccl.inspector", "nccl.ras")})
for n in d.get("nics", []):
    s = n["signals"]
    print(f'{n["device"]}/{n["port"]} {n.get("state")} {n.get("link_layer")} ranks={n.get("pids", [])} '
          f'xmit_wait/s={s.get("rdma_xmit_wait_per_s")} cnp/s={s.get("rdma_cnp_per_s")} '
          f'pause/s={s.get("rdma_pause_per_s")} tx={s.get("rdma_tx_bytes_per_s")} problem={n.get("problem")}')
for r in d["ranks"]:
    print(f'rank {r["rank"]} pid {r["pid"]} ports={r.get("nics", [])} late_ms={r["signals"].get("nccl_late_ms")} '
          f'collectives={len(r.get("collectives", []))}')
for v in d["verdicts"]:
    print("verdict:", v["message"])
PY
echo "== done"
