#!/usr/bin/env bash
# The real-GPU check of the NVML source, for a machine with an NVIDIA GPU and
# driver, run as root. It starts a small real job on the GPUs
# (scripts/gpu-load.py: 2 ranks of bf16 matrix products joined by a gloo
# all-reduce, rank 1 doing three times the GPU work), then checks what kitty
# sees against nvidia-smi read at the same time:
#   - doctor: NVML and the eBPF probes on this kernel;
#   - a snapshot: every GPU's signals (utilization, memory, power, clocks,
#     PCIe, GPM on Hopper), each rank mapped to its GPU by pid, its memory and
#     SM share; the values beside nvidia-smi's;
#   - NVML's own cost: each call kitty makes, timed with pynvml, and the CPU
#     of kitty's NVML thread over a recording;
#   - a recording of the job (kept as gpu-check.kitty: replay it anywhere),
#     its GPU rows exported, and the GPU series on /metrics.
# Ends with one PASS / FAIL line per check. Everything goes to
# ${OUT:-/tmp}/gpu-check.txt as well, the JSON and the recording beside it.
#
# Usage: scripts/gpu-check.sh [--bin PATH] [--seconds N] [--ab OLD]
#   --bin      a built kitty-tui (default: cargo build --release, or
#              target/release/kitty-tui where there is no cargo)
#   --seconds  how long the job runs (default 75; the checks need ~50)
#   --ab OLD   also record with another build at the same time, and print
#              both builds' CPU per thread (an A/B on one load)
set -uo pipefail
cd "$(dirname "$0")/.."
OUTDIR=${OUT:-/tmp}
LOG=$OUTDIR/gpu-check.txt
exec > >(tee "$LOG") 2>&1
BIN="" SECONDS_LOAD=75 OLD=""
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) BIN=$2; shift 2 ;;
    --seconds) SECONDS_LOAD=$2; shift 2 ;;
    --ab) OLD=$2; shift 2 ;;
    *) echo "usage: $0 [--bin PATH] [--seconds N] [--ab OLD]"; exit 2 ;;
  esac
done
if [ -z "$BIN" ]; then
  if command -v cargo >/dev/null; then
    cargo build -q --release -p kitty-tui || exit 1
  fi
  BIN=target/release/kitty-tui
fi
[ -x "$BIN" ] || { echo "no kitty-tui at $BIN (build it, or pass --bin)"; exit 1; }
PY=${PYTHON:-python3}

echo "== machine: kernel $(uname -r), $(nproc) CPUs, $(date -u +%FT%TZ), kitty $($BIN --version)"
nvidia-smi -L || { echo "nvidia-smi not found: not a GPU machine"; exit 1; }
QUERY=timestamp,index,name,utilization.gpu,utilization.memory,memory.used,memory.total,power.draw,temperature.gpu,clocks.sm,clocks.max.sm,clocks.mem,pcie.link.gen.current,pcie.link.width.current,clocks_event_reasons.active
nvidia-smi --query-gpu=$QUERY --format=csv

LOAD_PID=""
cleanup() {
  [ -n "$LOAD_PID" ] && pkill -P "$LOAD_PID" 2>/dev/null
  [ -n "$LOAD_PID" ] && kill "$LOAD_PID" 2>/dev/null
  [ -n "${SMI_PID:-}" ] && kill "$SMI_PID" 2>/dev/null
}
trap cleanup EXIT
if $PY -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  echo "== load: 2 ranks, rank 1 slow, ${SECONDS_LOAD} s"
  $PY scripts/gpu-load.py --ranks 2 --slow-rank 1 --seconds "$SECONDS_LOAD" &
  LOAD_PID=$!
  # Wait until both ranks hold a CUDA context (NVML lists them).
  for _ in $(seq 60); do
    n=$(nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null | grep -c .)
    [ "$n" -ge 2 ] && break
    sleep 1
  done
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv
  sleep 3
else
  echo "== load: none (no PyTorch with CUDA here); the GPUs are checked idle"
fi
# nvidia-smi once a second beside kitty, for the comparison.
nvidia-smi --query-gpu=$QUERY --format=csv,noheader,nounits -lms 1000 >"$OUTDIR/nvidia-smi.csv" &
SMI_PID=$!

