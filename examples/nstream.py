"""NSTREAM (Parallel Research Kernels): the triad A += B + scalar * C, repeated.

A starts at 0, B and C at 2, scalar = 3; every iteration runs one kernel ``A[i] += B[i] + scalar * C[i]``.
All iterations touch the arrays only at the thread index, so the fuser may merge the whole loop.

    python examples/nstream.py --size small|medium|large [--fusion]
"""
from __future__ import annotations

import argparse
import contextlib
import time

import kfuse as pk

#: size -> (array length, iterations)
SIZES = {"small": (1 << 16, 50), "medium": (1 << 22, 50), "large": (1 << 25, 50)}
SCALAR = 3.0


@pk.workunit
def nstream(i, A, B, C, scalar):
    A[i] += B[i] + scalar * C[i]


def iterate(A, B, C, iterations: int) -> None:
    """The benchmark's loop (also timed by ``python -m kfuse.bench --peers``)."""
    for _ in range(iterations):
        pk.parallel_for("nstream", A.shape[0], nstream, A=A, B=B, C=C, scalar=SCALAR)


def run(size: str = "small", *, n: int | None = None, iterations: int | None = None, fusion: bool = False) -> dict:
    """Run the kernel; returns the final A and the seconds taken."""
    n = n or SIZES[size][0]
    iterations = iterations or SIZES[size][1]
    A, B, C = pk.zeros(n), pk.full(n, 2.0), pk.full(n, 2.0)
    start = time.perf_counter()
    with pk.fusion() if fusion else contextlib.nullcontext():
        iterate(A, B, C, iterations)
    pk.fence()
    seconds = time.perf_counter() - start
    return {"A": A.copy(), "seconds": seconds, "n": n, "iterations": iterations}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=SIZES, default="small")
    parser.add_argument("--fusion", action="store_true", help="trace and fuse kernel calls")
    parser.add_argument("--repeat", type=int, default=3, help="runs (the first includes compiling)")
    args = parser.parse_args(argv)
    for r in range(args.repeat):
        res = run(args.size, fusion=args.fusion)
        moved = 4 * 8 * res["n"] * res["iterations"]  # A read and written, B and C read
        print(f"run {r}: {res['seconds']:.4f} s  ({moved / res['seconds'] / 1e9:.2f} GB/s)")
    print(f"n={res['n']} iterations={res['iterations']} fusion={args.fusion}")
    print(f"sum(A)={res['A'].sum():.10g}")


if __name__ == "__main__":
    main()
