"""Iteration spaces of a kernel launch (PyKokkos spellings).

Policies are frozen values: two launches with equal policies iterate over the same space, which is
what the fuser compares.
"""
from __future__ import annotations

import enum
import itertools
from dataclasses import dataclass, field

from .spaces import ExecutionSpace

AUTO = -1


def _split_space(args):
    if args and isinstance(args[0], ExecutionSpace):
        return args[0], args[1:]
    return None, args


def _is_auto(value) -> bool:
    return isinstance(value, str) and value.lower() == "auto"


def _as_int(value, what: str) -> int:
    if type(value) is int:  # (the common case, before the look-ups: policies are made per launch)
        return value
    try:
        return int(value.__index__()) if hasattr(value, "__index__") else int(value)
    except (TypeError, ValueError):
        raise TypeError(f"{what} must be an integer, got {value!r}") from None


@dataclass(frozen=True, init=False)
class RangePolicy:
    """``RangePolicy([space,] begin, end)``: one thread index in [begin, end)."""

    begin: int
    end: int
    space: ExecutionSpace | None

    def __init__(self, *args, space: ExecutionSpace | None = None):
        sp, rest = _split_space(args)
        if len(rest) == 1:
            rest = (0, rest[0])
        if len(rest) != 2:
            raise TypeError("RangePolicy expects (begin, end) or (space, begin, end)")
        object.__setattr__(self, "begin", _as_int(rest[0], "RangePolicy begin"))
        object.__setattr__(self, "end", _as_int(rest[1], "RangePolicy end"))
        object.__setattr__(self, "space", space or sp)

    rank = 1

    @property
    def bounds(self):
        return ((self.begin, self.end),)


class Iterate(enum.Enum):
    """PyKokkos's ``pk.Iterate``: the order an MDRangePolicy walks its tiles (outer) and each tile (inner)."""

    Left = "Left"
    Right = "Right"
    Default = "Default"


@dataclass(frozen=True)
class Rank:
    """PyKokkos's ``pk.Rank(n, outer, inner)``: an MDRangePolicy's rank and iteration orders."""

    n: int
    iter_outer: Iterate = Iterate.Default
    iter_inner: Iterate = Iterate.Default

    def __post_init__(self):
        object.__setattr__(self, "n", _as_int(self.n, "pk.Rank's n"))
        _orders(self.iter_outer, self.iter_inner, "pk.Rank")


def _orders(outer, inner, what: str) -> tuple:
    for order in (outer, inner):
        if not isinstance(order, Iterate):
            raise TypeError(f"{what}: iteration orders are pk.Iterate.Left, Right or Default, got {order!r}")
    return outer, inner


@dataclass(frozen=True, init=False)
class MDRangePolicy:
    """``MDRangePolicy([space,] [b0, b1, ...], [e0, e1, ...][, tiling], rank=pk.Rank(n, outer, inner))``: a
    multi-dimensional thread index.

    Tile sizes and iteration orders only change how Kokkos schedules the threads, never a correct kernel's result.
    They are checked and kept (``tiling``, ``iter_outer``, ``iter_inner``) but not passed on: kernels run with
    Kokkos's default tiling. They take no part in comparing policies, so calls differing only in them fuse."""

    begins: tuple
    ends: tuple
    space: ExecutionSpace | None
    tiling: tuple | None = field(default=None, compare=False)
    iter_outer: Iterate = field(default=Iterate.Default, compare=False)
    iter_inner: Iterate = field(default=Iterate.Default, compare=False)

    def __init__(self, *args, space: ExecutionSpace | None = None, tiling=None, iter_outer: Iterate = Iterate.Default,
                 iter_inner: Iterate = Iterate.Default, rank: Rank | None = None):
        sp, rest = _split_space(args)
        if len(rest) == 3:
            if tiling is not None:
                raise TypeError("MDRangePolicy: tile sizes given twice")
            tiling, rest = rest[2], rest[:2]
        if len(rest) != 2 or len(rest[0]) != len(rest[1]) or not 2 <= len(rest[0]) <= 3:
            raise TypeError("MDRangePolicy expects ([b0, b1(, b2)], [e0, e1(, e2)][, [t0, t1(, t2)]]) with rank 2 or 3")
        n = len(rest[0])
        object.__setattr__(self, "begins", tuple(_as_int(b, "MDRangePolicy begin") for b in rest[0]))
        object.__setattr__(self, "ends", tuple(_as_int(e, "MDRangePolicy end") for e in rest[1]))
        object.__setattr__(self, "space", space or sp)
        object.__setattr__(self, "tiling", _tiling(tiling, n))
        if rank is not None:
            if not isinstance(rank, Rank):
                raise TypeError(f"MDRangePolicy: rank must be a pk.Rank(n, outer, inner), got {rank!r}")
            if rank.n != n:
                raise ValueError(f"MDRangePolicy: pk.Rank({rank.n}, ...) does not match the {n} dimensions of "
                                 "begin and end")
            iter_outer, iter_inner = rank.iter_outer, rank.iter_inner
        _orders(iter_outer, iter_inner, "MDRangePolicy")
        object.__setattr__(self, "iter_outer", iter_outer)
        object.__setattr__(self, "iter_inner", iter_inner)

    @property
    def rank(self) -> int:
        return len(self.begins)

    @property
    def bounds(self):
        return tuple(zip(self.begins, self.ends))