echo "== NVML call costs (pynvml, median of 10: wall ms, CPU ms)"
$PY - <<'PY' || echo "(pynvml not available)"
import time, statistics
import pynvml as N
N.nvmlInit()
h = N.nvmlDeviceGetHandleByIndex(0)
calls = {
    "utilization": lambda: N.nvmlDeviceGetUtilizationRates(h),
    "memory": lambda: N.nvmlDeviceGetMemoryInfo(h),
    "power": lambda: N.nvmlDeviceGetPowerUsage(h),
    "temperature": lambda: N.nvmlDeviceGetTemperature(h, N.NVML_TEMPERATURE_GPU),
    "clock sm": lambda: N.nvmlDeviceGetClockInfo(h, N.NVML_CLOCK_SM),
    "max clock sm": lambda: N.nvmlDeviceGetMaxClockInfo(h, N.NVML_CLOCK_SM),
    "pcie throughput rx": lambda: N.nvmlDeviceGetPcieThroughput(h, N.NVML_PCIE_UTIL_RX_BYTES),
    "pcie link gen": lambda: N.nvmlDeviceGetCurrPcieLinkGeneration(h),
    "ecc corrected": lambda: N.nvmlDeviceGetTotalEccErrors(h, N.NVML_MEMORY_ERROR_TYPE_CORRECTED, N.NVML_VOLATILE_ECC),
    "energy": lambda: N.nvmlDeviceGetTotalEnergyConsumption(h),
    "retired pages": lambda: N.nvmlDeviceGetRetiredPages(h, N.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS),
    "remapped rows": lambda: N.nvmlDeviceGetRemappedRows(h),
    "throttle reasons": lambda: N.nvmlDeviceGetCurrentClocksThrottleReasons(h),
    "compute processes": lambda: N.nvmlDeviceGetComputeRunningProcesses(h),
    "process utilization": lambda: N.nvmlDeviceGetProcessUtilization(h, 0),
    "nvlink 0 state": lambda: N.nvmlDeviceGetNvLinkState(h, 0),
    "field values 138/139": lambda: N.nvmlDeviceGetFieldValues(h, [138, 139]),
    "field 83 (energy)": lambda: [(v.nvmlReturn, v.value.ullVal) for v in N.nvmlDeviceGetFieldValues(h, [83])],
    "fields 197/198 (PCIe)": lambda: [(v.nvmlReturn, v.value.ullVal) for v in N.nvmlDeviceGetFieldValues(h, [197, 198])],
    "gpm support": lambda: N.nvmlGpmQueryDeviceSupport(h),
    "gpm sample": lambda: N.nvmlGpmSampleGet(h, N.nvmlGpmSampleAlloc()),
    "gpm metrics (6)": lambda: gpm_metrics(),
    "handle by index": lambda: N.nvmlDeviceGetHandleByIndex(0),
}
def gpm_metrics():
    # Two samples 100 ms apart taken once; each call computes the six metrics kitty asks for.
    global gpm_pair
    if gpm_pair is None:
        a = N.nvmlGpmSampleGet(h, N.nvmlGpmSampleAlloc())
        time.sleep(0.1)
        gpm_pair = (a, N.nvmlGpmSampleGet(h, N.nvmlGpmSampleAlloc()))
    m = N.c_nvmlGpmMetricsGet_t()
    m.version = N.NVML_GPM_METRICS_GET_VERSION
    m.numMetrics = 6
    m.sample1, m.sample2 = gpm_pair
    for k, mid in enumerate((2, 3, 5, 10, 20, 21)):
        m.metrics[k].metricId = mid
    N.nvmlGpmMetricsGet(m)
    return [round(m.metrics[k].value, 1) for k in range(6)]
