"""A first flush that needs K new kernels, compiled one by one or together (``pipeline.compile_ahead``).

A stencil chain of K calls (each reads its neighbours' input, so every call is its own group) is traced
and read once, in a fresh process with an empty temporary cache (the precompiled header and Kokkos's
runtime library are built before the clock starts), once with compile_ahead switched off and once on.
Pin the CPUs to compare machines: ``taskset -c 0,1`` gives it two.

    .venv/bin/python benchmarks/bench_compile_ahead.py [--kernels 8] [--repeats 2]
"""
from __future__ import annotations

import argparse
import importlib
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

CHAIN = """@pk.workunit
def w{k}(i: int, x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    y[i] = x[i - 1] * {k}.5 + x[i + 1]
"""


def one_flush(kernels: int, ahead: bool) -> float:
    """Seconds for the first flush of the chain in this process (run in a child, see ``main``)."""
    import kfuse as pk
    from kfuse.backends import kokkos

    if not ahead:
        kokkos.KokkosBackend.compile_ahead = lambda self, rendered: None
    folder = tempfile.mkdtemp()
    with open(os.path.join(folder, "chain.py"), "w") as f:
        f.write("import kfuse as pk\n" + "".join(CHAIN.format(k=k) for k in range(kernels)))
    sys.path.insert(0, folder)
    chain = importlib.import_module("chain")
    pk.initialize()
    pk.enable_fusion()
    views = [pk.View(64) for _ in range(kernels + 1)]
    start = time.perf_counter()
    for k in range(kernels):
        pk.parallel_for(pk.RangePolicy(1, 63), getattr(chain, f"w{k}"), x=views[k], y=views[k + 1])
    np.asarray(views[-1])
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--child", choices=("sequential", "ahead"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(one_flush(args.kernels, args.child == "ahead"))
        return
    cpus = len(os.sched_getaffinity(0))
    print(f"first flush of {args.kernels} new kernels, {cpus} CPUs, load average {os.getloadavg()[0]:.1f}")
    for _ in range(args.repeats):
        for mode in ("sequential", "ahead"):
            with tempfile.TemporaryDirectory() as cache:
                env = dict(os.environ, KFUSE_CACHE_DIR=cache)
                out = subprocess.run([sys.executable, __file__, "--kernels", str(args.kernels), "--child", mode],
                                     env=env, capture_output=True, text=True, check=True).stdout
            print(f"  {mode:10} {float(out.split()[-1]):6.2f} s")


if __name__ == "__main__":
    main()
