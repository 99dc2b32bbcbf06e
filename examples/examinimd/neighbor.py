"""Binned full neighbour list (``neighbor <skin> bin``), built from the kernels in ``kernels.py``.

Build: count atoms per bin with atomics, prefix-sum the counts into offsets, scatter atoms into one
packed array, order each bin, then let each atom search the 3x3x3 bins around its own.
"""
from __future__ import annotations

import math

import kfuse as pk

from . import kernels as K


class NeighborList:
    """Bins of side >= the neighbour cutoff, and a (N, max_neigh) table of neighbour indices.

    Each j appears once, found by its minimum-image distance. That stays exact for the force even when the
    neighbour cutoff exceeds half the box, as long as the force cutoff does not (the driver checks it).
    """

    def __init__(self, natoms: int, box: tuple, cutoff: float, density: float):
        self.natoms = natoms
        self.box = tuple(float(b) for b in box)
        self.cutsq = cutoff * cutoff
        self.bins = tuple(max(1, int(b // cutoff)) for b in box)
        self.stencil_start = tuple(-1 if n >= 3 else 0 for n in self.bins)
        nbins = self.bins[0] * self.bins[1] * self.bins[2]
        self.counts = pk.View(nbins, pk.int32)
        self.offsets = pk.View(nbins, pk.int32)
        self.packed = pk.View(natoms, pk.int32)
        self.bin_of = pk.View(natoms, pk.int32)
        self.slot = pk.View(natoms, pk.int32)
        self.num_neigh = pk.View(natoms, pk.int32)
        # Expected neighbours: density times the cutoff sphere's volume; room for fluctuations on top.
        expected = density * 4.0 / 3.0 * math.pi * cutoff ** 3
        self.max_neigh = min(natoms, int(1.3 * expected) + 8)
        self.neigh = pk.View((natoms, self.max_neigh), pk.int32)
        self.builds = 0

    def build(self, x) -> None:
        """Rebuild from positions ``x`` (already wrapped into the box)."""
        n = self.natoms
        nbx, nby, nbz = self.bins
        lx, ly, lz = self.box
        pk.parallel_for("zero_counts", self.counts.extent(0), K.zero_counts, counts=self.counts)
        pk.parallel_for("bin_atoms", n, K.bin_atoms, x=x, bin_of=self.bin_of, slot=self.slot, counts=self.counts,
                        nbx=nbx, nby=nby, nbz=nbz, lx=lx, ly=ly, lz=lz)
        pk.parallel_scan("bin_offsets", self.counts.extent(0), K.bin_offsets, counts=self.counts,
                         offsets=self.offsets)
        pk.parallel_for("fill_bins", n, K.fill_bins, bin_of=self.bin_of, slot=self.slot, offsets=self.offsets,
                        packed=self.packed)
        pk.parallel_for("sort_bins", self.counts.extent(0), K.sort_bins, counts=self.counts, offsets=self.offsets,
                        packed=self.packed)
        while True:
            self._search(x)
            overflow = pk.parallel_reduce("count_overflow", n, K.count_overflow, num_neigh=self.num_neigh,
                                          max_neigh=self.max_neigh)
            if int(overflow) == 0:
                break
            self.max_neigh = int(self.num_neigh.data.max()) + 8
            self.neigh = pk.View((n, self.max_neigh), pk.int32)
        self.builds += 1

    def _search(self, x) -> None:
        nbx, nby, nbz = self.bins
        sx, sy, sz = self.stencil_start
        lx, ly, lz = self.box
        pk.parallel_for("build_neighbors", self.natoms, K.build_neighbors, x=x, bin_of=self.bin_of,
                        counts=self.counts, offsets=self.offsets, packed=self.packed, neigh=self.neigh,
                        num_neigh=self.num_neigh, nbx=nbx, nby=nby, nbz=nbz, sx=sx, sy=sy, sz=sz, lx=lx, ly=ly,
                        lz=lz, cutsq=self.cutsq, max_neigh=self.max_neigh)
