"""Command line: ``[mpiexec -n R] python examples/examinimd/main.py [INPUT] --cells N|NX,NY,NZ --steps S
[--velocities G] [--fusion]``.

Prints the thermo table (step, temperature, potential energy and total energy per atom, pressure),
then the time per phase and per step; with ``--fusion`` also what the fuser did (``pk.explain()``).
Under mpiexec with several ranks the box is split over them (parallel.py) and rank 0 prints; one rank, or
no mpi4py installed, runs the one-process program.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # make the examinimd package importable

import kfuse as pk  # noqa: E402
from kfuse import comm as kcomm  # noqa: E402
from kfuse.spaces import on_device  # noqa: E402

from examinimd import DEFAULT_INPUT, run_simulation  # noqa: E402
from examinimd.atoms import VELOCITY_GENERATORS  # noqa: E402


def _gpus() -> int:
    """The node's NVIDIA GPUs, counted without starting CUDA (which would fix the visible devices): the driver
    lists one folder per GPU; 1 when it cannot tell."""
    try:
        return max(1, len(os.listdir("/proc/driver/nvidia/gpus")))
    except OSError:
        return 1


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="ExaMiniMD-style Lennard-Jones MD on kfuse kernels")
    parser.add_argument("input", nargs="?", default=str(DEFAULT_INPUT), help="LAMMPS-style input (default: in.lj)")
    parser.add_argument("--cells", type=_cells, help="fcc unit cells per side, N or NX,NY,NZ (overrides the input's "
                        "region)")
    parser.add_argument("--steps", type=int, help="time steps (overrides the input's run)")
    parser.add_argument("--velocities", choices=VELOCITY_GENERATORS, default="lammps",
                        help="loop geom generator: lammps (as ExaMiniMD, the default) or hash (lattice-site hash)")
    parser.add_argument("--fusion", action="store_true", help="trace and fuse kernels (pk.fusion())")
    args = parser.parse_args(argv)

    world = _world()
    if world is not None and world.Get_size() > 1 and on_device(pk.get_default_space().value):
        # One GPU per rank (ranks share GPUs round robin when there are more ranks than GPUs): the CUDA runtime,
        # started by the first kernel, then sees only this rank's device.
        os.environ.setdefault("CUDA_VISIBLE_DEVICES", str(kcomm.local_rank(world) % _gpus()))
    printing = world is None or world.Get_rank() == 0
    sims = []
    run_simulation(args.input, cells=args.cells, steps=args.steps, fusion=args.fusion,
                   out=sys.stdout if printing else None, simulation=sims, velocities=args.velocities, comm=world)
    if not printing:
        return 0
    sim = sims[0]
    print(sim.timing_report())
    if args.fusion:
        print("  (with fusion, kernels run when results are read, so their time lands in the phase that reads)")
        try:
            report = pk.explain()
        except Exception:  # the fuser's report is optional: print nothing when it is unavailable
            report = None
        if report:
            print(report)
    return 0


def _cells(text: str):
    """``--cells``: ``N``, or ``NX,NY,NZ``."""
    try:
        sides = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected N or NX,NY,NZ (integers), got {text!r}") from None
    if len(sides) not in (1, 3):
        raise argparse.ArgumentTypeError(f"expected N or NX,NY,NZ, got {len(sides)} numbers")
    return sides[0] if len(sides) == 1 else sides


def _world():
    """MPI's COMM_WORLD (one rank without mpiexec), or None when mpi4py is not installed."""
    try:
        return kcomm.world()
    except ImportError:
        return None


if __name__ == "__main__":
    sys.exit(main())
