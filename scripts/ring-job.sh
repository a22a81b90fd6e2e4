# Sourced by the measurement scripts (not run): the 8-rank ring job they
# measure kitty against, and how they read a process's CPU.
#   start_ring BIN JOB_NAME   starts 8 `demo-rank`s of BIN on free loopback
#                             ports, their pids in RING_PIDS, and waits 1 s
#   start_threads N JOB_NAME  starts 8 idle watched processes of N threads
#                             each (a GPU node's ranks have ~100-200), their
#                             pids in RING_PIDS, and waits 2 s
#   stop_ring                 kills them (for the caller's EXIT trap)
#   cpu_ns PID                CPU time of all of PID's threads, ns (schedstat)
#   minor_faults PID          PID's minor page faults so far (stat's 10th field)

RING_PIDS=()

start_ring() {
  local bin=$1 job=$2 ports r
  ports=$(python3 -c 'import socket
s=[socket.socket() for _ in range(8)]
[x.bind(("127.0.0.1",0)) for x in s]
print(",".join(str(x.getsockname()[1]) for x in s))')
  for r in $(seq 0 7); do
    KITTY_WATCH=1 RANK=$r JOB_NAME=$job "$bin" demo-rank --rank "$r" --world 8 --ports "$ports" >/dev/null 2>&1 &
    RING_PIDS+=($!)
  done
  sleep 1
}

start_threads() {
  local n=$1 job=$2 r
  for r in $(seq 0 7); do
    # Each thread wakes once a second, as a rank's helper threads do.
    KITTY_WATCH=1 RANK=$r WORLD_SIZE=8 JOB_NAME=$job python3 -c '
import sys, threading, time
def idle():
    while True:
        time.sleep(1.0)
for _ in range(int(sys.argv[1]) - 1):
    threading.Thread(target=idle, daemon=True).start()
idle()' "$n" >/dev/null 2>&1 &
    RING_PIDS+=($!)
  done
  sleep 2
}

stop_ring() {
  kill "${RING_PIDS[@]}" 2>/dev/null || true
}

cpu_ns() {
  cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {print s}'
}

minor_faults() {
  awk '{print $10}' /proc/"$1"/stat
}
