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

    By default the region is the periodic box [0, box): bins wrap around and each j appears once, found by its
    minimum-image distance. That stays exact for the force even when the neighbour cutoff exceeds half the box,
    as long as the force cutoff does not (the driver checks it). A rank of a multi-rank run (parallel.py) bins
    origin + [0, box) instead, and along the dimensions that are not ``periodic`` its ghost atoms already are
    the periodic images: there the bins sit inside one empty layer on each side, so the search never wraps,
    and distances are plain.
    """

    def __init__(self, natoms: int, box: tuple, cutoff: float, density: float, origin: tuple = (0.0, 0.0, 0.0),
                 periodic: tuple = (True, True, True)):
        self.box = tuple(float(b) for b in box)
        self.origin = tuple(float(o) for o in origin)
        self.pads = tuple(0 if p else 1 for p in periodic)
        self.image_box = tuple(b if p else math.inf for b, p in zip(self.box, periodic))  # min_image(d, inf) is d
        self.cutsq = cutoff * cutoff
        self.bins = tuple(max(1, int(b // cutoff)) for b in box)
        self.stencil_start = tuple(-1 if n + 2 * p >= 3 else 0 for n, p in zip(self.bins, self.pads))
        nbins = math.prod(n + 2 * p for n, p in zip(self.bins, self.pads))
        self.counts = pk.View(nbins, pk.int32)
        self.offsets = pk.View(nbins, pk.int32)
        # Expected neighbours: density times the cutoff sphere's volume; room for fluctuations on top.
        expected = density * 4.0 / 3.0 * math.pi * cutoff ** 3
        self.max_neigh = min(natoms, int(1.3 * expected) + 8)
        self.natoms = self.nbinned = -1
        self._size(natoms, natoms)
        self.builds = 0

    def _size(self, natoms: int, nbinned: int) -> None:
        """Views for ``natoms`` lists over ``nbinned`` binned atoms (kept while the counts do not grow)."""
        if nbinned > self.nbinned:
            self.nbinned = nbinned
            self.packed = pk.View(nbinned, pk.int32)
            self.bin_of = pk.View(nbinned, pk.int32)
            self.slot = pk.View(nbinned, pk.int32)
        if natoms > self.natoms:
            self.natoms = natoms
            self.num_neigh = pk.View(natoms, pk.int32)
            self.neigh = pk.View((natoms, self.max_neigh), pk.int32)

    def build(self, x, natoms: int | None = None, nbinned: int | None = None) -> None:
        """Rebuild from positions ``x`` (already wrapped into the region): the lists of atoms [0, natoms) over
        the atoms [0, nbinned) (default: all of them; a rank's own atoms over its own and ghost atoms)."""
        n = self.natoms if natoms is None else natoms
        nb = n if nbinned is None else nbinned
        self._size(n, nb)
        nbx, nby, nbz = self.bins
        lx, ly, lz = self.box
        ox, oy, oz = self.origin
        px, py, pz = self.pads
        pk.parallel_for("zero_counts", self.counts.extent(0), K.zero_counts, counts=self.counts)
        pk.parallel_for("bin_atoms", nb, K.bin_atoms, x=x, bin_of=self.bin_of, slot=self.slot, counts=self.counts,
                        nbx=nbx, nby=nby, nbz=nbz, lx=lx, ly=ly, lz=lz, ox=ox, oy=oy, oz=oz, px=px, py=py, pz=pz)
        pk.parallel_scan("bin_offsets", self.counts.extent(0), K.bin_offsets, counts=self.counts,
                         offsets=self.offsets)
        pk.parallel_for("fill_bins", nb, K.fill_bins, bin_of=self.bin_of, slot=self.slot, offsets=self.offsets,
                        packed=self.packed)
        pk.parallel_for("sort_bins", self.counts.extent(0), K.sort_bins, counts=self.counts, offsets=self.offsets,
                        packed=self.packed)
        while True:
            self._search(x, n)
            overflow = pk.parallel_reduce("count_overflow", n, K.count_overflow, num_neigh=self.num_neigh,
                                          max_neigh=self.max_neigh)
            if int(overflow) == 0:
                break
            self.max_neigh = int(self.num_neigh.data[:n].max()) + 8
            self.neigh = pk.View((self.natoms, self.max_neigh), pk.int32)
        self.builds += 1

    def _search(self, x, n: int) -> None:
        nbx, nby, nbz = (b + 2 * p for b, p in zip(self.bins, self.pads))
        sx, sy, sz = self.stencil_start
        lx, ly, lz = self.image_box
        pk.parallel_for("build_neighbors", n, K.build_neighbors, x=x, bin_of=self.bin_of,
                        counts=self.counts, offsets=self.offsets, packed=self.packed, neigh=self.neigh,
                        num_neigh=self.num_neigh, nbx=nbx, nby=nby, nbz=nbz, sx=sx, sy=sy, sz=sz, lx=lx, ly=ly,
                        lz=lz, cutsq=self.cutsq, max_neigh=self.max_neigh)
