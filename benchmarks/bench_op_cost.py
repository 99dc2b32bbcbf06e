"""What one array operation costs the host while fusing: ``pk.multiply(view, 3.0)`` and ``pk.add(view, view)``
(recorded: kfuse/ops/lazy.py; which steps share a kernel is decided as each is recorded) against a traced
``pk.parallel_for`` of the kernel each stands for, in one process, alternated; batches of 100 calls, each followed
by a flush (not timed: it holds the stores' decision and the launch); medians in microseconds per call.

    KFUSE_NUM_THREADS=1 OMP_WAIT_POLICY=passive .venv/bin/python benchmarks/bench_op_cost.py [--batches 30]
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import kfuse as pk
from kfuse.ops import kernels

N, CALLS = 1 << 12, 100


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=30)
    args = ap.parse_args()
    a, b, out = pk.full(N, 2.0), pk.full(N, 3.0), pk.View([N])
    pk.enable_fusion()
    variants = {"pk.multiply(view, 3.0)": lambda: pk.multiply(a, 3.0), "pk.add(view, view)": lambda: pk.add(a, b),
                "its parallel_for": lambda: pk.parallel_for(N, kernels.multiply_vs, out=out, a=a, s=3.0)}
    times = {name: [] for name in variants}
    for _ in range(args.batches):
        for name, call in variants.items():
            start = time.perf_counter()
            for _ in range(CALLS):
                call()
            times[name].append((time.perf_counter() - start) / CALLS * 1e6)
            pk.fence()
    print(f"load average {os.getloadavg()[0]:.2f}; {args.batches} batches of {CALLS} traced calls")
    for name, values in times.items():
        print(f"  {name:24s} {statistics.median(values):6.1f} us per call")


if __name__ == "__main__":
    main()
