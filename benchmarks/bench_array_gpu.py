"""Issue 15's GPU figures: array-API code fused by kfuse against torch.compile (and CuPy) on the same card, same
data, in one process. Two programs: the Gaussian log-likelihood chain over n doubles (a sum of
-0.5 log(2 pi var) - (x - mu)^2 / (2 var)), and NSTREAM written with array operations (A += B + s C, 50 times).
Each runs as kfuse array operations fused and eager, as one hand-written kfuse kernel, and with torch.compile and
CuPy where they are installed (a missing one is reported, not faked). Median of several repeats, after a warm-up
that compiles everything.

    KFUSE_KOKKOS_ROOT=<a CUDA Kokkos> KFUSE_DEFAULT_SPACE=Cuda python benchmarks/bench_array_gpu.py [--n 4194304]
"""
from __future__ import annotations

import argparse
import math
import statistics
import time

import numpy as np

import kfuse as pk
from bench_array_api import gaussian_loglik, gaussian_ops  # the CPU bench's; it puts the repository on sys.path
from examples.nstream import SCALAR, nstream

ITERATIONS = 50


def timed(fn, repeats: int, settle: int = 12) -> float:
    """Median seconds of ``fn`` after warm-up runs (compiles), repeated while fusion's profitability decisions are
    still being timed (fuser/profit.py), so the timed runs follow settled decisions."""
    for _ in range(settle):
        before = pk.stats()["profit_trials"]
        fn()
        if pk.stats()["profit_trials"] == before:
            break
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def kfuse_rows(x0, mu0, var0, fused: bool, repeats: int) -> dict:
    """Seconds per Gaussian chain (ops, hand kernel) and per NSTREAM run (ops, hand kernel)."""
    n = x0.size
    x, mu, var = pk.array(x0.copy()), pk.array(mu0.copy()), pk.array(var0.copy())
    A, B, C = pk.zeros(n), pk.full(n, 2.0), pk.full(n, 2.0)
    if fused:
        pk.enable_fusion()

    # pk.fence runs every pending kernel to completion and leaves results on the GPU, as torch.cuda.synchronize does
    def nstream_ops():
        for _ in range(ITERATIONS):
            pk.add(A, pk.add(B, pk.multiply(C, SCALAR)), out=A)
        pk.fence()

    def nstream_hand():
        for _ in range(ITERATIONS):
            pk.parallel_for(n, nstream, A=A, B=B, C=C, scalar=SCALAR)
        pk.fence()

    rows = {"gauss ops": timed(lambda: float(gaussian_ops(x, mu, var)), repeats),
            "gauss hand kernel": timed(lambda: float(pk.parallel_reduce(n, gaussian_loglik, x=x, mu=mu, var=var,
                                                                        two_pi=2 * math.pi)), repeats),
            "nstream ops": timed(nstream_ops, repeats), "nstream hand kernel": timed(nstream_hand, repeats)}
    check = float(gaussian_ops(x, mu, var))
    pk.disable_fusion()
    return rows, check


def torch_rows(x0, mu0, var0, repeats: int) -> tuple:
    try:
        import torch
    except ImportError:
        return {}, "torch is not installed here"
    dev = torch.device("cuda")
    x, mu, var = (torch.from_numpy(a).to(dev) for a in (x0, mu0, var0))
    A, B, C = torch.zeros(x0.size, dtype=torch.float64, device=dev), torch.full_like(x, 2.0), torch.full_like(x, 2.0)

    @torch.compile
    def gauss(x, mu, var):
        return torch.sum(-0.5 * torch.log(2 * math.pi * var) - (x - mu) ** 2 / (2 * var))

    @torch.compile
    def triad(A, B, C):
        A += B + SCALAR * C

    def nstream():
        for _ in range(ITERATIONS):
            triad(A, B, C)
        torch.cuda.synchronize()

    rows = {"gauss torch.compile": timed(lambda: float(gauss(x, mu, var)), repeats),
            "nstream torch.compile": timed(nstream, repeats)}
    return rows, f"torch {torch.__version__}"


def cupy_rows(x0, mu0, var0, repeats: int) -> tuple:
    try:
        import cupy as cp
    except ImportError:
        return {}, "CuPy is not installed here"
    x, mu, var = (cp.asarray(a) for a in (x0, mu0, var0))
    A, B, C = cp.zeros(x0.size), cp.full(x0.size, 2.0), cp.full(x0.size, 2.0)

    def nstream():
        for _ in range(ITERATIONS):
            A.__iadd__(B + SCALAR * C)
        cp.cuda.Device().synchronize()

    gauss = lambda: float(cp.sum(-0.5 * cp.log(2 * math.pi * var) - (x - mu) ** 2 / (2 * var)))  # noqa: E731
    return {"gauss cupy": timed(gauss, repeats), "nstream cupy": timed(nstream, repeats)}, f"CuPy {cp.__version__}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1 << 22, help="elements (several: comma-separated)")
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    x0, mu0, var0 = rng.standard_normal(args.n), rng.standard_normal(args.n), rng.uniform(0.5, 2.0, args.n)
    expected = float(np.sum(-0.5 * np.log(2 * math.pi * var0) - (x0 - mu0) ** 2 / (2 * var0)))
    fused, check_f = kfuse_rows(x0, mu0, var0, True, args.repeats)
    eager, check_e = kfuse_rows(x0, mu0, var0, False, args.repeats)
    other, notes = {}, []
    for rows_of in (torch_rows, cupy_rows):
        rows, note = rows_of(x0, mu0, var0, args.repeats)
        other.update(rows)
        notes.append(note)
    print(f"space {pk.get_default_space().name}; n={args.n}; median of {args.repeats}; {'; '.join(notes)}")
    print(f"gauss: NumPy {expected:.10g}, kfuse fused {check_f:.10g}, eager {check_e:.10g}")
    for name in ("gauss", "nstream"):
        base = fused[f"{name} ops"]
        table = {f"{name} ops fused": base, f"{name} ops eager": eager[f"{name} ops"],
                 f"{name} hand kernel": fused[f"{name} hand kernel"],
                 **{k: v for k, v in other.items() if k.startswith(name)}}
        for label, seconds in table.items():
            print(f"  {label:28s} {seconds * 1e3:9.3f} ms   {seconds / base:6.2f}x the fused ops")


if __name__ == "__main__":
    main()
