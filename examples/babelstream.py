"""BabelStream (Deakin et al.): memory bandwidth of four streaming kernels and a dot product.

Arrays a, b, c start at 0.1, 0.2 and 0.0; each iteration runs, with scalar s = 0.4,

    copy   c[i] = a[i]
    mul    b[i] = s * c[i]
    add    c[i] = a[i] + b[i]
    triad  a[i] = b[i] + s * c[i]
    dot    sum of a[i] * b[i]

The four streaming kernels touch every array only at the thread index, so they are the fusible group;
dot is a reduction (a Future while fusion is on).

    python examples/babelstream.py --size small|medium|large [--fusion]
"""
from __future__ import annotations

import argparse
import contextlib
import time

import kfuse as pk

#: size -> (array length, iterations)
SIZES = {"small": (1 << 16, 10), "medium": (1 << 22, 20), "large": (1 << 25, 20)}
SCALAR = 0.4
START_A, START_B, START_C = 0.1, 0.2, 0.0


@pk.workunit
def copy(i, a, c):
    c[i] = a[i]


@pk.workunit
def mul(i, b, c, scalar):
    b[i] = scalar * c[i]


@pk.workunit
def add(i, a, b, c):
    c[i] = a[i] + b[i]


@pk.workunit
def triad(i, a, b, c, scalar):
    a[i] = b[i] + scalar * c[i]


@pk.workunit
def dot(i, acc: pk.Acc[pk.double], a, b):
    acc += a[i] * b[i]


def iterate(a, b, c, iterations: int) -> list:
    """The benchmark's loop (also timed by ``python -m kfuse.bench --peers``); the dot product of every iteration."""
    n, sums = a.shape[0], []
    for _ in range(iterations):
        pk.parallel_for("copy", n, copy, a=a, c=c)
        pk.parallel_for("mul", n, mul, b=b, c=c, scalar=SCALAR)
        pk.parallel_for("add", n, add, a=a, b=b, c=c)
        pk.parallel_for("triad", n, triad, a=a, b=b, c=c, scalar=SCALAR)
        sums.append(pk.parallel_reduce("dot", n, dot, a=a, b=b))
    return sums


def run(size: str = "small", *, n: int | None = None, iterations: int | None = None, fusion: bool = False) -> dict:
    """Run the benchmark; returns the final arrays, the dot product of every iteration and the seconds taken."""
    n = n or SIZES[size][0]
    iterations = iterations or SIZES[size][1]
    a, b, c = pk.full(n, START_A), pk.full(n, START_B), pk.full(n, START_C)
    start = time.perf_counter()
    with pk.fusion() if fusion else contextlib.nullcontext():
        sums = iterate(a, b, c, iterations)
    pk.fence()
    seconds = time.perf_counter() - start
    return {"a": a.copy(), "b": b.copy(), "c": c.copy(), "dot": [float(s) for s in sums], "seconds": seconds,
            "n": n, "iterations": iterations}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=SIZES, default="small")
    parser.add_argument("--fusion", action="store_true", help="trace and fuse kernel calls")
    parser.add_argument("--repeat", type=int, default=3, help="runs (the first includes compiling)")
    args = parser.parse_args(argv)
    for r in range(args.repeat):
        res = run(args.size, fusion=args.fusion)
        moved = 12 * 8 * res["n"] * res["iterations"]  # arrays read+written: copy 2, mul 2, add 3, triad 3, dot 2
        print(f"run {r}: {res['seconds']:.4f} s  ({moved / res['seconds'] / 1e9:.2f} GB/s)")
    print(f"n={res['n']} iterations={res['iterations']} fusion={args.fusion}")
    print(f"a[0]={res['a'][0]:.6g} b[0]={res['b'][0]:.6g} c[0]={res['c'][0]:.6g} dot={res['dot'][-1]:.6g}")


if __name__ == "__main__":
    main()
