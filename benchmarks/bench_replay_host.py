"""Host time of a captured replay on a GPU's launch path, run on this machine's stand-in GPU.

On a GPU, a captured function's replay (kfuse/capturing.py) is host work: checks, new result memory, argument
buffers, launches the device queues. Everything before its first launch is time the device waits for. The stand-in
GPU of tests/conftest.py (``stand_in_gpu``: kernels launch with device pointers into buffers kfuse cannot see,
and run on the host) takes that path without a GPU. For each peers workload (kfuse/bench/peers.py, smoke sizes),
settled and fused, this prints the median host time from the call to its first launch and of the whole replay with
its ``pk.fence()`` (which here includes the kernels, run on the host), in microseconds. Run it at one thread, and
alternate with the code you compare (``git stash``):

    KFUSE_NUM_THREADS=1 .venv/bin/python benchmarks/bench_replay_host.py [--workloads gaussian_nb,mvt] [--replays 1001]
"""
from __future__ import annotations

import argparse
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


def timed(go, replays: int) -> tuple:
    """(median us to the first launch, median us of the whole replay and its fence) over ``replays`` replays."""
    first = []
    real = launch.CompiledKernel.launch

    def noted(kernel, *args, **kwargs):
        if not first:
            first.append(time.perf_counter_ns())
        return real(kernel, *args, **kwargs)

    to_first, whole = [], []
    launch.CompiledKernel.launch = noted
    try:
        for _ in range(replays):
            first.clear()
            start = time.perf_counter_ns()
            go()
            pk.fence()
            whole.append(time.perf_counter_ns() - start)
            to_first.append(first[0] - start)
    finally:
        launch.CompiledKernel.launch = real
    return statistics.median(to_first) / 1e3, statistics.median(whole) / 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", default="nstream,babelstream,mvt,gaussian,gaussian_nb,gaussian_nb_kernels")
    ap.add_argument("--replays", type=int, default=1001)
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}; KFUSE_NUM_THREADS={os.environ.get('KFUSE_NUM_THREADS')}; "
          f"median of {args.replays} replays, us")
    print("| workload | to the first launch | whole replay + fence |")
    print("|---|---|---|")
    with pytest.MonkeyPatch.context() as patch:
        install_fake_cuda(patch)
        with stand_in_gpu():
            for name in args.workloads.split(","):
                make = peers.WORKLOADS[name][0]
                _, _, captured = make(peers.SIZES["smoke"][name])
                pk.enable_fusion()
                try:
                    def run():
                        captured()
                        pk.fence()
                    until_settled(run)
                    for _ in range(50):
                        run()
                    to_first, whole = timed(captured, args.replays)
                finally:
                    pk.disable_fusion()
                print(f"| {name} | {to_first:.1f} | {whole:.1f} |")


if __name__ == "__main__":
    main()
