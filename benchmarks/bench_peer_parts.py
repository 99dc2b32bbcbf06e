"""Where the peers bench's workloads spend their time in kfuse (kfuse/bench/peers.py): per workload, eager, fused
(settled) and captured (``pk.capture``), the run's wall time, its kernels' C++-timed seconds (launch and fence),
launches, and the copies between host and device from ``pk.stats()``; medians, with the kernels that took longest.
The rest of the wall time is Python. On a GPU this is the first thing to run before changing anything.

    KFUSE_DEFAULT_SPACE=Cuda python benchmarks/bench_peer_parts.py [--workloads nstream,gaussian] [--repeats 7]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import kfuse as pk  # noqa: E402
from kfuse import spaces  # noqa: E402
from kfuse.bench import peers  # noqa: E402
from kfuse.bench.measure import until_settled  # noqa: E402
from kfuse.runtime import launch  # noqa: E402


def parts(go, fused: bool, repeats: int) -> str:
    def run():
        go()
        pk.fence()
    if fused:
        pk.enable_fusion()
    try:
        until_settled(run) if fused else run()
        rows = []
        for _ in range(repeats):
            profile = launch.profile = []
            pk.reset_stats()
            start = time.perf_counter()
            run()
            rows.append((time.perf_counter() - start, sum(entry[1] for entry in profile), profile, pk.stats()))
            launch.profile = None
    finally:
        pk.disable_fusion()
    rows.sort(key=lambda row: row[0])
    wall, kernels, profile, stats = rows[len(rows) // 2]
    longest: dict = {}
    for entry in profile:
        longest[entry[0]] = longest.get(entry[0], 0.0) + entry[1]
    top = ", ".join(f"{name} {seconds * 1e3:.3f}" for name, seconds in
                    sorted(longest.items(), key=lambda item: -item[1])[:3])
    return (f"wall {wall * 1e3:8.3f} ms  kernels {kernels * 1e3:8.3f} ms  launches {len(profile):4d}  "
            f"to device {stats['bytes_to_device'] / 1e6:.1f} MB, to host {stats['bytes_to_host'] / 1e6:.1f} MB  "
            f"[{top}]  median of {repeats}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default=",".join(peers.WORKLOADS))
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    space = pk.get_default_space().value
    sizes = peers.SIZES["gpu" if spaces.on_device(space) else "host"]
    print(f"space {space}; sizes {sizes}")
    for name in args.workloads.split(","):
        go, _, go_captured = peers.WORKLOADS[name][0](sizes[name])
        for mode, run, fused in (("eager", go, False), ("fused", go, True), ("captured", go_captured, True)):
            if run is not None:
                print(f"{name:12} {mode:8}  {parts(run, fused, args.repeats)}", flush=True)


if __name__ == "__main__":
    main()
