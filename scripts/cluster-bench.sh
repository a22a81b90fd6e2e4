#!/bin/sh
# One cluster-view refresh against a real Prometheus holding 64 nodes x 8
# ranks of kitty series (64 small exporters on loopback, scraped every
# second): queries per refresh and time per refresh. Needs `prometheus`
# on PATH (apt install prometheus).
#
#   scripts/cluster-bench.sh
set -eu
cd "$(dirname "$0")/.."
cargo run -q --release -p kitty-tui --example cluster_bench
