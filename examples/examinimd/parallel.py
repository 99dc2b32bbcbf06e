"""The LJ melt over MPI ranks: spatial domain decomposition, ghost atoms, atom migration, global thermo.

The box is cut into a 3-D grid of sub-boxes, one per rank (``MPI.Compute_dims``). A rank holds its own atoms
in rows [0, nlocal) of its Views and ghost atoms in rows [nlocal, nlocal + nghost): copies of the atoms of
other ranks within the neighbour cutoff of its sub-box, placed at their periodic images, so pair distances
along a dimension the grid cuts are plain differences. Along a dimension with one rank the sub-box is the
whole box and the minimum image does it, as in the one-rank program (no ghosts of its own atoms). Each rank
runs its own kfuse runtime (one trace, fused on its own); messages go through ``kfuse.comm``, which runs the
kernels a send needs first and orders kernels after a receive.

Every ``neigh_every`` steps (a rebuild): atoms that left the sub-box move to the neighbour rank (dimension by
dimension, so a diagonal move takes two hops), every rank wraps its atoms into the box, the ghosts are chosen
anew (``borders``: x first, then y including the x ghosts, then z, as LAMMPS and ExaMiniMD do, so edges and
corners arrive; only along dimensions the grid cuts) and the neighbour lists are built. Between rebuilds the
same ghosts get their new positions (``forward``): per cut dimension one kernel packs them, with the periodic
shift, into the two messages (down and up) that ``kfuse.comm.sendrecv`` exchanges, and another unpacks the
neighbours' messages into the ghost rows of ``x`` (on a GPU only messages cross to the host and back, never the
whole of ``x``). Thermo sums are reduced with
one ``allreduce`` of three numbers. Choosing the atoms to send and migrating them (every 20 steps) are NumPy
on the host, where the messages go anyway.

Each rank makes only the lattice of its sub-box, at the coordinates of the whole lattice, so positions and
velocity draws are the one-rank run's bit for bit; the momentum removal and the scaling to T add over the
ranks, so velocities differ from one rank's by rounding.
"""
from __future__ import annotations

import math
import os

import numpy as np

import kfuse as pk
from kfuse import comm as kcomm
from kfuse.spaces import on_device

from . import kernels as K
from .atoms import fcc_positions
from .neighbor import NeighborList
from .simulation import Simulation


class Halo:
    """The ghost messages of one cut dimension: rows [0, split) of ``buf`` go to the lower neighbour, the rest to
    the upper, each moved by its periodic shift; the upper neighbour's message fills rows [0, counts[0]) of
    ``recv``, the lower's the rest, and both land in x from row ``first`` on."""

    def __init__(self, dim: int, lower: int, upper: int, shifts: list):
        self.dim, self.dest, self.source = dim, (lower, upper), (upper, lower)
        self.shifts = pk.View((2, 3), pk.double)
        self.shifts[:] = shifts
        self.send = pk.View(0, pk.int32)  # rows of x whose positions go out
        self.split, self.counts, self.first = 0, (0, 0), 0
        self.buf = pk.View((0, 3), pk.double)  # both messages out
        self.recv = pk.View((0, 3), pk.double)  # both messages in
        self.parts = ()  # (buf part, recv part) per direction: subviews made once per rebuild

    def resize(self, rows: list, counts: tuple, first: int) -> None:
        """New lists: ``rows`` of x to send down and up, ``counts`` of ghosts to come from above and below."""
        self.send = pk.View(len(rows[0]) + len(rows[1]), pk.int32)
        self.send[:] = np.concatenate(rows)
        self.split, self.counts, self.first = len(rows[0]), counts, first
        self.buf = pk.View((self.send.extent(0), 3), pk.double)
        self.recv = pk.View((sum(counts), 3), pk.double)
        self.parts = ((self.buf[:self.split], self.recv[:counts[0]]), (self.buf[self.split:], self.recv[counts[0]:]))


