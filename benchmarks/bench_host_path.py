"""Where the host path (kfuse/ops/on_host.py) pays: array statements by size, through kernels and by NumPy.

For each size, with fusion on, in one process: a jacobi_1d step written as array operations (two statements of
three operations over shifted slices), and a Gaussian log-likelihood term (five operations on one shape, the
result accumulated), each timed with every operation through its kernel (KFUSE_HOST_ELEMENTS=0) and with the small ones
done by NumPy (KFUSE_HOST_ELEMENTS=n), next to NumPy itself. Medians of ``--repeats`` runs of ``--steps`` steps,
microseconds per step. Run it at the thread count that matters (the default threshold was chosen from one
thread and 16):

    KFUSE_NUM_THREADS=1 OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_host_path.py [--sizes 1024,16384,65536]
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

import kfuse as pk


def jacobi(xp, A, B, steps):
    for _ in range(steps):
        xp.multiply(xp.add(xp.add(A[:-2], A[1:-1]), A[2:]), 0.33333, out=B[1:-1])
        xp.multiply(xp.add(xp.add(B[:-2], B[1:-1]), B[2:]), 0.33333, out=A[1:-1])


def gaussian(xp, x, mu, var, out, steps):
    for _ in range(steps):  # (accumulated, so no step's result is dead)
        d = xp.subtract(x, mu)
        xp.add(out, xp.divide(xp.multiply(d, d), xp.multiply(var, -2.0)), out=out)


def timed(run, repeats: int, steps: int) -> float:
    run()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times) / steps * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1024,4096,16384,65536,262144")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}; threads KFUSE_NUM_THREADS={os.environ.get('KFUSE_NUM_THREADS')}; "
          f"us per step, medians of {args.repeats}")
    print("| n | jacobi NumPy | kernels | host | gaussian NumPy | kernels | host |")
    print("|---|---|---|---|---|---|---|")
    pk.enable_fusion()
    rng = np.random.default_rng(5)
    for n in map(int, args.sizes.split(",")):
        a, b = rng.random(n), rng.random(n)
        x, mu, var = rng.random(n), rng.random(n), rng.random(n) + 0.5
        row = []
        for workload in ("jacobi", "gaussian"):
            if workload == "jacobi":
                A, B = a.copy(), b.copy()
                row.append(timed(lambda: jacobi(np, A, B, args.steps), args.repeats, args.steps))
                kA, kB = pk.array(a.copy()), pk.array(b.copy())
                run = lambda: (jacobi(pk, kA, kB, args.steps), pk.fence())  # noqa: E731
            else:
                out = np.zeros(n)
                row.append(timed(lambda: gaussian(np, x, mu, var, out, args.steps), args.repeats, args.steps))
                kx, kmu, kvar, kout = pk.array(x.copy()), pk.array(mu.copy()), pk.array(var.copy()), pk.zeros(n)
                run = lambda: (gaussian(pk, kx, kmu, kvar, kout, args.steps), pk.fence())  # noqa: E731
            for limit in ("0", str(n)):
                os.environ["KFUSE_HOST_ELEMENTS"] = limit
                row.append(timed(run, args.repeats, args.steps))
        print(f"| {n} | " + " | ".join(f"{t:.1f}" for t in row) + " |")


if __name__ == "__main__":
    main()
