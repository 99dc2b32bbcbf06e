"""What a matched call of a repeated flush costs (kfuse/rerun.py): NSTREAM's loop of one call, 50 a run, read by
``pk.fence()``, fused and settled. Per run, the 50 calls alone are timed (not the fence): fused, each call matched
against the repeated flush's template and only counted (``Rerun.take``), and eager, each call launching its tiny
kernel. The variants take turns within every repeat; medians in microseconds a call, and the load average. For scale,
the script also times a Python function that does nothing, called with the same arguments.

    KFUSE_NUM_THREADS=1 .venv/bin/python benchmarks/bench_rerun_calls.py [--n 4096] [--runs 400] [--repeats 7]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import kfuse as pk  # noqa: E402
from examples import nstream  # noqa: E402
from kfuse.bench.measure import until_settled  # noqa: E402

CALLS = 50


def calls_us(views, runs: int, iterate=nstream.iterate) -> float:
    """Median over ``runs`` runs of the 50 calls' time, per call."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        iterate(*views, CALLS)
        times.append(time.perf_counter() - start)
        pk.fence()
    return statistics.median(times) / CALLS * 1e6


def _nothing(*args, **kwargs) -> None:
    return None


def iterate_nothing(A, B, C, iterations: int) -> None:
    """``nstream.iterate``'s loop with each call going nowhere."""
    for _ in range(iterations):
        _nothing("nstream", A.shape[0], nstream.nstream, A=A, B=B, C=C, scalar=nstream.SCALAR)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=4096)
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    views = (pk.zeros(args.n), pk.full(args.n, 2.0), pk.full(args.n, 2.0))
    results = {"matched": [], "eager": [], "no-op call": []}
    with pk.fusion():
        until_settled(lambda: (nstream.iterate(*views, CALLS), pk.fence()))
    for _ in range(args.repeats):
        with pk.fusion():
            results["matched"].append(calls_us(views, args.runs))
        results["eager"].append(calls_us(views, args.runs))
        results["no-op call"].append(calls_us(views, args.runs, iterate_nothing))
    print(f"NSTREAM n={args.n}, {CALLS} calls a run, {args.runs} runs x {args.repeats} repeats, "
          f"load average {os.getloadavg()[0]:.2f}")
    for name, values in results.items():
        print(f"{name:10s} {statistics.median(values):6.2f} us a call (repeats {min(values):.2f}-{max(values):.2f})")


if __name__ == "__main__":
    main()
