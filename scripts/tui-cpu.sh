#!/usr/bin/env bash
# Whole-process CPU of the live TUI (sampler + UI) watching the 8-rank demo
# job at 500 ms for DURATION seconds (default 60), in a 160x45 tmux pane.
# The ranks are separate processes and not counted. Prints percent of one core.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${1:-60}
cargo build -q --release -p kitty-tui
BIN=$PWD/target/release/kitty-tui
S=kitty-tui-cpu-$$
tmux new-session -d -s "$S" -x 160 -y 45 "$BIN demo --ranks 8 --straggler none"
trap 'tmux kill-session -t "$S" 2>/dev/null || true' EXIT
sleep 2
PID=$(tmux display -p -t "$S" '#{pane_pid}')
T0=$(awk '{print $14+$15}' /proc/$PID/stat)
sleep "$DURATION"
T1=$(awk '{print $14+$15}' /proc/$PID/stat)
HZ=$(getconf CLK_TCK)
python3 -c "print(f'TUI: {($T1-$T0)/$HZ/$DURATION*100:.2f}% of one core over ${DURATION}s, 8 ranks, 160x45')"
