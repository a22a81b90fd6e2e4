#!/bin/sh
# Soak of `kitty-tui serve`: a bounded request rate on 127.0.0.1 for a long
# while (default 20 minutes at 20 requests/s: /metrics in both formats,
# /healthz, /api/snapshot), with a small ring job watched; prints the
# server's RSS over time. Memory must stay bounded.
#   scripts/serve-soak.sh [MINUTES] [REQUESTS_PER_S]
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
minutes=${1:-20}
rate=${2:-20}
cd "$root"
cargo build -q --release -p kitty-tui
bin=$root/target/release/kitty-tui
python3 - "$bin" "$minutes" "$rate" <<'PY'
import os, socket, subprocess, sys, time, urllib.request
bin, minutes, rate = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p
ports = [free_port() for _ in range(3)]
ring = [subprocess.Popen([bin, "demo-rank", "--rank", str(r), "--world", "3", "--ports",
        ",".join(map(str, ports))], env=dict(os.environ, KITTY_WATCH="1", RANK=str(r),
        JOB_NAME="soak"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for r in range(3)]
port = free_port()
srv = subprocess.Popen([bin, "serve", "--listen", f"127.0.0.1:{port}"], stderr=subprocess.DEVNULL)
def rss():
    for l in open(f"/proc/{srv.pid}/status"):
        if l.startswith("VmRSS:"):
            return int(l.split()[1]) / 1024
paths = [("/metrics", {}), ("/metrics", {"Accept": "application/openmetrics-text"}),
         ("/healthz", {}), ("/api/snapshot", {})]
for _ in range(100):
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read(); break
    except Exception:
        time.sleep(0.2)
start = time.time(); n = 0; errors = 0; next_report = start
print(f"{'minute':>6} {'requests':>9} {'errors':>6} {'RSS MB':>7}")
while time.time() - start < minutes * 60:
    if time.time() >= next_report:
        print(f"{(time.time()-start)/60:6.1f} {n:9d} {errors:6d} {rss():7.1f}", flush=True)
        next_report += 60
    path, headers = paths[n % len(paths)]
    try:
        req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers=headers)
        urllib.request.urlopen(req, timeout=5).read()
    except Exception:
        errors += 1
    n += 1
    time.sleep(max(0.0, start + n / rate - time.time()))
print(f"{(time.time()-start)/60:6.1f} {n:9d} {errors:6d} {rss():7.1f}")
srv.terminate(); srv.wait()
for r in ring: r.kill()
PY
