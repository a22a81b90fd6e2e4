#!/bin/sh
# The fault matrix (issue 13), as root: from a healthy baseline, each fault
# in turn on one rank of a 4-rank ring job (CPU co-location, CFS quota, an
# unpinned rank, 50 ms delay, 5 % loss, 8 Mbit/s throttle, a GPU throttle
# through the NVML stub) and its removal; then healthy minutes on the pinned
# job. Prints a Markdown table: what kitty flagged, time to flag, time to
# clear, consequences shown, false stragglers; exits 1 if any fault was
# missed or not cleared, or anything was flagged while healthy.
#
#   sudo scripts/fault-matrix.sh [--healthy SECONDS] [--hold SECONDS]
#
# Defaults: 300 s healthy, 10 s per fault and per removal (~8 minutes).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
if [ "$(id -u)" != 0 ]; then
    echo "fault-matrix: needs root (network namespaces, TAP devices, BPF, cgroups)" >&2
    exit 2
fi
cargo build --release -q -p kitty-tui --bin kitty-tui --example fault_matrix
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
${CC:-cc} -shared -fPIC -O1 -o "$tmp/libnvidia-ml.so.1" tests/stub-nvml/nvml_stub.c
target/release/examples/fault_matrix target/release/kitty-tui "$tmp/libnvidia-ml.so.1" "$@"
