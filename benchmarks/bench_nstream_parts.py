"""Where an NSTREAM run spends its time, by part: making the arrays (``pk.zeros``/``pk.full``), the 50 calls,
``pk.fence()``, and reading A back -- eager and fused alternately in one process (fused settled first), medians in
milliseconds. On a GPU this shows what moves between host and device (a new array of one value is filled on the
device, not copied over; ``pk.fence()`` copies nothing back; the read copies A alone).

    KFUSE_DEFAULT_SPACE=Cuda python benchmarks/bench_nstream_parts.py [--size medium] [--repeats 9]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import kfuse as pk  # noqa: E402
from examples import nstream  # noqa: E402

PARTS = ("arrays", "calls", "fence", "read A")


def run(n: int, iterations: int) -> tuple:
    marks = [time.perf_counter()]
    A, B, C = pk.zeros(n), pk.full(n, 2.0), pk.full(n, 2.0)
    marks.append(time.perf_counter())
    nstream.iterate(A, B, C, iterations)
    marks.append(time.perf_counter())
    pk.fence()
    marks.append(time.perf_counter())
    A.copy()
    marks.append(time.perf_counter())
    return tuple(b - a for a, b in zip(marks, marks[1:]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=nstream.SIZES, default="medium")
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    n, iterations = nstream.SIZES[args.size]
    runs = {"eager": [], "fused": []}
    with pk.fusion():
        for _ in range(12):  # compiles, profitability trials
            run(n, iterations)
    for _ in range(args.repeats):
        runs["eager"].append(run(n, iterations))
        with pk.fusion():
            runs["fused"].append(run(n, iterations))
    print(f"NSTREAM n={n}, {iterations} calls, default space {pk.get_default_space().value}")
    for mode, rows in runs.items():
        medians = [statistics.median(part) * 1e3 for part in zip(*rows)]
        print(f"{mode:6s} " + ", ".join(f"{name} {ms:.3f} ms" for name, ms in zip(PARTS, medians)))


if __name__ == "__main__":
    main()
