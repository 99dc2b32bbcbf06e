"""Array code side by side: NumPy vs kfuse array operations eager and fused vs hand-written kfuse kernels.

One process, the same data for every variant. Each row: a warm-up run (compiles and cache loads), then the
median and minimum of ``--repeats`` timed runs, its time over NumPy's (1.00 = as fast, 2.00 = twice as slow)
and the largest difference of its results from NumPy's (relative to NumPy's largest magnitude).

(m) matmul and matvec of float64 matrices: NumPy, ``pk.matmul`` (NumPy's BLAS on host spaces) and the
one-thread-per-output kernel that GPU spaces run; (a) the Gaussian log-likelihood sum over ``--n`` doubles; (b) NSTREAM, A += B + s*C for 50 iterations over
``--n`` doubles; (c) the NPBench subjects: NPBench's NumPy kernel, the same statements in kfuse array
operations (examples/npbench/*_array.py) and the hand-written kernels (examples/npbench/*.py). syrk, syr2k and
adi as array code are a statement per (row, column) pair or per grid line, so they run on the reduced inputs
below whatever ``--size`` says (the fused trace of thousands of slice statements is slow to analyse; README).
Set one thread for a fair comparison with NumPy:

    KFUSE_NUM_THREADS=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_array_api.py \
        [--n 4194304] [--size small|medium] [--repeats 5] [--sections m,a,b,c] [--matmul 500] [--subjects mvt,jacobi_1d,...]
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import math
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the examples are imported as a package from the repository root

import kfuse as pk  # noqa: E402
from examples import nstream  # noqa: E402
from kfuse.ops import kernels  # noqa: E402
from examples.npbench import SUBJECTS  # noqa: E402
from examples.npbench.common import random_matrix  # noqa: E402

REDUCED = {  # inputs of the array-code subjects that take one statement per (i, k) pair or per grid line
    "syrk": lambda: {"alpha": 1.5, "beta": 1.2, "C": random_matrix(21, 20, 20), "A": random_matrix(22, 20, 10)},
    "syr2k": lambda: {"alpha": 1.5, "beta": 1.2, "C": random_matrix(31, 20, 20), "A": random_matrix(32, 20, 10),
                      "B": random_matrix(33, 20, 10)},
    "adi": lambda: {"TSTEPS": 2, "N": 16, "u": random_matrix(61, 16, 16)},
}


@pk.workunit
def gaussian_loglik(i: int, acc: pk.Acc[pk.double], x: pk.View1D[pk.double], mu: pk.View1D[pk.double],
                    var: pk.View1D[pk.double], two_pi: pk.double):
    d: float = x[i] - mu[i]
    acc += -0.5 * pk.log(two_pi * var[i]) - d * d / (2.0 * var[i])


def gaussian_ops(x, mu, var):
    """The same sum as ``gaussian_loglik``, as nine array operations (what a NumPy user writes)."""
    return pk.sum(pk.subtract(pk.multiply(pk.log(pk.multiply(var, 2 * math.pi)), -0.5),
                              pk.divide(pk.square(pk.subtract(x, mu)), pk.multiply(var, 2.0))))


def timed(variants: list, repeats: int) -> list:
    """Per variant (median, min) seconds of ``repeats`` calls and its last result, after a warm-up call of each.
    The variants take turns within every repeat, so a drift of the host's clock (the lent machine's varies
    between processes and over seconds) hits them alike instead of favouring whichever ran last."""
    results = [fn() for _, fn in variants]
    times = [[] for _ in variants]
    for _ in range(repeats):
        for i, (_, fn) in enumerate(variants):
            start = time.perf_counter()
            results[i] = fn()
            times[i].append(time.perf_counter() - start)
    return [(statistics.median(t), min(t), r) for t, r in zip(times, results)]


def fused(fn):
    """fn run with fusion on, its results read (Futures resolved, pending kernels run) before the clock stops."""
    def run():
        with pk.fusion():
            out = fn()
        pk.fence()
        return out
    return run


def difference(got, want) -> float:
    """Largest |got - want| over all outputs, relative to NumPy's largest magnitude."""
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    scale = max(float(np.max(np.abs(w))) for w in want) or 1.0
    return max(float(np.max(np.abs(np.asarray(pk.value(g)) - w))) for g, w in zip(got, want)) / scale


def report(title: str, variants: list, repeats: int) -> None:
    print(f"\n{title}")
    print("| variant | median s | min s | / NumPy | max rel. diff |\n|---|---|---|---|---|")
    rows = timed(variants, repeats)
    base, _, want = rows[0]
    for (name, _), (median, low, out) in zip(variants, rows):
        print(f"| {name} | {median:.5f} | {low:.5f} | {median / base:.2f} | {difference(out, want):.1e} |",
              flush=True)


