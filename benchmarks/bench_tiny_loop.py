"""Issue 16's tiny-kernel time-step loop: 1,024 elements, two kernels per step, the host reads every 10 steps.
Eager and fused side by side in one process (alternating repeats); prints microseconds per step (median) and the
fused/eager ratio, which must not exceed 1 for fusion to be worth having here.

    KFUSE_NUM_THREADS=1 .venv/bin/python benchmarks/bench_tiny_loop.py [--steps 2000] [--repeats 7] [--n 1024] [--cold]
"""
from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import time

import numpy as np

import kfuse as pk
from kfuse import config


@pk.workunit
def push(i: int, x: pk.View1D[pk.double], v: pk.View1D[pk.double], dt: float):
    x[i] = x[i] + dt * v[i]


@pk.workunit
def kick(i: int, x: pk.View1D[pk.double], v: pk.View1D[pk.double], dt: float):
    v[i] = v[i] - dt * x[i]


def loop(n: int, steps: int, fused: bool) -> float:
    """Seconds per step."""
    x, v = pk.View([n], pk.double), pk.View([n], pk.double)
    x[:] = np.linspace(-1.0, 1.0, n)
    with pk.fusion() if fused else contextlib.nullcontext():
        start = time.perf_counter()
        for step in range(steps):
            pk.parallel_for(n, push, x=x, v=v, dt=0.01)
            pk.parallel_for(n, kick, x=x, v=v, dt=0.01)
            if step % 10 == 9:
                float(x[0])  # the host read
        pk.fence()
        return (time.perf_counter() - start) / steps


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--cold", action="store_true", help="do not build the fused kernel first: the cost model then "
                    "runs the group apart until its compile would be repaid (about 2,900 flushes here)")
    args = ap.parse_args()
    loop(args.n, 50, False)
    with contextlib.nullcontext() if args.cold else config.overridden(config.PROFIT, "off"):
        loop(args.n, 50, True)  # builds the fused kernel, as a program that ran before (or kfuse.bench's warm-up)
    loop(args.n, 50, True)
    eager, fused = [], []
    for _ in range(args.repeats):
        eager.append(loop(args.n, args.steps, False))
        fused.append(loop(args.n, args.steps, True))
    e, f = statistics.median(eager) * 1e6, statistics.median(fused) * 1e6
    print(f"load average {os.getloadavg()[0]:.2f}; n={args.n}, {args.steps} steps x {args.repeats}")
    print(f"eager {e:.1f} us/step, fused {f:.1f} us/step, fused/eager {f / e:.2f}")


if __name__ == "__main__":
    main()
