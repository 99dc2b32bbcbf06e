"""A peers workload's captured replay (kfuse/bench/peers.py, ``pk.capture``) alone: the wall time of a replay and
the time of each of its kernels, launch and fence included (``launch.profile`` makes each launch wait). Quicker
than bench_peer_parts.py (no eager or fused runs to compile first), for comparing code generation settings:

    KFUSE_DEFAULT_SPACE=Cuda python benchmarks/bench_captured_kernels.py gaussian_nb [--repeats 31] [--size medium]
    KFUSE_DEFAULT_SPACE=Cuda KFUSE_OPT_FLAGS="-O3 -DKF_FEW_INDICES=0" python benchmarks/bench_captured_kernels.py ...
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import kfuse as pk  # noqa: E402
from kfuse import spaces  # noqa: E402
from kfuse.bench import peers  # noqa: E402
from kfuse.runtime import launch  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload", choices=peers.WORKLOADS)
    parser.add_argument("--repeats", type=int, default=31)
    parser.add_argument("--size", help="the workload's size (peers.SIZES' form); default: the peers bench's")
    args = parser.parse_args()
    size = peers.SIZES["gpu" if spaces.on_device(pk.get_default_space().value) else "host"][args.workload]
    if args.size:
        size = type(size)(args.size)
    _, _, captured = peers.WORKLOADS[args.workload][0](size)
    pk.enable_fusion()
    for _ in range(5):
        captured()
        pk.fence()
    walls = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        captured()
        pk.fence()
        walls.append(time.perf_counter() - start)
    kernels: dict = {}
    for _ in range(9):
        launch.profile = []
        captured()
        pk.fence()
        for name, seconds, *_ in launch.profile:
            kernels.setdefault(name, []).append(seconds)
        launch.profile = None
    print(f"{args.workload}: captured replay {statistics.median(walls) * 1e3:.3f} ms (median of {args.repeats}, "
          f"min {min(walls) * 1e3:.3f})")
    for name, times in kernels.items():
        print(f"  {name[:72]:72s} {statistics.median(times) * 1e3:.4f} ms  x{len(times) // 9}")


if __name__ == "__main__":
    main()