class ParallelSimulation(Simulation):
    """One rank's part of the LJ system; ``comm`` has every rank of the run (more than one)."""

    def __init__(self, inp, velocities: str, comm):
        MPI = kcomm.mpi()
        self.grid = tuple(MPI.Compute_dims(comm.Get_size(), 3))
        self.comm = comm.Create_cart(self.grid, periods=[True] * 3)
        self.coords = tuple(self.comm.Get_coords(self.comm.Get_rank()))
        self.cut = tuple(g > 1 for g in self.grid)  # dimensions split over ranks: ghosts there, no minimum image
        super().__init__(inp, velocities)  # calls initial_state, place_atoms, then neighbor_list

    # --- what this rank holds -----------------------------------------------------------------------
    def _edge(self, dim: int, c: int) -> float:
        """Where sub-box ``c`` starts along ``dim``; both ranks at an edge compute the same number."""
        return self.box[dim] if c == self.grid[dim] else self.box[dim] * c / self.grid[dim]

    def initial_state(self, a: float, generator: str) -> tuple:
        """This rank's sub-box, and the lattice sites in it: only the cells around it are made, at the same
        coordinates as in the whole lattice, so the velocity draws (a function of the position) are the one-rank
        run's too; removing the momentum and scaling to T add over the ranks."""
        self.lo = tuple(self._edge(d, self.coords[d]) for d in range(3))
        self.hi = tuple(self._edge(d, self.coords[d] + 1) for d in range(3))
        self.ghost_cutoff = self.input.coeff.cutoff + self.input.skin
        for d in range(3):
            if self.cut[d] and self.hi[d] - self.lo[d] < self.ghost_cutoff:
                raise ValueError(f"sub-box side {self.hi[d] - self.lo[d]:g} along {'xyz'[d]} (grid "
                                 f"{'x'.join(map(str, self.grid))}) is below the neighbour cutoff "
                                 f"{self.ghost_cutoff:g}: use fewer ranks or more cells")
        first = tuple(max(0, int(lo // a) - 1) for lo in self.lo)
        last = tuple(min(c, int(hi // a) + 2) for c, hi in zip(self.input.cells, self.hi))
        block = fcc_positions(tuple(e - f for f, e in zip(first, last)), a, first)
        mine = np.all((block >= self.lo) & (block < self.hi), axis=1)
        return self.thermalised(block[mine], a, generator, total=self._total)

    def _total(self, s):
        """``s`` (a number or an array of them) added over the ranks."""
        sums = kcomm.allreduce(np.ravel(s), comm=self.comm)
        return sums.reshape(np.shape(s)) if np.ndim(s) else sums[0]

    def place_atoms(self, positions: np.ndarray, velocities: np.ndarray) -> None:
        n = self.nlocal = len(positions)
        self.nghost = self.arrived = 0  # ghosts now; atoms that migrated here so far
        self.image_box = tuple(math.inf if c else b for c, b in zip(self.cut, self.box))  # min_image(d, inf) is d
        self.x = pk.View((n, 3), pk.double)
        self.x[:] = positions
        self.v = pk.View((n, 3), pk.double)
        self.v[:] = velocities
        self.atype = pk.View(n, pk.int32)
        self.atype.fill(self.input.atom_type)
        self.f = pk.View((n, 3), pk.double)
        self.virial = pk.View(n, pk.double)
        self.halos = []
        for d in (d for d in range(3) if self.cut[d]):
            # an image sent down from the lowest sub-box arrives above the highest one, and the other way round
            shifts = [[0.0] * 3, [0.0] * 3]
            if self.coords[d] == 0:
                shifts[0][d] = self.box[d]
            if self.coords[d] == self.grid[d] - 1:
                shifts[1][d] = -self.box[d]
            self.halos.append(Halo(d, *self.comm.Shift(d, 1), shifts))

    def neighbor_list(self, cutoff: float, density: float) -> NeighborList:
        gc = self.ghost_cutoff
        region = tuple(h - lo + 2 * gc if c else h - lo for c, lo, h in zip(self.cut, self.lo, self.hi))
        origin = tuple(lo - gc if c else lo for c, lo in zip(self.cut, self.lo))
        return NeighborList(self.nlocal, region, cutoff, density, origin, periodic=tuple(not c for c in self.cut))

    def _room(self, rows: int, *names: str) -> None:
        """Grow the Views ``names`` to at least ``rows`` rows (keeping their contents), with room to spare."""
        for name in names:
            view = getattr(self, name)
            if view.extent(0) < rows:
                view.resize(0, rows + rows // 4 + 16)

    # --- communication ------------------------------------------------------------------------------
    def communicate(self, rebuild: bool) -> None:
        if rebuild:
            self.migrate()
            self.wrap()
            self.borders()
        else:
            self.forward()

    def _exchange_counts(self, count: int, dest: int, source: int) -> int:
        got = np.zeros(1, np.int64)
        kcomm.sendrecv(np.array([count], np.int64), dest, got, source, comm=self.comm)
        return int(got[0])

    def migrate(self) -> None:
        """Send the atoms that left the sub-box (positions not yet wrapped) to the neighbour they moved towards,
        and take in the neighbours' (an atom moves less than a sub-box between rebuilds)."""
        for d in (d for d in range(3) if self.cut[d]):  # elsewhere wrapping keeps every atom here
            n = self.nlocal
            x, v, t = self.x.copy()[:n], self.v.copy()[:n], self.atype.copy()[:n]
            width = self.hi[d] - self.lo[d]
            if np.any((x[:, d] < self.lo[d] - width) | (x[:, d] >= self.hi[d] + width)):
                raise RuntimeError(f"an atom of rank {self.comm.Get_rank()} moved more than a sub-box along "
                                   f"{'xyz'[d]} between neighbour list rebuilds")
            below, above = x[:, d] < self.lo[d], x[:, d] >= self.hi[d]
            stay = ~(below | above)
            kept = [np.concatenate([x[stay], v[stay], t[stay, None]], axis=1)]
            lower, upper = self.comm.Shift(d, 1)
            for leaving, dest, source in ((below, lower, upper), (above, upper, lower)):
                out = np.ascontiguousarray(np.concatenate([x[leaving], v[leaving], t[leaving, None]], axis=1))
                into = np.empty((self._exchange_counts(len(out), dest, source), 7))
                kcomm.sendrecv(out, dest, into, source, comm=self.comm)
                kept.append(into)
                self.arrived += len(into)
            atoms = np.concatenate(kept)
            self.nlocal = n = len(atoms)
            self._room(n, "x", "v", "f", "atype", "virial")
            self.x[:n] = atoms[:, 0:3]
            self.v[:n] = atoms[:, 3:6]
            self.atype[:n] = atoms[:, 6]

    def borders(self) -> None:
        """Choose the ghosts: per cut dimension, the atoms (own, and ghosts from earlier dimensions) within the
        neighbour cutoff of each face of the sub-box, sent to the rank beyond it; then their positions."""
        gc = self.ghost_cutoff
        self.nghost = 0
        for halo in self.halos:
            d = halo.dim
            column = self.x.copy()[:self.nlocal + self.nghost, d]  # not the ghosts this dimension brings
            rows = [np.nonzero(column < self.lo[d] + gc)[0], np.nonzero(column >= self.hi[d] - gc)[0]]
            counts = tuple(self._exchange_counts(len(r), dest, source)
                           for r, dest, source in zip(rows, halo.dest, halo.source))
            halo.resize(rows, counts, self.nlocal + self.nghost)
            self.nghost += sum(counts)
            self._room(self.nlocal + self.nghost, "x")
            self.send_positions(halo)

    def forward(self) -> None:
        """New positions for the ghosts, along the lists the last rebuild chose."""
        for halo in self.halos:
            self.send_positions(halo)

    def send_positions(self, halo: Halo) -> None:
        """One dimension's ghost positions: one kernel packs both messages (so the first send's barrier runs it
        and the second finds nothing pending), two exchanges, one kernel unpacks both into the ghost rows."""
        pk.parallel_for("pack_positions", halo.send.extent(0), K.pack_positions, x=self.x, send=halo.send,
                        buf=halo.buf, shifts=halo.shifts, split=halo.split)
        for (out, into), dest, source in zip(halo.parts, halo.dest, halo.source):
            kcomm.sendrecv(out, dest, into, source, comm=self.comm)
        pk.parallel_for("unpack_positions", halo.recv.extent(0), K.unpack_positions, x=self.x, buf=halo.recv,
                        first=halo.first)

    def ghost_bytes_sent(self) -> int:
        """Bytes of ghost positions this rank sends per step (in ``2 * len(halos)`` messages)."""
        return sum(halo.send.extent(0) for halo in self.halos) * 3 * 8

    # --- the rest of a step -------------------------------------------------------------------------
    def build_neighbors(self) -> None:
        self.neighbors.build(self.x, self.nlocal, self.nlocal + self.nghost)

    def sums(self) -> tuple:
        """The system's kinetic energy, pair energy and virial sum: each rank's, added over the ranks."""
        local = (self.kinetic_energy(), self.potential_energy(), self.virial_sum())
        return tuple(float(s) for s in kcomm.allreduce(local, comm=self.comm))

    def timing_report(self) -> str:
        gpu = on_device(pk.get_default_space().value)
        where = (f"one GPU per rank (CUDA_VISIBLE_DEVICES {os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')} on "
                 "rank 0)" if gpu else "host")
        return (super().timing_report() + f"\n  MPI: {self.comm.Get_size()} ranks, process grid "
                f"{'x'.join(map(str, self.grid))}; rank 0 holds {self.nlocal} atoms and {self.nghost} ghosts "
                f"({self.arrived} atoms migrated in), sends {self.ghost_bytes_sent()} bytes of ghost positions per "
                f"step in {2 * len(self.halos)} messages; kernels on {where}, messages staged through host memory")
