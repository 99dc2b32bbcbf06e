"""What sums cost inside a fused kernel: BabelStream's loop (10 iterations of copy, mul, add, triad over n doubles)
fused whole, with no dot product, with the last iteration's only, and with every iteration's (a kernel of ten
sums); per variant the fused run's wall time and its kernel's C++-timed seconds, medians. On a GPU this is where
the block form of range reductions shows (kfuse/codegen/blocks.py).

    KFUSE_DEFAULT_SPACE=Cuda python benchmarks/bench_gpu_reductions.py [--n 33554432] [--repeats 7]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import kfuse as pk  # noqa: E402
from examples import babelstream as bs  # noqa: E402
from kfuse.bench.measure import until_settled  # noqa: E402
from kfuse.runtime import launch  # noqa: E402


def variant(n: int, dots: str):
    a, b, c = pk.full(n, bs.START_A), pk.full(n, bs.START_B), pk.full(n, bs.START_C)

    def run():
        sums = []
        for it in range(10):
            pk.parallel_for("copy", n, bs.copy, a=a, c=c)
            pk.parallel_for("mul", n, bs.mul, b=b, c=c, scalar=bs.SCALAR)
            pk.parallel_for("add", n, bs.add, a=a, b=b, c=c)
            pk.parallel_for("triad", n, bs.triad, a=a, b=b, c=c, scalar=bs.SCALAR)
            if dots == "every" or (dots == "last" and it == 9):
                sums.append(pk.parallel_reduce("dot", n, bs.dot, a=a, b=b))
        pk.fence()
        return [float(s) for s in sums]
    return run


def walls_and_kernels(run, runs: int) -> tuple[list, list, int]:
    """Seconds of each of ``runs`` calls of ``run``, of the kernels in each (C++-timed, launch and fence included),
    and the launches of the last."""
    walls, kernels = [], []
    for _ in range(runs):
        profile = launch.profile = []
        start = time.perf_counter()
        run()
        walls.append(time.perf_counter() - start)
        launch.profile = None
        kernels.append(sum(entry[1] for entry in profile))
    return walls, kernels, len(profile)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1 << 25)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    print(f"space {pk.get_default_space().value}, n = {args.n}, fused, medians of {args.repeats} (ms)")
    for dots in ("none", "last", "every"):
        run = variant(args.n, dots)
        with pk.fusion():
            until_settled(run)
            walls, kernels, launches = walls_and_kernels(run, args.repeats)
        print(f"dot products: {dots:5}  wall {statistics.median(walls) * 1e3:.3f}  kernels "
              f"{statistics.median(kernels) * 1e3:.3f}  launches {launches}")


if __name__ == "__main__":
    main()
