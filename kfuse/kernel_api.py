"""Functions a workunit may call (``pk.sqrt``, ``pk.atomic_add``, ``pk.printf`` ...).

Inside compiled kernels the translator maps them to C++; these Python definitions give the same
meaning when a workunit runs in the Debug space (the Python interpreter).
"""
from __future__ import annotations

import math
import operator
import sys

import numpy as np

from .policies import PerTeam, PerThread

sqrt, exp, log, log2, log10, log1p, expm1 = math.sqrt, math.exp, math.log, math.log2, math.log10, math.log1p, math.expm1
sin, cos, tan, asin, acos, atan, atan2 = math.sin, math.cos, math.tan, math.asin, math.acos, math.atan, math.atan2
sinh, cosh, tanh, asinh, acosh, atanh = math.sinh, math.cosh, math.tanh, math.asinh, math.acosh, math.atanh
floor, ceil, trunc, fabs, fmod, hypot, copysign = math.floor, math.ceil, math.trunc, math.fabs, math.fmod, math.hypot, \
    math.copysign
isnan, isinf, isfinite, erf, erfc, tgamma, lgamma = math.isnan, math.isinf, math.isfinite, math.erf, math.erfc, \
    math.gamma, math.lgamma
pow = math.pow  # noqa: A001 - PyKokkos spelling


def cbrt(x):
    return float(np.cbrt(x))


def exp2(x):
    return 2.0 ** x


def fmin(a, b):
    return min(a, b)


def fmax(a, b):
    return max(a, b)


def fma(a, b, c):
    return a * b + c


def _index(view, index):
    return tuple(index) if isinstance(index, (list, tuple)) else (index,)


def _c_div(a, b, op="//"):
    """C++'s ``a / b``, as Kokkos' atomic_fetch_div computes it; an integer zero divisor is the Debug space's
    division fault, as in compiled kernels."""
    from .backends.debug import _DivisionFault
    from .backends.interp import c_divide

    if b == 0 and not isinstance(a, (float, np.floating)):
        raise _DivisionFault(int(a), 0, op)
    return c_divide(a, b)


def _c_mod(a, b):
    """C++'s ``a % b``: the sign of the dividend."""
    return a - b * _c_div(a, b, "%")


_ATOMIC_OPS = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": _c_div, "mod": _c_mod,
               "max": max, "min": min, "and": operator.and_, "or": operator.or_, "xor": operator.xor,
               "lshift": operator.lshift, "rshift": operator.rshift}


def _atomic(name: str, op, fetch: bool):
    """``pk.atomic_fetch_<op>(view, [indices], value)`` (returns the old value) or ``pk.atomic_<op>`` (nothing)."""
    def atomic(view, index, value):
        i = _index(view, index)
        old = view[i]
        view[i] = op(old, value)
        return old if fetch else None

    atomic.__name__ = atomic.__qualname__ = name
    return atomic


for _op, _fn in _ATOMIC_OPS.items():
    globals()[f"atomic_fetch_{_op}"] = _atomic(f"atomic_fetch_{_op}", _fn, True)
    globals()[f"atomic_{_op}"] = _atomic(f"atomic_{_op}", _fn, False)


def atomic_exchange(view, index, value):
    i = _index(view, index)
    old = view[i]
    view[i] = value
    return old


def atomic_compare_exchange(view, index, expected, desired):
    i = _index(view, index)
    old = view[i]
    if old == expected:
        view[i] = desired
    return old


def atomic_increment(view, index):
    atomic_add(view, index, 1)  # noqa: F821 - made above


def atomic_decrement(view, index):
    atomic_sub(view, index, 1)  # noqa: F821 - made above


def printf(fmt: str, *args) -> None:
    """C printf semantics for the formats kernels use (Python's % formatting accepts the same specs)."""
    from .backends.interp import c_format

    sys.stdout.write(c_format(fmt, args))


def team_barrier(member) -> None:
    member.team_barrier()


def single(per, body) -> None:
    """``pk.single(pk.PerTeam(team_member), body)`` / ``pk.single(pk.PerThread(team_member), body)`` in the Debug
    space, whose teams have one thread: ``body()`` once."""
    if type(per) not in (PerTeam, PerThread):
        raise TypeError(f"pk.single expects pk.PerTeam(team_member) or pk.PerThread(team_member), got {per!r}")
    body()
