"""What the NPBench subjects share: seeded inputs, the lower-triangle scaling kernel, and the timing CLI."""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import kfuse as pk


def random_matrix(seed: int, *shape) -> np.ndarray:
    """Uniform [0, 1) doubles from a fixed seed: deterministic, and asymmetric so index mix-ups show.
    Read-only, as inputs are: kfuse then keeps delaying (and fusing) the kernels that read them while the
    caller still holds them (a writable array the caller holds could change under a delayed kernel)."""
    return read_only(np.random.default_rng(seed).random(shape))


def read_only(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


def results(*views) -> tuple:
    """The Views as NumPy copies, after one ``pk.fence()``: with fusion on, that runs every pending call in one
    flush, so independent kernels (e.g. mvt's two products) can fuse; reading each View alone would flush only
    the calls it depends on."""
    pk.fence()
    return tuple(np.array(v) for v in views)


@pk.workunit
def scale_lower(i: int, C: pk.View2D[pk.double], beta: pk.double):
    """C[i, :i+1] *= beta (the lower triangle, diagonal included; syrk and syr2k)."""
    for j in range(i + 1):
        C[i][j] = C[i][j] * beta


def time_runs(initialize, run_kfuse, size: str, fusion: bool, repeat: int) -> tuple[float, list[float]]:
    """Seconds of the first call (compiles or cache loads included) and of ``repeat`` later calls."""
    inputs = initialize(size)

    def once() -> float:
        start = time.perf_counter()
        if fusion:
            with pk.fusion():
                run_kfuse(**inputs)  # returns NumPy arrays: every pending kernel has run
        else:
            run_kfuse(**inputs)
        return time.perf_counter() - start

    first = once()
    return first, [once() for _ in range(repeat)]


def main(name: str, sizes: dict, initialize, run_kfuse, argv=None) -> None:
    parser = argparse.ArgumentParser(description=f"NPBench {name} in kfuse: prints wall-clock timings.")
    parser.add_argument("--size", choices=sorted(sizes), default="small")
    parser.add_argument("--fusion", action="store_true", help="trace and fuse (pk.fusion()) instead of eager")
    parser.add_argument("--repeat", type=int, default=5, help="timed calls after the first")
    args = parser.parse_args(argv)
    pk.reset_stats()
    first, times = time_runs(initialize, run_kfuse, args.size, args.fusion, args.repeat)
    counts = pk.stats()
    calls = 1 + args.repeat
    print(f"{name} size={args.size} {sizes[args.size]} mode={'fused' if args.fusion else 'eager'}")
    print(f"  first call {first:.4f} s (compile or cache load included)")
    print(f"  later calls: median {statistics.median(times):.4f} s, min {min(times):.4f} s over {len(times)}")
    print(f"  per call: {counts['kernels_launched'] / calls:.0f} kernel launches "
          f"({counts['fused_kernels_launched'] / calls:.0f} fused), {counts['ops_traced'] / calls:.0f} traced calls")
