"""Transpose (Parallel Research Kernels): B += A^T and A += 1, repeated.

A is order x order with A[i][j] = i * order + j, B starts at 0. Every iteration runs one kernel over
the (i, j) index space that, as in the PRK, reads and then increments the same element of A:

    B[i][j] += A[j][i]
    A[j][i] += 1

so after each iteration B = B + A^T and A = A + 1. Thread (i, j) touches A[j][i] and B[i][j] and
nothing else, the same one-to-one function of its index in every iteration, so the fuser may merge the
whole loop even though A is not indexed by (i, j) directly.

    python examples/transpose.py --size small|medium|large [--fusion]
"""
from __future__ import annotations

import argparse
import contextlib
import time

import numpy as np

import kfuse as pk

#: size -> (order, iterations)
SIZES = {"small": (128, 50), "medium": (1024, 50), "large": (4096, 50)}


@pk.workunit
def transpose(i, j, A, B):
    B[i][j] += A[j][i]
    A[j][i] += 1.0


def run(size: str = "small", *, order: int | None = None, iterations: int | None = None,
        fusion: bool = False) -> dict:
    """Run the kernel; returns the final A and B and the seconds taken."""
    order = order or SIZES[size][0]
    iterations = iterations or SIZES[size][1]
    A = pk.from_numpy(np.arange(order * order, dtype=np.float64).reshape(order, order))
    B = pk.zeros((order, order))
    policy = pk.MDRangePolicy([0, 0], [order, order])
    start = time.perf_counter()
    with pk.fusion() if fusion else contextlib.nullcontext():
        for _ in range(iterations):
            pk.parallel_for("transpose", policy, transpose, A=A, B=B)
    pk.fence()
    seconds = time.perf_counter() - start
    return {"A": A.copy(), "B": B.copy(), "seconds": seconds, "order": order, "iterations": iterations}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=SIZES, default="small")
    parser.add_argument("--fusion", action="store_true", help="trace and fuse kernel calls")
    parser.add_argument("--repeat", type=int, default=3, help="runs (the first includes compiling)")
    args = parser.parse_args(argv)
    for r in range(args.repeat):
        res = run(args.size, fusion=args.fusion)
        moved = 4 * 8 * res["order"] ** 2 * res["iterations"]  # A and B each read and written
        print(f"run {r}: {res['seconds']:.4f} s  ({moved / res['seconds'] / 1e9:.2f} GB/s)")
    print(f"order={res['order']} iterations={res['iterations']} fusion={args.fusion}")
    print(f"sum(B)={res['B'].sum():.10g}")


if __name__ == "__main__":
    main()
