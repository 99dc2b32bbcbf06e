"""The time loop of the LJ melt, in ExaMiniMD's order, with thermo output and per-phase timers.

Per step: initial integrate; every ``neigh_every`` steps wrap the atoms into the box and rebuild the
neighbour list; zero the forces and compute them; final integrate; every ``thermo_every`` steps print
temperature, energies per atom and pressure (LJ units, k_B = 1, LAMMPS thermo conventions).
"""
from __future__ import annotations

import contextlib
import math
import time
from typing import NamedTuple

import numpy as np

import kfuse as pk

from . import kernels as K
from .atoms import create_velocities, fcc_positions, geom_uniforms, lattice_constant
from .input import Input, read
from .neighbor import NeighborList

PHASES = ("force", "neighbor", "integrate", "comm", "other")


class Thermo(NamedTuple):
    step: int
    temperature: float
    potential_energy: float  # pair energy per atom
    total_energy: float      # (kinetic + pair) energy per atom
    pressure: float

    def line(self) -> str:
        return (f"{self.step:8d} {self.temperature:.6f} {self.potential_energy:.6f} {self.total_energy:.6f} "
                f"{self.pressure:.6f}")


THERMO_HEADER = "    Step Temp PotEng TotEng Press"


class Simulation:
    """One LJ system: Views for the atoms, the neighbour list, and the step kernels' fixed arguments.

    ``velocities`` picks the ``loop geom`` generator (``atoms.VELOCITY_GENERATORS``): ``"lammps"``
    reproduces ExaMiniMD's initial velocities, ``"hash"`` is a lattice-site hash.
    """

    def __init__(self, inp: Input, velocities: str = "lammps"):
        self.input = inp
        a = lattice_constant(inp.density)
        self.box = tuple(float(c * a) for c in inp.cells)
        cutoff = inp.coeff.cutoff
        if cutoff >= 0.5 * min(self.box):
            raise ValueError(f"pair cutoff {cutoff:g} must be below half the box length ({min(self.box):g}) for "
                             "the minimum-image convention; use more cells")
        n = self.natoms = 4 * math.prod(inp.cells)  # fcc: 4 atoms per cubic cell
        self.volume = self.box[0] * self.box[1] * self.box[2]
        ntypes = max(inp.masses)
        self.mass = pk.View(ntypes + 1, pk.double)  # indexed by the 1-based atom type
        for t, m in inp.masses.items():
            self.mass[t] = m
        self.place_atoms(*self.initial_state(a, velocities))
        c = inp.coeff
        self.cutsq = cutoff * cutoff
        self.c12, self.c6 = 48.0 * c.epsilon * c.sigma ** 12, 24.0 * c.epsilon * c.sigma ** 6
        self.e12, self.e6 = 4.0 * c.epsilon * c.sigma ** 12, 4.0 * c.epsilon * c.sigma ** 6
        sr6_cut = (c.sigma / cutoff) ** 6
        self.eshift = 4.0 * c.epsilon * (sr6_cut * sr6_cut - sr6_cut) if inp.shift else 0.0
        self.dt, self.dtf = inp.dt, 0.5 * inp.dt
        self.neighbors = self.neighbor_list(cutoff + inp.skin, n / self.volume)
        self.timers = dict.fromkeys(PHASES, 0.0)
        self.loop_seconds = 0.0
        self.steps_done = 0

    # --- what a rank holds (one rank: every atom; parallel.py: its own sub-box) ----------------------------
    def initial_state(self, a: float, generator: str) -> tuple:
        """Positions and velocities of the atoms this rank holds (one rank: all): fcc sites, lattice constant
        ``a``, velocities from the ``loop geom`` ``generator``."""
        return self.thermalised(fcc_positions(self.input.cells, a), a, generator)

    def thermalised(self, positions: np.ndarray, a: float, generator: str, total=None) -> tuple:
        """``positions`` and their ``velocity ... loop geom`` velocities (zero without a ``velocity`` command);
        ``total`` adds sums over the ranks (atoms.create_velocities)."""
        inp = self.input
        v = np.zeros((len(positions), 3))
        if inp.temperature is not None:
            uniforms = geom_uniforms(generator, positions, inp.seed, a)
            v = create_velocities(uniforms, np.full(len(positions), inp.masses[inp.atom_type]), inp.temperature,
                                  total)
        return positions, v

    def place_atoms(self, positions: np.ndarray, velocities: np.ndarray) -> None:
        """The atoms' Views from the initial state. ``nlocal`` atoms are integrated; pair distances take the
        minimum image in a periodic box of lengths ``image_box``."""
        n = self.nlocal = len(positions)
        self.image_box = self.box
        self.atype = pk.View(n, pk.int32)
        self.atype.fill(self.input.atom_type)
        self.x = pk.View((n, 3), pk.double)
        self.x[:] = positions
        self.v = pk.View((n, 3), pk.double)
        self.v[:] = velocities
        self.f = pk.View((n, 3), pk.double)
        self.virial = pk.View(n, pk.double)  # per-atom share of sum over pairs of r.F

    def neighbor_list(self, cutoff: float, density: float) -> NeighborList:
        return NeighborList(self.natoms, self.box, cutoff, density)

    # --- the phases of a step ------------------------------------------------------------------------
    def wrap(self) -> None:
        lx, ly, lz = self.box
        pk.parallel_for("wrap_positions", self.nlocal, K.wrap_positions, x=self.x, lx=lx, ly=ly, lz=lz)

    def communicate(self, rebuild: bool) -> None:
        """Periodic boundaries before the forces: at a rebuild, wrap the atoms into the box ("exchange with
        ourselves"); the minimum image does the rest."""
        if rebuild:
            self.wrap()

    def build_neighbors(self) -> None:
        self.neighbors.build(self.x)

    def compute_forces(self) -> None:
        nl = self.neighbors
        lx, ly, lz = self.image_box
        pk.parallel_for("zero_forces", self.nlocal, K.zero_forces, f=self.f, virial=self.virial)
        pk.parallel_for("lj_force", self.nlocal, K.lj_force, x=self.x, f=self.f, virial=self.virial, neigh=nl.neigh,
                        num_neigh=nl.num_neigh, lx=lx, ly=ly, lz=lz, cutsq=self.cutsq, c12=self.c12, c6=self.c6)

    def initial_integrate(self) -> None:
        pk.parallel_for("initial_integrate", self.nlocal, K.initial_integrate, x=self.x, v=self.v, f=self.f,
                        atype=self.atype, mass=self.mass, dt=self.dt, dtf=self.dtf)

    def final_integrate(self) -> None:
        pk.parallel_for("final_integrate", self.nlocal, K.final_integrate, v=self.v, f=self.f, atype=self.atype,
                        mass=self.mass, dtf=self.dtf)

    # --- observables ------------------------------------------------------------------------------------
    def kinetic_energy(self):
        return pk.parallel_reduce("kinetic_energy", self.nlocal, K.kinetic_energy, v=self.v, atype=self.atype,
                                  mass=self.mass)

    def potential_energy(self):
        """Total pair energy (not per atom); needs a current neighbour list."""
        nl = self.neighbors
        lx, ly, lz = self.image_box
        return pk.parallel_reduce("lj_energy", self.nlocal, K.lj_energy, x=self.x, neigh=nl.neigh,
                                  num_neigh=nl.num_neigh, lx=lx, ly=ly, lz=lz, cutsq=self.cutsq, e12=self.e12,
                                  e6=self.e6, eshift=self.eshift)

    def temperature(self) -> float:
        return 2.0 * float(self.kinetic_energy()) / (3 * self.natoms - 3)

    def sums(self) -> tuple:
        """Kinetic energy, pair energy and virial sum of the atoms this rank holds."""
        ke = float(self.kinetic_energy())
        pe = float(self.potential_energy())
        return ke, pe, float(self.virial_sum())

    def virial_sum(self):
        return pk.parallel_reduce("sum_virial", self.nlocal, K.sum_values, values=self.virial)

    def thermo(self, step: int) -> Thermo:
        n = self.natoms
        ke, pe, virial = self.sums()
        temp = 2.0 * ke / (3 * n - 3)
        pressure = (n * temp + virial / 3.0) / self.volume
        return Thermo(step, temp, pe / n, pe / n + ke / n, pressure)  # ExaMiniMD's sum: same rounding

    def momentum(self) -> np.ndarray:
        masses = np.asarray(self.mass)[np.asarray(self.atype)]
        return (masses[:, None] * np.asarray(self.v)).sum(axis=0)

    # --- driving ----------------------------------------------------------------------------------------
    def setup(self) -> Thermo:
        """Wrap, build the first neighbour list and forces: the state at step 0."""
        self.communicate(True)
        self.build_neighbors()
        self.compute_forces()
        return self.thermo(0)

    def run(self, steps: int | None = None, out=None) -> list[Thermo]:
        """Set up and run ``steps`` steps (default: the input's ``run``); returns every thermo row."""
        inp = self.input
        steps = inp.steps if steps is None else steps
        every = inp.thermo_every
        rows = [self.setup()]
        if out is not None:
            print(THERMO_HEADER, file=out)
            print(rows[0].line(), file=out)
        timers = self.timers
        clock = time.perf_counter
        loop_start = clock()
        for step in range(1, steps + 1):
            t0 = clock()
            self.initial_integrate()
            t1 = clock()
            timers["integrate"] += t1 - t0
            rebuild = step % inp.neigh_every == 0
            self.communicate(rebuild)
            t2 = clock()
            timers["comm"] += t2 - t1
            if rebuild:
                self.build_neighbors()
                t1 = clock()
                timers["neighbor"] += t1 - t2
            else:
                t1 = t2
            self.compute_forces()
            t2 = clock()
            timers["force"] += t2 - t1
            self.final_integrate()
            t3 = clock()
            timers["integrate"] += t3 - t2
            if (every and step % every == 0) or step == steps:
                rows.append(self.thermo(step))
                if out is not None:
                    print(rows[-1].line(), file=out)
            timers["other"] += clock() - t3
        pk.fence()
        self.loop_seconds += clock() - loop_start
        self.steps_done += steps
        return rows

    def timing_report(self) -> str:
        """Per-phase seconds, their share, and per-step figures of the time loop (ExaMiniMD's summary)."""
        total = self.loop_seconds
        steps = max(self.steps_done, 1)
        lines = [f"Loop time {total:.4f} s for {self.steps_done} steps with {self.natoms} atoms "
                 f"({1e3 * total / steps:.3f} ms/step, {self.natoms * self.steps_done / total:.4g} atom-steps/s)"
                 if total > 0 else "Loop time 0 s"]
        for phase in PHASES:
            sec = self.timers[phase]
            share = 100.0 * sec / total if total > 0 else 0.0
            lines.append(f"  {phase:<10s} {sec:9.4f} s  {share:5.1f} %  {1e3 * sec / steps:8.3f} ms/step")
        lines.append(f"  neighbour list builds: {self.neighbors.builds}, max neighbours stored per atom: "
                     f"{self.neighbors.max_neigh}")
        return "\n".join(lines)


def run_simulation(input_path=None, cells: int | None = None, steps: int | None = None, fusion: bool = False,
                   out=None, simulation: list | None = None, velocities: str = "lammps", comm=None) -> list[Thermo]:
    """Read the input (default ``in.lj``), apply overrides, run; returns the thermo rows.

    ``fusion=True`` runs the whole simulation inside ``pk.fusion()``. Pass a list as ``simulation`` to get
    the :class:`Simulation` back (for its timers); ``velocities`` as for :class:`Simulation`. With an MPI
    communicator ``comm`` of several ranks, each rank runs its part (parallel.py) and all return the same rows.
    """
    inp = read(input_path).with_overrides(cells=cells, steps=steps)
    ctx = pk.fusion() if fusion else contextlib.nullcontext()
    with ctx:
        if comm is not None and comm.Get_size() > 1:
            from .parallel import ParallelSimulation  # imported here: it builds on this module

            sim = ParallelSimulation(inp, velocities, comm)
        else:
            sim = Simulation(inp, velocities)
        rows = sim.run(out=out)
    if simulation is not None:
        simulation.append(sim)
    return rows
