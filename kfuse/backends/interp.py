"""What the two interpreters of kernels share: the Debug space (the user's own function, backends/debug.py)
and the python backend (the kernel's typed IR written as Python, backends/python.py) both run one thread
index at a time over NumPy memory, check every View index, give teams one thread, and print like C printf.
"""
from __future__ import annotations

import re

import numpy as np


class IndexFault(IndexError):
    """An index outside ``0 <= i < extent``; ``fields`` are KernelIndexError's."""

    def __init__(self, view: str, dim: int, index: int, extent: int):
        super().__init__(view, dim, index, extent)
        self.fields = dict(view=view, dim=dim, index=index, extent=extent)


class DebugArray(np.ndarray):
    """A NumPy array that also answers the View methods kernels use, and checks every index."""

    view_name = "?"  # the parameter it was passed as
    first_dim = 0  # a row A[i] of a 2-D View starts at dimension 1

    def extent(self, dim: int) -> int:
        return self.shape[dim]

    def rank(self) -> int:
        return self.ndim

    def _check(self, key) -> int:
        """Raise for an integer index outside 0 <= i < extent; returns how many dimensions ``key`` indexes."""
        indices = key if isinstance(key, tuple) else (key,)
        for d, i in enumerate(indices[:self.ndim]):
            if isinstance(i, (int, np.integer)) and not 0 <= i < self.shape[d]:
                raise IndexFault(self.view_name, self.first_dim + d, int(i), self.shape[d])
        return len(indices)

    def __getitem__(self, key):
        used = self._check(key)
        item = super().__getitem__(key)
        if isinstance(item, DebugArray):
            item.view_name, item.first_dim = self.view_name, self.first_dim + used
        return item

    def __setitem__(self, key, value):
        self._check(key)
        super().__setitem__(key, value)


def debug_view(view, name: str) -> DebugArray:
    """The memory of a View argument (no copy), checking its indices and naming itself ``name`` in faults."""
    array = view._array.view(DebugArray)
    array.view_name = name
    return array


class ScratchFault(Exception):
    """A ScratchView that does not fit its team's scratch memory (``kind`` "scratch": ``dim`` the level, ``value``
    the bytes needed, ``limit`` those set) or has a negative extent ("scratch_extent": ``dim``, ``value``)."""

    def __init__(self, kind: str, view: str, dim: int, value: int, limit: int = 0):
        super().__init__(kind, view, dim, value, limit)
        self.fields = dict(kind=kind, view=view, dim=dim, value=value, limit=limit)


_INT64_MAX = (1 << 63) - 1


class DebugTeamMember:
    """A team of one thread (a legal Kokkos team size), so barriers are trivially satisfied. ``scratch``: the
    TeamPolicy's (per-team, per-thread) scratch bytes of levels 0 and 1, which this team's ScratchViews take."""

    def __init__(self, league_rank: int, league_size: int, scratch: tuple = ((0, 0), (0, 0))):
        self._league_rank = league_rank
        self._league_size = league_size
        self._capacity = [team + self.team_size() * thread for team, thread in scratch]
        self._used = [0, 0]

    def league_rank(self):
        return self._league_rank

    def league_size(self):
        return self._league_size

    def team_rank(self):
        return 0

    def team_size(self):
        return 1

    def team_barrier(self):
        pass

    def team_scratch(self, level: int):
        return _ScratchSpace(self, level, False)

    def thread_scratch(self, level: int):
        return _ScratchSpace(self, level, True)

    def scratch_view(self, level: int, per_thread: bool, dtype: np.dtype, extents: tuple, name: str) -> DebugArray:
        """A ScratchView's memory, its bytes counted as kfuse's C++ counts them (``kf_scratch_take``: each View
        aligned to its element size; a thread_scratch View one copy per thread); ScratchFault if it does not fit."""
        for d, n in enumerate(extents):
            if n < 0:
                raise ScratchFault("scratch_extent", name, d, n)
        size = dtype.itemsize
        start = -(-self._used[level] // size) * size
        end = start + size * (self.team_size() if per_thread else 1) * int(np.prod(extents, dtype=object))
        if end > self._capacity[level]:
            raise ScratchFault("scratch", name, level, min(end, _INT64_MAX), self._capacity[level])
        self._used[level] = end
        array = np.zeros(extents, dtype).view(DebugArray)
        array.view_name = name
        return array


class _ScratchSpace:
    """``team_member.team_scratch(level)`` (or ``thread_scratch``) in the Debug space, which ScratchViews take from."""

    def __init__(self, team: DebugTeamMember, level: int, per_thread: bool):
        self.team, self.level, self.per_thread = team, level, per_thread

    def view(self, annotation, extents: tuple, name: str = "") -> DebugArray:
        if annotation.dtype is None:
            raise TypeError(f"annotate the ScratchView with its element type: pk.ScratchView{annotation.rank}D[T]")
        if len(extents) != annotation.rank:
            raise TypeError(f"{annotation!r} takes {annotation.rank} extent(s), got {len(extents)}")
        return self.team.scratch_view(self.level, self.per_thread, annotation.dtype.np, tuple(map(int, extents)),
                                      name)


def c_divide(a, b):
    """C++'s ``a / b`` on two values of one type, as Kokkos' atomic_fetch_div computes it: truncated toward zero
    for integers, IEEE for floats."""
    if isinstance(a, (float, np.floating)):
        with np.errstate(divide="ignore", invalid="ignore"):
            return float(np.float64(a) / np.float64(b))
    q = abs(int(a)) // abs(int(b))
    return q if (a < 0) == (b < 0) else -q


def python_scalar(value):
    """A plain int/float, the type a compiled kernel's result has."""
    return value.item() if isinstance(value, np.generic) else value


_LENGTH = re.compile(r"(%[-+ #0]*\d*(?:\.\d+)?)(hh|h|ll|l|L|z|j|t)")


def c_format(fmt: str, args) -> str:
    """C printf's ``fmt % args`` for the conversions kernels allow (length modifiers dropped)."""
    return _LENGTH.sub(r"\1", fmt) % tuple(args)