def _tiling(tiling, n: int) -> tuple | None:
    """Tile sizes: one non-negative integer per dimension (0: Kokkos's choice, as in Kokkos)."""
    if tiling is None:
        return None
    if isinstance(tiling, (str, bytes)) or not hasattr(tiling, "__len__") or len(tiling) != n:
        raise TypeError(f"MDRangePolicy: tile sizes must be a list of {n} integers, one per dimension, got {tiling!r}")
    sizes = tuple(_as_int(t, "MDRangePolicy tile size") for t in tiling)
    if any(t < 0 for t in sizes):
        raise ValueError(f"MDRangePolicy: tile sizes must be non-negative (0: Kokkos's choice), got {list(sizes)}")
    return sizes


@dataclass(frozen=True, init=False)
class TeamPolicy:
    """``TeamPolicy([space,] league_size, team_size[, vector_length])``; team_size may be ``pk.AUTO`` or, as in
    PyKokkos, the string ``"auto"``. ``scratch``: (per-team bytes, per-thread bytes) of scratch levels 0 and 1
    (``set_scratch_size``)."""

    league_size: int
    team_size: int
    vector_length: int
    space: ExecutionSpace | None
    scratch: tuple = ((0, 0), (0, 0))

    def __init__(self, *args, space: ExecutionSpace | None = None):
        sp, rest = _split_space(args)
        if not 2 <= len(rest) <= 3:
            raise TypeError("TeamPolicy expects (league_size, team_size[, vector_length])")
        self.__dict__.update(  # (frozen: the fields set at once, as set_scratch_size sets a copy's)
            league_size=_as_int(rest[0], "TeamPolicy league_size"),
            team_size=AUTO if _is_auto(rest[1]) else _as_int(rest[1], 'TeamPolicy team_size (or pk.AUTO, "auto")'),
            vector_length=_as_int(rest[2], "vector_length") if len(rest) == 3 else 1,
            space=space or sp, scratch=((0, 0), (0, 0)))

    rank = 1

    @property
    def bounds(self):
        return ((0, self.league_size), (self.team_size, self.vector_length))

    def set_scratch_size(self, level: int, *sizes) -> TeamPolicy:
        """Kokkos' ``set_scratch_size(level, PerTeam(bytes)[, PerThread(bytes)])``: the policy with the scratch memory
        of ``level`` (0 or 1) set, the other sizes kept. Policies are values, so it returns a new one: launch
        that (``pk.TeamPolicy(n, t).set_scratch_size(0, pk.PerTeam(b))``)."""
        if level not in (0, 1) or isinstance(level, bool):
            raise TypeError(f"set_scratch_size: the scratch level is 0 or 1, got {level!r}")
        if tuple(map(type, sizes)) not in _SCRATCH_KINDS:
            raise TypeError("set_scratch_size expects (level, pk.PerTeam(bytes)), (level, pk.PerThread(bytes)) or "
                            f"(level, pk.PerTeam(bytes), pk.PerThread(bytes)); got {sizes!r}")
        team, thread = self.scratch[level]
        for size in sizes:
            if type(size) is PerTeam:
                team = size.bytes()
            else:
                thread = size.bytes()
        scratch = ((team, thread), self.scratch[1]) if level == 0 else (self.scratch[0], (team, thread))
        copy = object.__new__(TeamPolicy)
        copy.__dict__.update(self.__dict__, scratch=scratch)
        return copy


