"""The Debug space: run a workunit in the Python interpreter, one thread index at a time.

Useful to debug kernel logic with print() and pdb, and as a second, independent semantics for tests.
Teams run with one thread each (team_size() == 1), which is a legal Kokkos team size, so barriers are
trivially satisfied.
"""
from __future__ import annotations

import itertools
import operator
import re

import numpy as np

from ..policies import MDRangePolicy, RangePolicy, TeamThreadRange


class DebugArray(np.ndarray):
    """A NumPy array that also answers the View methods kernels use."""

    def extent(self, dim: int) -> int:
        return self.shape[dim]

    def rank(self) -> int:
        return self.ndim


class _Acc:
    """Accumulator: ``acc += x`` mutates it in place (Python rebinds ``acc`` to the same object)."""

    def __init__(self, value=0):
        self.v = value

    def __iadd__(self, x):
        self.v += x.v if isinstance(x, _Acc) else x
        return self

    def __isub__(self, x):
        self.v -= x.v if isinstance(x, _Acc) else x
        return self

    def __float__(self):
        return float(self.v)

    def __int__(self):
        return int(self.v)

    def __index__(self):
        return int(self.v)

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self.v, dtype=dtype)

    def __bool__(self):
        return bool(self.v)


def _operator(op, reflected=False):
    def method(self, other):
        other = other.v if isinstance(other, _Acc) else other
        return op(other, self.v) if reflected else op(self.v, other)
    return method


# Reading the accumulator in an expression (``out[i] = acc / n``, ``if acc > 0``) uses its current value.
for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "lt", "le", "gt", "ge", "eq", "ne"):
    setattr(_Acc, f"__{_name}__", _operator(getattr(operator, _name)))
    if _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow"):
        setattr(_Acc, f"__r{_name}__", _operator(getattr(operator, _name), reflected=True))
for _name in ("neg", "pos", "abs"):
    setattr(_Acc, f"__{_name}__", lambda self, _op=getattr(operator, _name): _op(self.v))


class DebugTeamMember:
    def __init__(self, league_rank: int, league_size: int):
        self._league_rank = league_rank
        self._league_size = league_size

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


def run_nested(op: str, rng: TeamThreadRange, fn):
    """Nested TeamThreadRange/ThreadVectorRange with one thread per team: a plain loop."""
    if op == "for":
        for j in rng.range():
            fn(j)
        return None
    acc = _Acc(0)
    for j in rng.range():
        if op == "reduce":
            acc = fn(j, acc) or acc
        else:
            fn(j, acc, True)
    return acc.v


def run_debug(call, args):
    spec = call.prepared.spec
    fn = call.prepared.workunit.fn
    args = [a._array.view(DebugArray) if spec.params[i][1].is_view else a for i, a in enumerate(args)]
    policy = call.policy
    if isinstance(policy, RangePolicy):
        points = ((i,) for i in range(policy.begin, policy.end))
    elif isinstance(policy, MDRangePolicy):
        points = itertools.product(*(range(b, e) for b, e in policy.bounds))
    else:
        points = ((DebugTeamMember(r, policy.league_size),) for r in range(policy.league_size))
    kwargs = {name: a for (name, _), a in zip(spec.params, args)}
    if spec.op == "for":
        for p in points:
            fn(*p, **kwargs)
        return ()
    acc = _Acc(spec.accs[0].np.type(0))
    if spec.op == "reduce":
        for p in points:
            fn(*p, acc, **kwargs)
        return (_python_scalar(acc.v),)
    points = list(points)
    for p in points:  # scan: a first pass accumulates, a second pass with last_pass=True writes
        fn(*p, acc, False, **kwargs)
    total = acc.v
    acc = _Acc(spec.accs[0].np.type(0))
    for p in points:
        fn(*p, acc, True, **kwargs)
    return (_python_scalar(total),)


def _python_scalar(value):
    """A plain int/float, the type a compiled kernel's result has."""
    return value.item() if isinstance(value, np.generic) else value


_LENGTH = re.compile(r"(%[-+ #0]*\d*(?:\.\d+)?)(hh|h|ll|l|L|z|j|t)")


def c_format(fmt: str, args) -> str:
    return _LENGTH.sub(r"\1", fmt) % tuple(args)