gpm_pair = None
total = 0.0
for name, f in calls.items():
    times, cpu, err, val = [], [], None, None
    for _ in range(10):
        t, c = time.perf_counter(), time.thread_time()
        try:
            val = f()
        except Exception as e:  # NVMLError_NotSupported and the like
            err = type(e).__name__
        times.append((time.perf_counter() - t) * 1000)
        cpu.append((time.thread_time() - c) * 1000)
    med, cmed = statistics.median(times), statistics.median(cpu)
    total += med
    shown = err or str(val)[:60].replace("\n", " ")
    print(f"  {name:22} {med:8.3f} {cmed:8.3f}  {shown}")
print(f"  {'sum (one GPU, one poll)':22} {total:8.3f}")
PY

echo "== doctor"
$BIN doctor --json >"$OUTDIR/gpu-doctor.json"; echo "rc=$?"
cat "$OUTDIR/gpu-doctor.json"

echo "== snapshot (8 s)"
$BIN snapshot --json --duration 8s >"$OUTDIR/gpu-snapshot.json"; echo "rc=$?"

echo "== record (20 s), with the CPU of kitty's threads"
$BIN record -o "$OUTDIR/gpu-check.kitty" --duration 20s --force &
REC=$!
OLD_REC=""
if [ -n "$OLD" ]; then
  "$OLD" record -o "$(mktemp -u)" --duration 20s &
  OLD_REC=$!