@dataclass(frozen=True)
class _Per:
    value: object

    def bytes(self) -> int:
        """The scratch size this stands for, checked: a byte count from 0 to 2**31 - 1 (Kokkos counts in int)."""
        size = _as_int(self.value, f"{type(self).__name__} bytes")
        if not 0 <= size < 2 ** 31:
            raise ValueError(f"{type(self).__name__}({size}): scratch bytes must be from 0 to 2**31 - 1")
        return size


class PerTeam(_Per):
    """``pk.PerTeam(bytes)``: scratch memory per team (``set_scratch_size``); in a kernel,
    ``pk.single(pk.PerTeam(team_member), body)`` runs ``body`` once per team."""


class PerThread(_Per):
    """``pk.PerThread(bytes)``: scratch memory per thread of a team; ``pk.single(pk.PerThread(team_member), body)``
    runs ``body`` once per thread (not per vector lane)."""


#: what ``set_scratch_size`` takes after the level: a PerTeam, a PerThread, or one of each
_SCRATCH_KINDS = frozenset({(PerTeam,), (PerThread,), (PerTeam, PerThread), (PerThread, PerTeam)})


def normalize(policy) -> RangePolicy | MDRangePolicy | TeamPolicy:
    """Accept an int (shorthand for RangePolicy(0, n)) or a policy object."""
    if isinstance(policy, (RangePolicy, MDRangePolicy, TeamPolicy)):
        return policy
    if hasattr(policy, "__index__") or isinstance(policy, int):
        return RangePolicy(0, policy)
    raise TypeError(f"expected a thread count or a policy (RangePolicy, MDRangePolicy, TeamPolicy), got {policy!r}")


# Nested-parallelism markers: only meaningful inside a TeamPolicy workunit, where the translator reads
# them; in the Debug space they are evaluated by the Python interpreter.
@dataclass(frozen=True)
class TeamThreadRange:
    member: object
    begin: int
    end: int | None = None

    def range(self):
        return range(self.begin) if self.end is None else range(self.begin, self.end)


@dataclass(frozen=True)
class ThreadVectorRange(TeamThreadRange):
    pass


@dataclass(frozen=True)
class TeamVectorRange(TeamThreadRange):
    pass


@dataclass(frozen=True, init=False)
class TeamThreadMDRange:
    """``TeamThreadMDRange(team_member, n0, n1, ...)`` (Kokkos 4's spelling; 2 to 8 extents): every index tuple of
    [0, n0) x [0, n1) x ... once, split over the team's threads; the body takes one index per extent."""

    member: object
    extents: tuple

    def __init__(self, member, *extents):
        if not 2 <= len(extents) <= 8:
            raise TypeError(f"{type(self).__name__}(team_member, n0, n1, ...) takes 2 to 8 extents, got {len(extents)}")
        object.__setattr__(self, "member", member)
        object.__setattr__(self, "extents", tuple(_as_int(n, f"{type(self).__name__} extent") for n in extents))

    def range(self):
        return itertools.product(*(range(n) for n in self.extents))


class ThreadVectorMDRange(TeamThreadMDRange):
    """``ThreadVectorMDRange(team_member, n0, n1, ...)``: the index tuples split over one thread's vector lanes."""


class TeamVectorMDRange(TeamThreadMDRange):
    """``TeamVectorMDRange(team_member, n0, n1, ...)``: the index tuples split over the team's threads and lanes."""
