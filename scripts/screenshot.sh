#!/bin/sh
# The README's screenshot of the main view, from a real terminal: the demo
# (as root, so the eBPF probes are on) in a 160x45 tmux pane, captured with
# its colours after 15 s, as text (assets/main-view-straggler.txt) and as a
# PNG (assets/main-view-straggler.png, by scripts/ansi-to-png.py; needs
# /usr/bin/python3 with PIL and the DejaVu fonts).
set -eu
cd "$(dirname "$0")/.."
cargo build -q --release -p kitty-tui
s=kitty-shot-$$
tmux new-session -d -s "$s" -x 160 -y 45
tmux respawn-pane -k -t "$s" "env TERM=xterm-256color target/release/kitty-tui demo"
sleep "${KITTY_SHOT_AFTER:-15}"
tmux capture-pane -p -t "$s" | sed 's/[[:space:]]*$//' > assets/main-view-straggler.txt
tmux capture-pane -e -p -t "$s" > "/tmp/$s.ansi"
tmux send-keys -t "$s" q
sleep 1
tmux kill-session -t "$s" 2>/dev/null || true
/usr/bin/python3 scripts/ansi-to-png.py "/tmp/$s.ansi" assets/main-view-straggler.png
rm -f "/tmp/$s.ansi"
echo "assets/main-view-straggler.txt and .png"
