"""NumPy's remainders, NaN-ignoring extremes, inverse trigonometric and other math ufuncs (PyKokkos's ``fmod
fmax fmin logaddexp2 positive`` and the NumPy functions next to them), each one kernel launch as in
``elementwise``.

The names kernels also call as C math (``fmod fmax fmin hypot copysign cbrt`` and ``asin acos atan asinh acosh
atanh atan2``, which NumPy 2 and the array API spell as ``arcsin``... too) keep that meaning on numbers, as
``pk.sqrt`` does, so a workunit run by the Debug space computes what its compiled kernel computes.
"""
from __future__ import annotations

import math
import operator

import numpy as np

from .. import kernel_api
from ..views import View
from . import kernels as k, math_kernels as mk
from ._common import is_array, named_operand, ufunc_dtype, view_of
from .elementwise import _binary, _math, copy


_UNSIGNED_REMAINDER = (mk.remainder_u_vv, mk.remainder_u_vs, mk.remainder_u_sv)


def _by_kind(name, ufunc, float_wus, int_wus, scalar_fn, viewA, viewB, out, uint_wus=None):
    """A binary ufunc whose integer results need their own kernels (``*_wus``: vv, vs and sv, None where
    commutative): the float ones for a float result dtype, the unsigned ones (``uint_wus``, where the signed
    ones compute through int64, which wraps from 2**63) for an unsigned one, else the integer ones."""
    a, b = named_operand(name, "viewA", viewA), named_operand(name, "viewB", viewB)
    wus = float_wus
    if isinstance(a, View) or isinstance(b, View):
        kind = ufunc_dtype(name, ufunc, a, b).kind
        if kind == "u" and uint_wus is not None:
            wus = uint_wus
        elif kind != "f":
            wus = int_wus
    return _binary(name, ufunc, *wus, scalar_fn, a, b, out)


def _numpy_scalar(ufunc):
    """NumPy's value for two numbers, as a Python number."""
    def fn(x, y):
        with np.errstate(all="ignore"):
            return ufunc(x, y).item()
    return fn


def fmod(viewA, viewB, out=None):
    """C's remainder, the sign of the dividend (NumPy's ``fmod``); an integer zero divisor gives 0, a float one
    NaN. On two numbers, ``math.fmod`` (C's fmod, as inside kernels)."""
    return _by_kind("fmod", np.fmod, (mk.fmod_f_vv, mk.fmod_f_vs, mk.fmod_f_sv),
                    (mk.fmod_i_vv, mk.fmod_i_vs, mk.fmod_i_sv), kernel_api.fmod, viewA, viewB, out, _UNSIGNED_REMAINDER)


def remainder(viewA, viewB, out=None):
    """Python's ``%``, the sign of the divisor (NumPy's ``remainder``/``mod``); an integer zero divisor gives
    0, a float one NaN."""
    return _by_kind("remainder", np.remainder, (mk.remainder_f_vv, mk.remainder_f_vs, mk.remainder_f_sv),
                    (mk.remainder_i_vv, mk.remainder_i_vs, mk.remainder_i_sv), _numpy_scalar(np.remainder),
                    viewA, viewB, out, _UNSIGNED_REMAINDER)


mod = remainder


def _fmax_scalar(x, y):
    return y if x != x else x if y != y else max(x, y)


def _fmin_scalar(x, y):
    return y if x != x else x if y != y else min(x, y)


def fmax(viewA, viewB, out=None):
    """Element-wise larger value ignoring NaN (NaN only where both are), NumPy's ``fmax``; on numbers too, as
    C's fmax inside kernels."""
    return _by_kind("fmax", np.fmax, (mk.fmax_vv, mk.fmax_vs, None), (k.maximum_i_vv, k.maximum_i_vs, None),
                    _fmax_scalar, viewA, viewB, out)


def fmin(viewA, viewB, out=None):
    """Element-wise smaller value ignoring NaN, NumPy's ``fmin``."""
    return _by_kind("fmin", np.fmin, (mk.fmin_vv, mk.fmin_vs, None), (k.minimum_i_vv, k.minimum_i_vs, None),
                    _fmin_scalar, viewA, viewB, out)


def logaddexp2(viewA, viewB, out=None):
    """log2(2**a + 2**b) computed without overflow (float results, as NumPy)."""
    return _binary("logaddexp2", np.logaddexp2, mk.logaddexp2_vv, mk.logaddexp2_vs, None,
                   _numpy_scalar(np.logaddexp2), viewA, viewB, out)


def hypot(viewA, viewB, out=None):
    """sqrt(a**2 + b**2) without overflow (float results); on numbers, ``math.hypot``."""
    return _binary("hypot", np.hypot, mk.hypot_vv, mk.hypot_vs, None, math.hypot, viewA, viewB, out)


def arctan2(viewA, viewB, out=None):
    """The angle of the point (b, a), in (-pi, pi] by the quadrant; on numbers, ``math.atan2``."""
    return _binary("arctan2", np.arctan2, mk.arctan2_vv, mk.arctan2_vs, mk.arctan2_sv, math.atan2, viewA, viewB,
                   out)


def copysign(viewA, viewB, out=None):
    """|a| with the sign of b (of -0.0 too); float results; on numbers, ``math.copysign``."""
    return _binary("copysign", np.copysign, mk.copysign_vv, mk.copysign_vs, mk.copysign_sv, math.copysign,
                   viewA, viewB, out)


def positive(view=None, out=None):
    """A copy of ``view`` in its dtype (``+x``); bools are refused, as in NumPy. On a number, ``+x``."""
    if view is None:
        raise TypeError("positive: view is required")
    if not is_array(view):
        if out is not None:
            raise TypeError("positive: out= needs an array operand")
        return operator.pos(named_operand("positive", "view", view))
    v = view_of("positive", "view", view)
    ufunc_dtype("positive", np.positive, v)
    return copy(v, out=out)


arcsin = _math("arcsin", np.arcsin, mk.arcsin_k, math.asin)
arccos = _math("arccos", np.arccos, mk.arccos_k, math.acos)
arctan = _math("arctan", np.arctan, mk.arctan_k, math.atan)
arcsinh = _math("arcsinh", np.arcsinh, mk.arcsinh_k, math.asinh)
arccosh = _math("arccosh", np.arccosh, mk.arccosh_k, math.acosh)
arctanh = _math("arctanh", np.arctanh, mk.arctanh_k, math.atanh)
cbrt = _math("cbrt", np.cbrt, mk.cbrt_k, kernel_api.cbrt)

# NumPy 2's (and the array API's) spellings, which are also the C names kernels call: one object under both
# names, so ``pk.arcsin(x)`` inside a kernel is recognised as ``asin``.
asin, acos, atan, asinh, acosh, atanh, atan2 = arcsin, arccos, arctan, arcsinh, arccosh, arctanh, arctan2
