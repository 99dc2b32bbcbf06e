"""Analysis cost of the first flush of a long trace: planning (graph + plan) and building (fused AST, transforms,
render) of N fusable element-wise calls, without any compile (the null backend records launches).

The program is a time-step loop, two kernels alternating over the same Views (a particle push), read once at the
end. Prints, per N: seconds of planning (the flush record's analysis time), seconds of the whole flush (planning +
building + null launches; with ``--backend kokkos``, compiles and launches too), groups formed, and calls of the
pairwise safety check. ``--profile N`` prints a cProfile of one flush of N calls (top functions by cumulative time).

    .venv/bin/python benchmarks/bench_long_trace.py [--calls 100,1000,4000] [--max-group 0] [--profile 1000]
    KFUSE_CACHE_DIR=$(mktemp -d) .venv/bin/python benchmarks/bench_long_trace.py --backend kokkos --calls 5000
"""
from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import time

import kfuse as pk
from bench_tiny_loop import kick, push  # the same particle push (benchmarks/ is the script's folder on sys.path)
from kfuse import backends, context, engine
from kfuse.fuser import planner

BACKEND = "null"


def flush(calls: int) -> tuple:
    """(planning s, flush s, groups, pair checks) of one flush of ``calls`` calls on a fresh runtime."""
    rt = engine.Runtime(backend=backends.named(BACKEND), fusion=True)
    pairs = [0]
    original = planner.pair_conflict

    def counted(*a):
        pairs[0] += 1
        return original(*a)

    with context.using(rt):
        x, v = pk.View(1024), pk.View(1024)
        for step in range(calls // 2):
            pk.parallel_for(1024, push, dt=0.01, x=x, v=v)
            pk.parallel_for(1024, kick, dt=0.01, x=x, v=v)
        planner.pair_conflict = counted
        try:
            t0 = time.perf_counter()
            rt.flush_all()
            total = time.perf_counter() - t0
        finally:
            planner.pair_conflict = original
        rec = rt.records[-1]
    return rec.analysis_seconds, total, len(rec.groups), pairs[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", default="100,1000,4000")
    parser.add_argument("--profile", type=int, default=0, help="profile one flush of this many calls")
    parser.add_argument("--backend", default="null", help="kokkos: compile and run too (set KFUSE_CACHE_DIR to an "
                        "empty folder to include the compiles)")
    parser.add_argument("--max-group", type=int, default=None, help="KFUSE_MAX_GROUP (0: groups unbounded)")
    args = parser.parse_args()
    os.environ["KFUSE_MAX_TRACE"] = str(10 ** 6)
    global BACKEND
    BACKEND = args.backend
    if args.max_group is not None:
        os.environ["KFUSE_MAX_GROUP"] = str(args.max_group)
    print(f"load average: {' '.join(f'{v:.2f}' for v in os.getloadavg())}; "
          f"KFUSE_MAX_GROUP={os.environ.get('KFUSE_MAX_GROUP', 'default')}")
    flush(10)  # warm: specialise both kernels
    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
        flush(args.profile)
        prof.disable()
        pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
        return
    print(f"{'calls':>7} {'planning s':>11} {'flush s':>9} {'groups':>7} {'pair checks':>12}")
    for n in (int(c) for c in args.calls.split(",")):
        plan_s, total, groups, pairs = flush(n)
        print(f"{n:7d} {plan_s:11.3f} {total:9.3f} {groups:7d} {pairs:12d}")


if __name__ == "__main__":
    main()
