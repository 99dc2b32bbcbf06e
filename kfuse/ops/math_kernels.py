"""The workunits behind ``mathops``: the remainders, NaN-ignoring extremes, inverse trigonometry and the other
binary float functions, plus the gather kernel of axis reductions.

Same conventions as ``kernels.py``: one thread per element of flat 1-D Views (``_vv`` View op View, ``_vs``
View op scalar, ``_sv`` scalar op View where the operation is not commutative); integer variants where NumPy's
integer result differs from the float formula.
"""
from __future__ import annotations

import math

from ..frontend.workunit import function, workunit
from ..types import double, int64, uint64


# --- remainders --------------------------------------------------------------------------------------------
@function
def fmod_i(a: int64, b: int64) -> int64:
    """C's remainder (the sign of the dividend); a zero divisor gives 0, as in NumPy."""
    if b == 0:
        return 0
    r = a % b
    if r != 0 and (r < 0) != (a < 0):
        r -= b
    return r


@function
def remainder_f(a: double, b: double) -> double:
    """NumPy's float remainder: the sign of the divisor, from fmod so that it is exact (a zero divisor or an
    infinite dividend gives NaN; a zero result takes the divisor's sign)."""
    r = math.fmod(a, b)
    if r == 0.0:
        return math.copysign(0.0, b)
    if (r < 0.0) != (b < 0.0):
        return r + b
    return r


@function
def remainder_i(a: int64, b: int64) -> int64:
    """Python's ``%`` (the sign of the divisor); a zero divisor gives 0, as in NumPy."""
    if b == 0:
        return 0
    return a % b


@function
def remainder_u(a: uint64, b: uint64) -> uint64:
    """Both remainders of unsigned integers (no signs to choose between); a zero divisor gives 0, as in NumPy."""
    if b == 0:
        return 0
    return a % b


@workunit
def remainder_u_vv(i, out, a, b):
    out[i] = remainder_u(a[i], b[i])


@workunit
def remainder_u_vs(i, out, a, s):
    out[i] = remainder_u(a[i], s)


@workunit
def remainder_u_sv(i, out, s, b):
    out[i] = remainder_u(s, b[i])


@workunit
def fmod_f_vv(i, out, a, b):
    out[i] = math.fmod(a[i], b[i])


@workunit
def fmod_f_vs(i, out, a, s):
    out[i] = math.fmod(a[i], s)


@workunit
def fmod_f_sv(i, out, s, b):
    out[i] = math.fmod(s, b[i])


@workunit
def fmod_i_vv(i, out, a, b):
    out[i] = fmod_i(a[i], b[i])


@workunit
def fmod_i_vs(i, out, a, s):
    out[i] = fmod_i(a[i], s)


@workunit
def fmod_i_sv(i, out, s, b):
    out[i] = fmod_i(s, b[i])


@workunit
def remainder_f_vv(i, out, a, b):
    out[i] = remainder_f(a[i], b[i])


@workunit
def remainder_f_vs(i, out, a, s):
    out[i] = remainder_f(a[i], s)


@workunit
def remainder_f_sv(i, out, s, b):
    out[i] = remainder_f(s, b[i])


@workunit
def remainder_i_vv(i, out, a, b):
    out[i] = remainder_i(a[i], b[i])


@workunit
def remainder_i_vs(i, out, a, s):
    out[i] = remainder_i(a[i], s)


@workunit
def remainder_i_sv(i, out, s, b):
    out[i] = remainder_i(s, b[i])


# --- NaN-ignoring extremes (integers use maximum_i/minimum_i of kernels.py) ----------------------------------
@function
def fmax_f(x: double, y: double) -> double:
    """NumPy's fmax: the other operand where one is NaN (NaN only if both are)."""
    if x != x:
        return y
    if y != y:
        return x
    return x if x >= y else y


@function
def fmin_f(x: double, y: double) -> double:
    if x != x:
        return y
    if y != y:
        return x
    return x if x <= y else y


@workunit
def fmax_vv(i, out, a, b):
    out[i] = fmax_f(a[i], b[i])


@workunit
def fmax_vs(i, out, a, s):
    out[i] = fmax_f(a[i], s)


@workunit
def fmin_vv(i, out, a, b):
    out[i] = fmin_f(a[i], b[i])


@workunit
def fmin_vs(i, out, a, s):
    out[i] = fmin_f(a[i], s)


# --- other binary float functions ----------------------------------------------------------------------------
@function
def logaddexp2_f(x: double, y: double) -> double:
    """log2(2**x + 2**y) without overflow: the larger operand plus log2(1 + 2**-|x - y|)."""
    if x == y:
        return x + 1.0  # also right for equal infinities
    d = x - y
    if d > 0.0:
        return x + math.log1p(2.0 ** -d) * 1.4426950408889634  # 1 / ln 2
    if d <= 0.0:
        return y + math.log1p(2.0 ** d) * 1.4426950408889634
    return d  # NaN


@workunit
def logaddexp2_vv(i, out, a, b):
    out[i] = logaddexp2_f(a[i], b[i])


@workunit
def logaddexp2_vs(i, out, a, s):
    out[i] = logaddexp2_f(a[i], s)


@workunit
def hypot_vv(i, out, a, b):
    out[i] = math.hypot(a[i], b[i])


@workunit
def hypot_vs(i, out, a, s):
    out[i] = math.hypot(a[i], s)


@workunit
def arctan2_vv(i, out, a, b):
    out[i] = math.atan2(a[i], b[i])


@workunit
def arctan2_vs(i, out, a, s):
    out[i] = math.atan2(a[i], s)


@workunit
def arctan2_sv(i, out, s, b):
    out[i] = math.atan2(s, b[i])


@workunit
def copysign_vv(i, out, a, b):
    out[i] = math.copysign(a[i], b[i])


@workunit
def copysign_vs(i, out, a, s):
    out[i] = math.copysign(a[i], s)


@workunit
def copysign_sv(i, out, s, b):
    out[i] = math.copysign(s, b[i])


# --- unary ------------------------------------------------------------------------------------------------------
@workunit
def arcsin_k(i, out, a):
    out[i] = math.asin(a[i])


@workunit
def arccos_k(i, out, a):
    out[i] = math.acos(a[i])


@workunit
def arctan_k(i, out, a):
    out[i] = math.atan(a[i])


@workunit
def arcsinh_k(i, out, a):
    out[i] = math.asinh(a[i])


@workunit
def arccosh_k(i, out, a):
    out[i] = math.acosh(a[i])


@workunit
def arctanh_k(i, out, a):
    out[i] = math.atanh(a[i])


@workunit
def cbrt_k(i, out, a):
    out[i] = math.cbrt(a[i])


# --- axis reductions ---------------------------------------------------------------------------------------------
@workunit
def gather_rows_k(i, j, out, a, base, offset):
    """Row i of ``out`` holds the elements of flat ``a`` that make result element i (see ``_lines``)."""
    out[i][j] = a[base[i] + offset[j]]
