"""Host time of a captured replay on a GPU's launch path: on this machine's stand-in GPU, or with ``--device`` on the
default space's real one.

On a GPU, a captured function's replay (kfuse/capturing.py) is host work: checks, new result memory, argument
buffers, launches the device queues. Everything before its first launch is time the device waits for. The stand-in
GPU of tests/conftest.py (``stand_in_gpu``: kernels launch with device pointers into buffers kfuse cannot see,
and run on the host) takes that path without a GPU. For each peers workload (kfuse/bench/peers.py; smoke sizes, or
with ``--device`` the GPU sizes), settled and fused, this prints medians in microseconds: from the call to its first
launch; Python inside the launches (mirror checks, argument buffers) and their C calls (Kokkos and the device's
launch; on the stand-in, the kernels run there too); Python after the last launch (the next replay's memory, the
result); the whole call; the fence after it (on a device, the kernels still running); and the whole replay with
its fence. Host timings move between runs and hosts (README, "Stop 45": up to 2x between runs of one code here,
and between the first and later workloads of one process on a GPU host), so alternate with the code compared:

    KFUSE_NUM_THREADS=1 .venv/bin/python benchmarks/bench_replay_host.py [--workloads gaussian_nb,mvt] [--replays 1001]
    KFUSE_DEFAULT_SPACE=Cuda python benchmarks/bench_replay_host.py --device [--workloads gaussian_nb]
"""
from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import pytest  # noqa: E402
from conftest import install_fake_cuda, stand_in_gpu  # noqa: E402

import kfuse as pk  # noqa: E402
from kfuse.bench import peers  # noqa: E402
from kfuse.bench.measure import until_settled  # noqa: E402
from kfuse.runtime import launch  # noqa: E402

COLUMNS = ("to the first launch", "Python in launches", "C calls", "after the last launch", "call", "fence",
           "replay + fence")


def timed(go, replays: int) -> tuple:
    """Medians (us) over ``replays`` replays, in ``COLUMNS``' order, and the launches a replay makes."""
    stamps, in_c = [], []
    real = launch.CompiledKernel.launch

    def noted(kernel, *args, **kwargs):
        stamps.append(time.perf_counter_ns())
        try:
            return real(kernel, *args, **kwargs)
        finally:
            stamps.append(time.perf_counter_ns())

    def entry_timed(fn):
        def entry(*args):
            start = time.perf_counter_ns()
            try:
                return fn(*args)
            finally:
                in_c.append(time.perf_counter_ns() - start)
        return entry

    kernels = [(k, k._fn, k._queued) for k in launch._loaded]
    rows = []
    launch.CompiledKernel.launch = noted
    for kernel, fn, queued in kernels:
        kernel._fn, kernel._queued = entry_timed(fn), queued and entry_timed(queued)
    try:
        for _ in range(replays):
            stamps.clear()
            in_c.clear()
            start = time.perf_counter_ns()
            go()
            returned = time.perf_counter_ns()
            pk.fence()
            fenced = time.perf_counter_ns()
            inside = sum(stamps[k + 1] - stamps[k] for k in range(0, len(stamps), 2))
            rows.append((stamps[0] - start, inside - sum(in_c), sum(in_c), returned - stamps[-1], returned - start,
                         fenced - returned, fenced - start, len(stamps) // 2))
    finally:
        launch.CompiledKernel.launch = real
        for kernel, fn, queued in kernels:
            kernel._fn, kernel._queued = fn, queued
    return tuple(statistics.median(r[k] for r in rows) / 1e3 for k in range(len(COLUMNS))), rows[0][-1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", default="nstream,babelstream,mvt,gaussian,gaussian_nb,gaussian_nb_kernels")
    ap.add_argument("--replays", type=int, default=1001)
    ap.add_argument("--device", action="store_true", help="the default space's GPU, at the peers' GPU sizes")
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}; KFUSE_NUM_THREADS={os.environ.get('KFUSE_NUM_THREADS')}; "
          f"{'the device' if args.device else 'the stand-in GPU'}; median of {args.replays} replays, us")
    print("| workload | launches | " + " | ".join(COLUMNS) + " |")
    print("|---" * (len(COLUMNS) + 2) + "|")
    with contextlib.ExitStack() as stack:
        if not args.device:
            install_fake_cuda(stack.enter_context(pytest.MonkeyPatch.context()))
            stack.enter_context(stand_in_gpu())
        for name in args.workloads.split(","):
            _, _, captured = peers.WORKLOADS[name][0](peers.SIZES["gpu" if args.device else "smoke"][name])
            pk.enable_fusion()
            try:
                def run():
                    captured()
                    pk.fence()
                until_settled(run)
                for _ in range(50):
                    run()
                medians, launches = timed(captured, args.replays)
            finally:
                pk.disable_fusion()
            print(f"| {name} | {launches} | " + " | ".join(f"{m:.1f}" for m in medians) + " |")


if __name__ == "__main__":
    main()
