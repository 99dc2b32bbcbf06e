"""One bench subject run over and over, eager and fused alternated in one process: the fused runs on a runtime of
its own, settled first (profitability and rerun/untraced trials decided), as the bench's fused mode. Prints each
mode's median and minimum microseconds a run, the fused/eager ratio and how the fused calls ran; with
``--parts``, the time a run spends in the rerun's matching and launching and in kernel launches.

    KFUSE_NUM_THREADS=1 .venv/bin/python benchmarks/bench_subject_loop.py jacobi_1d_statements [--runs 300] [--parts]
        [--force untraced|rerun]

``--force`` makes a repeated flush's trial (kfuse/untraced.py) decide that way, by halving the timings of that side
before they are compared: each way's steady cost, whatever the trial would pick.
"""
from __future__ import annotations

import argparse
import collections
import statistics
import time

import kfuse as pk
from kfuse import context, engine, rerun, untraced
from kfuse.bench import measure, subjects
from kfuse.runtime import launch

spent: collections.Counter = collections.Counter()


def _timed(owner, name: str) -> None:
    original = getattr(owner, name)

    def timed(*args, **kwargs):
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            spent[f"{owner.__name__}.{name}"] += time.perf_counter() - start
    setattr(owner, name, timed)


def _force(want_untraced: bool) -> None:
    timed = untraced.timed

    def scaled(trial, untraced_run, seconds, trials, steps=1):
        return timed(trial, untraced_run, seconds * (0.5 if untraced_run == want_untraced else 1.0), trials, steps)
    untraced.timed = scaled


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("subject")
    parser.add_argument("--size", default="medium")
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--parts", action="store_true")
    parser.add_argument("--force", choices=("untraced", "rerun"))
    args = parser.parse_args()
    if args.force:
        _force(args.force == "untraced")
    if args.parts:
        for owner, name in ((rerun.Rerun, "take"), (rerun.Rerun, "run"), (launch.CompiledKernel, "launch")):
            _timed(owner, name)
    go = subjects.load(args.subject).prepare(args.size)
    own = engine.Runtime(backend=context.current().backend)
    with context.using(own):
        measure.settle(go, "all")
    seconds = {"eager": [], "o": []}
    parts = {"eager": collections.Counter(), "o": collections.Counter()}
    for r in range(args.runs):
        for mode in ("eager", "o") if r % 2 == 0 else ("o", "eager"):
            spent.clear()
            with context.using(own if mode == "o" else context.current()), measure.fusion_mode(mode, "all"):
                seconds[mode].append(go())
            parts[mode].update(spent)
    for mode, label in (("eager", "eager"), ("o", "fused")):
        print(f"{label}: median {1e6 * statistics.median(seconds[mode]):.1f} us, min {1e6 * min(seconds[mode]):.1f} us")
        for part, total in parts[mode].most_common():
            print(f"    {part:30s} {1e6 * total / args.runs:8.1f} us a run")
    with context.using(own):
        stats = pk.stats()
    print(f"fused/eager {statistics.median(seconds['o']) / statistics.median(seconds['eager']):.3f} (fused calls: "
          f"{stats['ops_traced']} traced or rerun, {stats['calls_untraced']} untraced)")


if __name__ == "__main__":
    main()