fi
sleep 4
# Each thread's CPU time in ns (schedstat's first field: finer than stat's ticks).
threads() { for t in /proc/$1/task/*; do echo "$(cat "$t/comm") $(cut -d' ' -f1 "$t/schedstat")"; done; }
TMP=$(mktemp -d)
threads $REC >"$TMP/a"
[ -n "$OLD_REC" ] && threads $OLD_REC >"$TMP/old-a"
sleep 12
threads $REC >"$TMP/b"
[ -n "$OLD_REC" ] && threads $OLD_REC >"$TMP/old-b"
wait $REC; echo "record rc=$?"
[ -n "$OLD_REC" ] && wait $OLD_REC
for pair in "$TMP/a $TMP/b $BIN" "$TMP/old-a $TMP/old-b $OLD"; do
  set -- $pair
  [ -f "$1" ] || continue
  echo "-- $3"
$PY - "$1" "$2" <<'PY'
import sys, collections
def read(p):
    d = collections.Counter()
    for line in open(p):
        name, ns = line.rsplit(None, 1)
        d[name] += int(ns)
    return d
a, b = read(sys.argv[1]), read(sys.argv[2])
for name in sorted(b):
    print(f"  {name:18} {(b[name] - a.get(name, 0)) / 1e6 / 12:7.2f} ms CPU a second")
print(f"  {'all of record':18} {(sum(b.values()) - sum(a.values())) / 1e6 / 12:7.2f} ms CPU a second")
PY
done
ls -l "$OUTDIR/gpu-check.kitty"
$BIN export "$OUTDIR/gpu-check.kitty" --format csv --table gpus -o "$OUTDIR/gpu-rows.csv"; echo "export rc=$?"
head -3 "$OUTDIR/gpu-rows.csv"

echo "== serve: the GPU series on /metrics"
$BIN serve --listen 127.0.0.1:19977 &
SRV=$!
sleep 4
$PY -c 'import urllib.request; print(urllib.request.urlopen("http://127.0.0.1:19977/metrics").read().decode())' \
  >"$OUTDIR/gpu-metrics.txt"
kill -INT $SRV; wait $SRV
grep -E '^kitty_(gpu|rank_gpu)' "$OUTDIR/gpu-metrics.txt" | head -30

kill "$SMI_PID" 2>/dev/null; SMI_PID=""
[ -n "$LOAD_PID" ] && wait "$LOAD_PID"
LOAD_PID=""

echo "== checks"
$PY - "$OUTDIR" <<'PY'
import csv, json, sys, os
out = sys.argv[1]
snap = json.load(open(f"{out}/gpu-snapshot.json"))
doctor = json.load(open(f"{out}/gpu-doctor.json"))
smi = [r for r in csv.reader(open(f"{out}/nvidia-smi.csv")) if len(r) > 10]
fails = 0
def check(ok, what, detail=""):
    global fails
    fails += not ok
    print(f"{'PASS' if ok else 'FAIL'} {what}{': ' + detail if detail else ''}")
def num(x):
    try: return float(x)
    except ValueError: return None
nv = snap["sources"].get("nvml", {})
check(nv.get("status") == "ok", "NVML source ok", json.dumps(nv))
for c in doctor.get("checks", []):
    print(f"     doctor {c['name']}: {c['status']} {c.get('detail', '')}")
gpus = snap.get("gpus", [])
check(len(gpus) >= 1, "GPUs listed", ", ".join(g["name"] for g in gpus))
for g in gpus:
    s, i = g["signals"], g["index"]
    print(f"     GPU {i} {g['name']} {g.get('uuid')} numa={g.get('numa_node')} throttle={g['throttle']}")
    print("     kitty  ", {k: s[k] for k in sorted(s)})
    rows = [r for r in smi if r[1].strip() == str(i)]
    if rows:
        mid = rows[len(rows) // 4: len(rows) // 4 + 10]
        print("     nvidia-smi", [",".join(x.strip() for x in r[3:]) for r in mid[:3]])
        mem_total = num(mid[0][6]) * 2**20
        check(abs(s.get("mem_total_bytes", 0) - mem_total) <= 2**21, f"GPU {i} memory total as nvidia-smi",
              f"{s.get('mem_total_bytes')} vs {mem_total}")
        check(s.get("sm_clock_max_mhz") == num(mid[0][10]), f"GPU {i} max SM clock as nvidia-smi",
              f"{s.get('sm_clock_max_mhz')} vs {mid[0][10]}")
        used = [num(r[5]) * 2**20 for r in mid]
        check(min(used) * 0.9 <= s.get("mem_used_bytes", -1) <= max(used) * 1.1, f"GPU {i} memory used within nvidia-smi's range",
              f"{s.get('mem_used_bytes')} vs {min(used)}..{max(used)}")
        power = [num(r[7]) for r in mid if num(r[7]) is not None]
        check(min(power) * 0.7 <= s.get("power_w", -1) <= max(power) * 1.3, f"GPU {i} power within nvidia-smi's range",
              f"{s.get('power_w')} vs {min(power)}..{max(power)}")
    for k in ("util_pct", "mem_used_bytes", "power_w", "temp_c", "sm_clock_mhz", "pcie_gen", "pcie_width",
              "energy_w", "pcie_rx_bytes_per_s", "pcie_tx_bytes_per_s"):
        check(k in s, f"GPU {i} has {k}")
    if "H100" in g["name"] or "H200" in g["name"] or "H800" in g["name"] or "B200" in g["name"]:
        for k in ("sm_active_pct", "tensor_active_pct", "dram_bw_util_pct"):
            check(k in s, f"GPU {i} has GPM {k} (Hopper and newer)", str(s.get(k)))
ranks = [r for r in snap["ranks"] if r.get("job") == "gpu-check"]
if ranks:
    check(len(ranks) == 2, "both ranks of the job found", str([r["pid"] for r in ranks]))
    for r in ranks:
        s = r["signals"]
        print(f"     rank {r['rank']} pid {r['pid']} gpu={r.get('gpu')} " +
              " ".join(f"{k}={s.get(k)}" for k in ("cpu_pct", "gpu_mem_used_bytes", "gpu_proc_sm_util_pct",
                                                     "gpu_util_pct", "gpu_sm_active_pct", "bytes_sent_per_s", "run_delay_ms_per_s")))
        check(r.get("gpu") is not None, f"rank {r['rank']} mapped to its GPU by pid")
        check(s.get("gpu_mem_used_bytes", 0) > 0, f"rank {r['rank']} GPU memory from NVML's process list")
    for v in snap["verdicts"]:
        print("     verdict:", v["message"])
rows = list(csv.DictReader(open(f"{out}/gpu-rows.csv")))
check(len(rows) >= 30, "the recording's GPU rows export", f"{len(rows)} rows")
metrics = open(f"{out}/gpu-metrics.txt").read()
check("kitty_gpu_up" in metrics and "kitty_gpu_power" in metrics, "GPU series on /metrics")
print(f"== {fails} check(s) failed")
sys.exit(1 if fails else 0)
PY