def matmul_section(n: int, repeats: int) -> None:
    rng = np.random.default_rng(1)
    a, b, x = rng.standard_normal((n, n)), rng.standard_normal((n, n)), rng.standard_normal(n)
    va, vb, vx = pk.array(a), pk.array(b), pk.array(x)

    def kernel_mm():
        out = pk.empty((n, n))
        pk.parallel_for(pk.MDRangePolicy([0, 0], [n, n]), kernels.matmul_k, out=out, a=va, b=vb)
        return out

    def kernel_mv():
        out = pk.empty(n)
        pk.parallel_for(n, kernels.matvec_k, out=out, a=va, x=vx)
        return out

    report(f"(m) matmul {n}x{n} @ {n}x{n}", [("NumPy", lambda: a @ b), ("pk.matmul", lambda: pk.matmul(va, vb)),
                                             ("kernel (GPU path)", kernel_mm)], repeats)
    report(f"(m) matvec {n}x{n} @ {n}", [("NumPy", lambda: a @ x), ("pk.matmul", lambda: pk.matmul(va, vx)),
                                         ("kernel (GPU path)", kernel_mv)], repeats)


def gaussian(n: int, repeats: int) -> None:
    rng = np.random.default_rng(0)
    x, mu, var = rng.standard_normal(n), rng.standard_normal(n), rng.uniform(0.5, 2.0, n)
    for a in (x, mu, var):  # NumPy keeps using them: read-only, so kernels reading them may wait and fuse
        a.flags.writeable = False  # (a writable array the program holds is escaped memory: README)
    vx, vmu, vvar = pk.array(x), pk.array(mu), pk.array(var)

    def ops():
        return gaussian_ops(vx, vmu, vvar)

    def hand():
        return pk.parallel_reduce(n, gaussian_loglik, x=vx, mu=vmu, var=vvar, two_pi=2 * math.pi)

    report(f"(a) Gaussian log-likelihood sum, n={n}", [
        ("NumPy", lambda: np.sum(-0.5 * np.log(2 * math.pi * var) - (x - mu) ** 2 / (2 * var))),
        ("kfuse ops eager", ops), ("kfuse ops fused", fused(ops)),
        ("hand kernel eager", hand), ("hand kernel fused", fused(hand))], repeats)


def nstream_section(n: int, repeats: int, iterations: int = 50) -> None:
    s = nstream.SCALAR

    def numpy_run():
        A, B, C = np.zeros(n), np.full(n, 2.0), np.full(n, 2.0)
        for _ in range(iterations):
            A += B + s * C
        return A

    def ops():
        A, B, C = pk.zeros(n), pk.full(n, 2.0), pk.full(n, 2.0)
        for _ in range(iterations):
            pk.add(A, pk.add(B, pk.multiply(C, s)), out=A)
        return A

    def hand():
        A, B, C = pk.zeros(n), pk.full(n, 2.0), pk.full(n, 2.0)
        for _ in range(iterations):
            pk.parallel_for(n, nstream.nstream, A=A, B=B, C=C, scalar=s)
        return A

    report(f"(b) NSTREAM A += B + {s}*C, {iterations} iterations, n={n} (allocation of A, B, C included)", [
        ("NumPy", numpy_run), ("kfuse ops eager", ops), ("kfuse ops fused", fused(ops)),
        ("hand kernel eager", hand), ("hand kernel fused", fused(hand))], repeats)


def npbench(name: str, size: str, repeats: int) -> None:
    hand = importlib.import_module(f"examples.npbench.{name}")
    array = importlib.import_module(f"examples.npbench.{name}_array")
    inputs = REDUCED[name]() if name in REDUCED else hand.initialize(size)
    shapes = ", ".join(f"{k}={v.shape if isinstance(v, np.ndarray) else v}" for k, v in inputs.items())
    with_inputs = {label: (lambda f=f: f(**inputs)) for label, f in
                   (("numpy", array.run_numpy), ("array", array.run_array), ("hand", hand.run_kfuse))}
    report(f"(c) {name} ({shapes})", [
        ("NumPy (NPBench)", with_inputs["numpy"]),
        ("kfuse array code eager", with_inputs["array"]), ("kfuse array code fused", fused(with_inputs["array"])),
        ("hand kernels eager", with_inputs["hand"]), ("hand kernels fused", fused(with_inputs["hand"]))], repeats)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1 << 22, help="elements of (a) and (b)")
    parser.add_argument("--size", choices=("small", "medium", "large"), default="small", help="NPBench inputs")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sections", default="m,a,b,c")
    parser.add_argument("--matmul", type=int, default=500, help="matrix order of (m)")
    parser.add_argument("--subjects", default=",".join(SUBJECTS))
    args = parser.parse_args(argv)
    threads = {k: os.environ.get(k, "unset") for k in ("KFUSE_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")}
    print(f"load average before: {os.getloadavg()}; threads: {threads}; repeats: {args.repeats} (after a warm-up)")
    sections = args.sections.split(",")
    if "m" in sections:
        matmul_section(args.matmul, args.repeats)
    if "a" in sections:
        gaussian(args.n, args.repeats)
    if "b" in sections:
        nstream_section(args.n, args.repeats)
    if "c" in sections:
        for name in args.subjects.split(","):
            npbench(name, args.size, args.repeats)
    print(f"\nload average after: {os.getloadavg()}")


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError):
        main()
