"""What a repeated flush run untraced costs against eager (kfuse/untraced.py, kfuse/rerun.py ``_run_untraced``), on a
program shaped like an NPBench statement subject: three ``pk.from_numpy`` Views made anew each run, ``--calls`` calls of
one small kernel on them, ``pk.fence()``, two reads. The flush's trial is made to choose untraced (its untraced
timings halved before they are compared). Eager and fused take turns in one process; prints the best microseconds of
each part of a run (making the Views, the calls, the fence, the reads) per mode.

    KFUSE_NUM_THREADS=1 .venv/bin/python benchmarks/bench_untraced_repetition.py [--calls 2] [--runs 4000]
        [--no-kernels]

``--no-kernels`` replaces every launch by a call that returns at once, after the warm-up: the host's cost alone.
"""
from __future__ import annotations

import argparse
import gc
import os
import time

import numpy as np

import kfuse as pk
from kfuse import context, engine, untraced
from kfuse.bench import measure
from kfuse.runtime import launch

PARTS = ("from_numpy", "calls", "fence", "reads", "total")


@pk.workunit
def axpy(i: int, y: pk.View1D[pk.double], x: pk.View1D[pk.double], a: pk.double):
    y[i] = y[i] + a * x[i]


def _untraced_chosen() -> None:
    timed = untraced.timed

    def halved(trial, untraced_run, seconds, trials, steps=1):
        return timed(trial, untraced_run, seconds * (0.5 if untraced_run else 1.0), trials, steps)
    untraced.timed = halved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2, help="kernel calls a run (even)")
    parser.add_argument("--runs", type=int, default=4000)
    parser.add_argument("--no-kernels", action="store_true", help="launches return at once (host cost alone)")
    args = parser.parse_args()
    x_in = np.ones(64)
    x_in.flags.writeable = False
    y_in = np.zeros(64)
    clock = time.perf_counter

    def run(best: list) -> None:
        t0 = clock()
        x, y1, y2 = pk.from_numpy(x_in), pk.from_numpy(y_in.copy()), pk.from_numpy(y_in.copy())
        t1 = clock()
        for _ in range(args.calls // 2):
            pk.parallel_for(64, axpy, y=y1, x=x, a=2.0)
            pk.parallel_for(64, axpy, y=y2, x=x, a=3.0)
        t2 = clock()
        pk.fence()
        t3 = clock()
        np.array(y1), np.array(y2)
        t4 = clock()
        for k, seconds in enumerate((t1 - t0, t2 - t1, t3 - t2, t4 - t3, t4 - t0)):
            best[k] = min(best[k], seconds * 1e6)

    _untraced_chosen()
    own = engine.Runtime(backend=context.current().backend)
    with context.using(own):
        measure.settle(lambda: run([0.0] * len(PARTS)), "all")
    if args.no_kernels:
        launch.CompiledKernel.launch = lambda self, bounds, passed, packed=None, wait=True: ()
    best = {"eager": [float("inf")] * len(PARTS), "o": [float("inf")] * len(PARTS)}
    gc.disable()
    for _ in range(args.runs):
        for mode in best:
            with context.using(own if mode == "o" else context.current()), measure.fusion_mode(mode, "all"):
                run(best[mode])
    gc.enable()
    with context.using(own):
        stats = pk.stats()
    print(f"{args.calls} calls a run{' (no kernels)' if args.no_kernels else ''}, best of {args.runs} runs each, "
          f"load average {os.getloadavg()[0]:.2f}; fused calls: {stats['calls_untraced']} untraced, "
          f"{stats['ops_traced']} traced or rerun")
    for mode, label in (("eager", "eager"), ("o", "untraced")):
        print(f"{label:9s}" + "  ".join(f"{part} {us:7.2f} us" for part, us in zip(PARTS, best[mode])))


if __name__ == "__main__":
    main()
