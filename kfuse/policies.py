"""Iteration spaces of a kernel launch (PyKokkos spellings).

Policies are frozen values: two launches with equal policies iterate over the same space, which is
what the fuser compares.
"""
from __future__ import annotations

from dataclasses import dataclass

from .spaces import ExecutionSpace

AUTO = -1


def _split_space(args):
    if args and isinstance(args[0], ExecutionSpace):
        return args[0], args[1:]
    return None, args


def _as_int(value, what: str) -> int:
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


@dataclass(frozen=True, init=False)
class MDRangePolicy:
    """``MDRangePolicy([space,] [b0, b1, ...], [e0, e1, ...])``: a multi-dimensional thread index."""

    begins: tuple
    ends: tuple
    space: ExecutionSpace | None

    def __init__(self, *args, space: ExecutionSpace | None = None, tile=None):
        sp, rest = _split_space(args)
        if len(rest) != 2 or len(rest[0]) != len(rest[1]) or not 2 <= len(rest[0]) <= 3:
            raise TypeError("MDRangePolicy expects ([b0, b1(, b2)], [e0, e1(, e2)]) with rank 2 or 3")
        object.__setattr__(self, "begins", tuple(_as_int(b, "MDRangePolicy begin") for b in rest[0]))
        object.__setattr__(self, "ends", tuple(_as_int(e, "MDRangePolicy end") for e in rest[1]))
        object.__setattr__(self, "space", space or sp)

    @property
    def rank(self) -> int:
        return len(self.begins)

    @property
    def bounds(self):
        return tuple(zip(self.begins, self.ends))


@dataclass(frozen=True, init=False)
class TeamPolicy:
    """``TeamPolicy([space,] league_size, team_size[, vector_length])``; team_size may be ``pk.AUTO``."""

    league_size: int
    team_size: int
    vector_length: int
    space: ExecutionSpace | None

    def __init__(self, *args, space: ExecutionSpace | None = None):
        sp, rest = _split_space(args)
        if not 2 <= len(rest) <= 3:
            raise TypeError("TeamPolicy expects (league_size, team_size[, vector_length])")
        object.__setattr__(self, "league_size", _as_int(rest[0], "TeamPolicy league_size"))
        object.__setattr__(self, "team_size", _as_int(rest[1], "TeamPolicy team_size"))
        object.__setattr__(self, "vector_length", _as_int(rest[2], "vector_length") if len(rest) == 3 else 1)
        object.__setattr__(self, "space", space or sp)

    rank = 1

    @property
    def bounds(self):
        return ((0, self.league_size), (self.team_size, self.vector_length))


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
