"""What tracing itself costs, without fusion: logging a call, walking the trace, and end to end.

Prints medians over ``--repeats``:

(a) microseconds per ``pk.parallel_for`` while tracing (argument binding + logging, nothing runs), the
    logging part alone (``Runtime.log``), and an eager call (argument binding + launch) of the same kernel;
    (a2) per call of a loop read every 10 steps, fused (each call matched by a rerun, kfuse/rerun.py) and eager;
(b) microseconds for the dependency walk of one host access over a trace of N pending entries: a read of
    an unrelated View (walks everything, takes nothing) and a read that needs every entry (a chain);
(c) end-to-end time of a time-step loop, eager vs traced-without-fusion (each partition runs call by
    call through the pipeline), for small kernels (launch-bound) and large ones (memory-bound), and the
    overhead of tracing in percent. On a small shared machine the launch-bound loop depends strongly on how
    idle OpenMP threads wait (OMP_WAIT_POLICY): try ``OMP_WAIT_POLICY=passive`` and ``KFUSE_NUM_THREADS=1``.

    .venv/bin/python benchmarks/bench_tracing.py [--repeats 7] [--calls 4000] [--small 1000] [--large 4000000]
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

import kfuse as pk
from kfuse.runtime import kokkos_runtime
from kfuse import context


@pk.workunit
def bt_axpy(i: int, alpha: float, x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    y[i] = y[i] + alpha * x[i]


@pk.workunit
def bt_scale(i: int, x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    y[i] = 0.5 * x[i]


@pk.workunit
def bt_dot(i: int, acc: pk.Acc[pk.double], x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    acc += x[i] * y[i]


def median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def logging_cost(calls: int, repeats: int) -> tuple:
    """µs per parallel_for over 8 elements: (traced call, of which Runtime.log, eager call)."""
    x, y = pk.View(8), pk.View(8)
    pk.parallel_for(8, bt_axpy, alpha=0.5, x=x, y=y)  # build/load once
    tracer = context.current()

    def eager():
        for _ in range(calls):
            pk.parallel_for(8, bt_axpy, alpha=0.5, x=x, y=y)

    def traced():
        for _ in range(calls):
            pk.parallel_for(8, bt_axpy, alpha=0.5, x=x, y=y)

    def log_only():
        for _ in range(calls):
            tracer.log(call)

    pk.enable_fusion(trace_only=True)
    pk.parallel_for(8, bt_axpy, alpha=0.5, x=x, y=y)
    call = tracer.trace.entries[0].call
    tracer.trace.clear()  # timed traces are dropped without running: only logging is timed
    results = []
    for fn in (traced, log_only):
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
            tracer.trace.clear()
        results.append(statistics.median(times) / calls * 1e6)
    pk.disable_fusion()
    return results[0], results[1], median_time(eager, repeats) / calls * 1e6


def rerun_cost(calls: int, repeats: int) -> tuple:
    """µs per parallel_for over 8 elements in a loop of two kernels read every 10 steps: (fused, where each call
    is matched by a rerun and every 20 calls one fused kernel runs; eager, the same loop unfused). Everything is
    counted: matching, the host read, the flush and the launches."""
    x, y = pk.View(8), pk.View(8)

    def loop(fused: bool):
        if fused:
            pk.enable_fusion()
        for k in range(calls // 2):
            pk.parallel_for(8, bt_axpy, alpha=0.5, x=x, y=y)
            pk.parallel_for(8, bt_scale, x=y, y=x)
            if k % 10 == 9:
                float(x[0])
        pk.disable_fusion()

    loop(True), loop(False)  # compile, settle the profitability decision, keep the template
    loop(True)
    fused, eager = [], []
    for _ in range(repeats):
        fused.append(median_time(lambda: loop(True), 1))
        eager.append(median_time(lambda: loop(False), 1))
    return statistics.median(fused) / calls * 1e6, statistics.median(eager) / calls * 1e6


def walk_cost(n: int, repeats: int) -> tuple:
    """(µs for an unrelated read, µs for a read needing all n entries) of ``Trace.partition_for``."""
    views = [pk.View(4) for _ in range(n + 1)]
    other = pk.View(4)
    pk.enable_fusion(trace_only=True)
    for k in range(n):  # a chain views[0] -> views[1] -> ... -> views[n]
        pk.parallel_for(4, bt_scale, x=views[k], y=views[k + 1])
    trace = context.current().trace
    assert len(trace) == n
    unrelated = median_time(lambda: trace.partition_for(other.bounds, False), repeats)
    needed = median_time(lambda: trace.partition_for(views[n].bounds, False), repeats)
    assert len(trace.partition_for(views[n].bounds, False)) == n
    trace.clear()
    pk.disable_fusion()
    return unrelated * 1e6, needed * 1e6


def time_step_loops(n: int, steps: int, repeats: int) -> tuple:
    """Median seconds (eager, traced) of ``steps`` iterations of 4 kernels + a reduction the host reads
    every step; eager and traced runs alternate so that load changes on the machine hit both alike."""
    x, y, z = pk.View(n), pk.View(n), pk.View(n)
    x[:] = np.linspace(0.0, 1.0, n)

    def run(traced: bool) -> float:
        t0 = time.perf_counter()
        if traced:
            pk.enable_fusion(trace_only=True)
        for _ in range(steps):
            pk.parallel_for(n, bt_scale, x=x, y=y)
            pk.parallel_for(n, bt_axpy, alpha=0.25, x=y, y=z)
            pk.parallel_for(n, bt_axpy, alpha=-0.25, x=y, y=z)
            pk.parallel_for(n, bt_scale, x=z, y=x)
            r = pk.parallel_reduce(n, bt_dot, x=x, y=x)
            if float(r) < 0.0:  # the host needs the value every step (never true)
                raise AssertionError("negative norm")
        pk.disable_fusion()
        return time.perf_counter() - t0

    run(False), run(True)  # warm up (load kernels)
    eager, traced = [], []
    for _ in range(repeats):
        eager.append(run(False))
        traced.append(run(True))
    return statistics.median(eager), statistics.median(traced)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--calls", type=int, default=4000)
    ap.add_argument("--small", type=int, default=1000, help="elements per View, launch-bound loop")
    ap.add_argument("--large", type=int, default=4_000_000, help="elements per View, memory-bound loop")
    args = ap.parse_args()
    pk.disable_fusion()
    print(f"OpenMP threads {kokkos_runtime.concurrency()}, OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', 'unset')}, "
          f"load average {os.getloadavg()[0]:.2f}")

    traced_us, log_us, eager_us = logging_cost(args.calls, args.repeats)
    print(f"(a) per parallel_for: traced {traced_us:.2f} us (of which Runtime.log {log_us:.2f} us), "
          f"eager {eager_us:.2f} us (argument binding + launch)")

    rerun_us, loop_eager_us = rerun_cost(args.calls, args.repeats)
    print(f"(a2) per parallel_for in a loop read every 10 steps, everything counted: fused {rerun_us:.2f} us (matched "
          f"by a rerun: compared, not traced), eager {loop_eager_us:.2f} us")

    print("(b) dependency walk of one host access over N pending entries:")
    for n in (10, 100, 1000, 4000):
        unrelated, needed = walk_cost(n, args.repeats)
        print(f"    N={n:5d}: unrelated read {unrelated:9.1f} us ({unrelated / n:.3f} us/entry), "
              f"read needing all {needed:9.1f} us ({needed / n:.3f} us/entry)")

    print("(c) time-step loop (4 parallel_for + 1 parallel_reduce read by the host per step), median seconds:")
    for label, n, steps in (("small", args.small, 400), ("large", args.large, 10)):
        eager, traced = time_step_loops(n, steps, args.repeats)
        print(f"    {label} (n={n}, {steps} steps): eager {eager:.4f} s, traced without fusion {traced:.4f} s, "
              f"overhead {100.0 * (traced - eager) / eager:+.1f}%  "
              f"({(traced - eager) / (steps * 5) * 1e6:+.1f} us per call)")


if __name__ == "__main__":
    main()
