#!/usr/bin/env bash
# The real-GPU check of the NVML source (issue 5), for a machine with an
# NVIDIA GPU and driver: builds kitty, starts a small CUDA load if one is
# available (PyTorch, else gpu-burn, else none), and prints what kitty sees.
# Output goes to ${OUT:-/tmp}/gpu-check.txt as well.
set -uo pipefail
cd "$(dirname "$0")/.."
OUTDIR=${OUT:-/tmp}
LOG=$OUTDIR/gpu-check.txt
exec > >(tee "$LOG") 2>&1
nvidia-smi -L || echo "nvidia-smi not found"
cargo build -q --release -p kitty-tui || exit 1
BIN=target/release/kitty-tui
LOAD=""
if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  KITTY_WATCH=1 RANK=0 JOB_NAME=gpu-check python3 -c '
import torch, time
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
t = time.time()
while time.time() - t < 60:
    b = a @ a
torch.cuda.synchronize()' &
  LOAD=$!
  sleep 5
fi
echo "== doctor"; $BIN doctor --json
echo "== snapshot"; $BIN snapshot --json --duration 5s
[ -n "$LOAD" ] && kill "$LOAD" 2>/dev/null
echo "== done"
