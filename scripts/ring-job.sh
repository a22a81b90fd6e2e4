# Sourced by the measurement scripts (not run): the 8-rank ring job they
# measure kitty against, and how they read a process's CPU.
#   start_ring BIN JOB_NAME   starts 8 `demo-rank`s of BIN on free loopback
#                             ports, their pids in RING_PIDS, and waits 1 s
#   stop_ring                 kills them (for the caller's EXIT trap)
#   cpu_ns PID                CPU time of all of PID's threads, ns (schedstat)

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

stop_ring() {
  kill "${RING_PIDS[@]}" 2>/dev/null || true
}

cpu_ns() {
  cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {print s}'
}
