#!/usr/bin/env python3
"""A small real GPU training-like job for scripts/gpu-check.sh.

N ranks (separate processes, each exec'd with KITTY_WATCH=1, RANK, WORLD_SIZE
and JOB_NAME in its own environment, as torchrun does) share the machine's
GPUs round-robin. Each step a rank multiplies bf16 matrices on its GPU, then
all-reduces a 1 MiB CPU tensor over gloo (TCP on loopback), so the ranks wait
for each other like a data-parallel job. `--slow-rank R` gives rank R three
times the GPU work per step: its peers then wait for it in the all-reduce.
Every rank prints its step count and mean step time at the end.

Usage: gpu-load.py [--ranks N] [--seconds S] [--slow-rank R] [--size N]
"""
import argparse
import os
import socket
import subprocess
import sys
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(args):
    port = free_port()
    procs = []
    for r in range(args.ranks):
        env = dict(os.environ, KITTY_WATCH="1", RANK=str(r), LOCAL_RANK=str(r),
                   WORLD_SIZE=str(args.ranks), JOB_NAME=args.job,
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        cmd = [sys.executable, __file__, "--rank", str(r), "--ranks", str(args.ranks),
               "--seconds", str(args.seconds), "--slow-rank", str(args.slow_rank),
               "--size", str(args.size)]
        procs.append(subprocess.Popen(cmd, env=env))
    print("gpu-load: pids", " ".join(str(p.pid) for p in procs), flush=True)
    return max(p.wait() for p in procs)


def rank_main(args):
    import torch
    import torch.distributed as dist

    rank = args.rank
    dev = torch.device("cuda", rank % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    a = torch.randn(args.size, args.size, device=dev, dtype=torch.bfloat16)
    dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=args.ranks)
    buf = torch.zeros(1 << 18)
    reps = 3 if rank == args.slow_rank else 1
    start = time.time()
    steps = 0
    while True:
        for _ in range(reps):
            b = a @ a
        torch.cuda.synchronize()
        # Rank 0 says when to stop, inside the all-reduce every rank makes,
        # so no rank is left waiting in a collective its peers never join.
        buf[0] = 1.0 if rank == 0 and time.time() - start > args.seconds else 0.0
        dist.all_reduce(buf)
        steps += 1
        if buf[0] > 0:
            break
    took = time.time() - start
    print(f"gpu-load: rank {rank} pid {os.getpid()} on {dev}: {steps} steps, "
          f"{1000 * took / steps:.1f} ms a step", flush=True)
    del b
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--slow-rank", type=int, default=-1)
    p.add_argument("--size", type=int, default=8192)
    p.add_argument("--job", default="gpu-check")
    p.add_argument("--rank", type=int, default=None)
    args = p.parse_args()
    if args.rank is None:
        sys.exit(launch(args))
    rank_main(args)


if __name__ == "__main__":
    main()
