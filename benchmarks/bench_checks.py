"""What kernel fault checks cost: the integer-division check (always compiled) and KFUSE_BOUNDS_CHECK=1.

Kernels: NSTREAM's triad (``examples/nstream.py``), and ExaMiniMD's force kernel ``lj_force`` and neighbour
search ``build_neighbors`` (``examples/examinimd``, after one neighbour build of an fcc lattice). Every
variant of a kernel is compiled in this one process and the variants are launched in turn, ``--repeats``
rounds; a row gives the median C++-measured time of one launch (Kokkos launch + fence) and its ratio to
the row's baseline (median of the per-round ratios, so slow phases of the shared machine hit both sides).

Variants: "no checks" is the kernel's C++ with the checked ``//`` and ``%`` turned back into the plain
helpers (what the division check costs); "division checks" is what kfuse compiles by default; "+ bounds"
is KFUSE_BOUNDS_CHECK=1. nstream and lj_force contain no integer division, so for them the first two are
the same code (checked here), and only the bounds row is shown.

    .venv/bin/python benchmarks/bench_checks.py [--n 4194304] [--cells 16] [--repeats 21]
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))

import kfuse as pk  # noqa: E402
from kfuse.codegen.kernel import generate  # noqa: E402
from kfuse.pipeline import kernel_of  # noqa: E402
from kfuse.runtime.launch import CompiledKernel  # noqa: E402

import nstream  # noqa: E402
from examinimd import Simulation, kernels as K, read  # noqa: E402

_UNCHECKED = ("#define kf_floordiv_checked(a, b, site) kf_floordiv(a, b)\n"
              "#define kf_mod_checked(a, b, site) kf_mod(a, b)\n")


def compiled(fn, n: int, kwargs: dict, bounds_check: bool):
    """A fresh workunit of ``fn`` specialised (and compiled) under the given KFUSE_BOUNDS_CHECK."""
    saved = os.environ.get("KFUSE_BOUNDS_CHECK")
    os.environ["KFUSE_BOUNDS_CHECK"] = "1" if bounds_check else "0"
    try:
        wu = pk.workunit(fn)
        pk.parallel_for(n, wu, **kwargs)
        (prepared,) = wu.specializations.values()
        return kernel_of(prepared), generate(prepared.source, prepared.spec, prepared.name), prepared.spec
    finally:
        if saved is None:
            del os.environ["KFUSE_BOUNDS_CHECK"]
        else:
            os.environ["KFUSE_BOUNDS_CHECK"] = saved


def without_division_checks(generated, spec) -> CompiledKernel:
    """The same kernel with plain ``//`` and ``%`` helpers and no fault record read after the fence."""
    source = re.sub(r"    KfFault kf_fault_seen;\n.*?\n    }\n", "", generated.source, flags=re.S)
    return CompiledKernel(dataclasses.replace(generated, source=_UNCHECKED + source), spec)


def variants(fn, n: int, kwargs: dict) -> dict:
    default, generated, spec = compiled(fn, n, kwargs, bounds_check=False)
    bounds, _, _ = compiled(fn, n, kwargs, bounds_check=True)
    args = tuple(kwargs[name] for name, _ in spec.params)
    if "_checked(" not in generated.source:
        return {"no checks": (default, args), "+ bounds": (bounds, args)}
    plain = without_division_checks(generated, spec)
    return {"no checks": (plain, args), "division checks": (default, args), "+ bounds": (bounds, args)}


def race(kernels: dict, n: int, repeats: int) -> dict:
    """Median seconds per variant, and the median over rounds of each variant's time / the first's."""
    times = {name: [] for name in kernels}
    for round_ in range(repeats + 2):
        for name, (kernel, args) in kernels.items():
            kernel.launch((0, n), args)
            if round_ >= 2:  # two warm-up rounds
                times[name].append(kernel.last_seconds)
    base = next(iter(times.values()))
    return {name: (statistics.median(t), statistics.median(a / b for a, b in zip(t, base)))
            for name, t in times.items()}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=nstream.SIZES["medium"][0], help="nstream array length")
    parser.add_argument("--cells", type=int, default=16, help="ExaMiniMD fcc cells per side")
    parser.add_argument("--repeats", type=int, default=21)
    args = parser.parse_args(argv)

    n = args.n
    triad = dict(A=pk.zeros(n), B=pk.full(n, 2.0), C=pk.full(n, 2.0), scalar=nstream.SCALAR)
    sim = Simulation(read().with_overrides(cells=args.cells))
    nl = sim.neighbors
    nl.build(sim.x)
    lx, ly, lz = sim.box
    force = dict(x=sim.x, f=sim.f, virial=sim.virial, neigh=nl.neigh, num_neigh=nl.num_neigh, lx=lx, ly=ly, lz=lz,
                 cutsq=sim.cutsq, c12=sim.c12, c6=sim.c6)
    (nbx, nby, nbz), (sx, sy, sz) = nl.bins, nl.stencil_start
    search = dict(x=sim.x, bin_of=nl.bin_of, counts=nl.counts, offsets=nl.offsets, packed=nl.packed, neigh=nl.neigh,
                  num_neigh=nl.num_neigh, nbx=nbx, nby=nby, nbz=nbz, sx=sx, sy=sy, sz=sz, lx=lx, ly=ly, lz=lz,
                  cutsq=nl.cutsq, max_neigh=nl.max_neigh)
    subjects = [(f"nstream (n={n})", nstream.nstream.fn, n, triad),
                (f"ExaMiniMD lj_force ({sim.natoms} atoms)", K.lj_force.fn, sim.natoms, force),
                (f"ExaMiniMD build_neighbors ({sim.natoms} atoms)", K.build_neighbors.fn, sim.natoms, search)]
    kernels = [(title, n_, variants(fn, n_, kw)) for title, fn, n_, kw in subjects]  # compile all before timing

    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'kernel':44s} {'variant':16s} {'median ms':>10s} {'vs first':>9s}")
    for title, n_, kernel_variants in kernels:
        for name, (seconds, ratio) in race(kernel_variants, n_, args.repeats).items():
            print(f"{title:44s} {name:16s} {seconds * 1e3:10.3f} {ratio:9.3f}")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"({args.repeats} rounds, variants launched in turn; C++-measured launch + fence)")


if __name__ == "__main__":
    main()
