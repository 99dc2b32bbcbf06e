"""The workunits behind the array operations.

Elementwise kernels index every View by the thread index alone (``out[i] = f(a[i], b[i])``), the one
access pattern the fuser can prove safe to merge with neighbouring kernels; they run over flat 1-D
Views (see ``_common.flat``). Kept apart from the API modules because those define ``sum``/``max``/
``abs``, which would shadow the builtins these kernels call.
"""
from __future__ import annotations

import math

from ..frontend.workunit import function, workunit
from ..types import Acc, double, int64, uint64


# --- layout -----------------------------------------------------------------------------------
@workunit
def copy_k(i, out, a):
    out[i] = a[i]


@workunit
def copy2d_k(i, j, out, a):
    out[i][j] = a[i][j]


@workunit
def fill_k(i, out, value):
    out[i] = value


# --- binary arithmetic: View op View, View op scalar, scalar op View ---------------------------
@workunit
def add_vv(i, out, a, b):
    out[i] = a[i] + b[i]


@workunit
def add_vs(i, out, a, s):
    out[i] = a[i] + s


@workunit
def subtract_vv(i, out, a, b):
    out[i] = a[i] - b[i]


@workunit
def subtract_vs(i, out, a, s):
    out[i] = a[i] - s


@workunit
def subtract_sv(i, out, s, b):
    out[i] = s - b[i]


@workunit
def multiply_vv(i, out, a, b):
    out[i] = a[i] * b[i]


@workunit
def multiply_vs(i, out, a, s):
    out[i] = a[i] * s


@workunit
def divide_vv(i, out, a, b):
    out[i] = a[i] / b[i]


@workunit
def divide_vs(i, out, a, s):
    out[i] = a[i] / s


@workunit
def divide_sv(i, out, s, b):
    out[i] = s / b[i]


@workunit
def power_vv(i, out, a, b):
    out[i] = a[i] ** b[i]


@workunit
def power_vs(i, out, a, s):
    out[i] = a[i] ** s


@workunit
def power_sv(i, out, s, b):
    out[i] = s ** b[i]


# --- unary --------------------------------------------------------------------------------------
@workunit
def negative_k(i, out, a):
    out[i] = -a[i]


@workunit
def absolute_k(i, out, a):
    out[i] = abs(a[i])


@workunit
def square_k(i, out, a):
    out[i] = a[i] * a[i]


@workunit
def sqrt_k(i, out, a):
    out[i] = math.sqrt(a[i])


@workunit
def exp_k(i, out, a):
    out[i] = math.exp(a[i])


@workunit
def log_k(i, out, a):
    out[i] = math.log(a[i])


@workunit
def sin_k(i, out, a):
    out[i] = math.sin(a[i])


@workunit
def cos_k(i, out, a):
    out[i] = math.cos(a[i])


@workunit
def logical_not_k(i, out, a):
    out[i] = a[i] == 0  # NaN is true, as in NumPy: NaN == 0 is false


# --- where --------------------------------------------------------------------------------------
@workunit
def where_vv(i, out, cond, a, b):
    out[i] = a[i] if cond[i] else b[i]


@workunit
def where_vs(i, out, cond, a, s):
    out[i] = a[i] if cond[i] else s


@workunit
def where_sv(i, out, cond, s, b):
    out[i] = s if cond[i] else b[i]


@workunit
def where_ss(i, out, cond, s, t):
    out[i] = s if cond[i] else t


# --- reductions over a whole (flat) View ----------------------------------------------------------
@workunit
def sum_k(i, acc: Acc[double], a, scale):
    acc += a[i] * scale


@workunit
def sqdev_k(i, acc: Acc[double], a, mean, scale):
    d = a[i] - mean
    acc += d * d * scale


@workunit
def chunk_best_k(c, vals, idxs, a, chunk, largest):
    """Best element (max or min, first on ties, NaN wins as in NumPy) of chunk c of a."""
    begin = c * chunk
    end = min(begin + chunk, a.extent(0))
    best = a[begin]
    at = begin
    for j in range(begin + 1, end):
        x = a[j]
        if (x > best if largest else x < best) or (x != x and best == best):
            best = x
            at = j
    vals[c] = best
    idxs[c] = at


@workunit
def pick_value_k(i, acc: Acc[double], vals, largest):
    """Second stage of max/min: one thread picks the best chunk (reductions only sum)."""
    best = vals[0]
    for c in range(1, vals.extent(0)):
        x = vals[c]
        if (x > best if largest else x < best) or (x != x and best == best):
            best = x
    acc += best


@workunit
def pick_index_k(i, acc: Acc[int64], vals, idxs, largest):
    best = vals[0]
    at = idxs[0]
    for c in range(1, vals.extent(0)):
        x = vals[c]
        if (x > best if largest else x < best) or (x != x and best == best):
            best = x
            at = idxs[c]
    acc += at


# --- reductions along the last axis of a 2-D View (axis 0 is handled as the transpose) ---------
@workunit
def rows_sum_k(i, out, a, divisor):
    s = 0.0
    for j in range(a.extent(1)):
        s += a[i][j]
    out[i] = s / divisor


@workunit
def rows_var_k(i, out, a, ddof):
    m = a.extent(1)
    s = 0.0
    for j in range(m):
        s += a[i][j]
    mu = s / m
    q = 0.0
    for j in range(m):
        d = a[i][j] - mu
        q += d * d
    out[i] = q / (m - ddof)


@workunit
def rows_best_k(i, vals, idxs, a, largest):
    best = a[i][0]
    at = 0
    for j in range(1, a.extent(1)):
        x = a[i][j]
        if (x > best if largest else x < best) or (x != x and best == best):
            best = x
            at = j
    vals[i] = best
    idxs[i] = at


# --- linear algebra -------------------------------------------------------------------------------
@workunit
def dot_k(i, acc: Acc[double], a, b):
    acc += a[i] * b[i]


@workunit
def matvec_k(i, out, a, x):
    s = 0.0
    for k in range(a.extent(1)):
        s += a[i][k] * x[k]
    out[i] = s


@workunit
def matmul_k(i, j, out, a, b):
    s = 0.0
    for k in range(a.extent(1)):
        s += a[i][k] * b[k][j]
    out[i][j] = s


@workunit
def outer_k(i, j, out, a, b):
    out[i][j] = a[i] * b[j]


# --- comparisons and logical operations (bool results) -------------------------------------------
# A scalar operand on the left is handled by the mirrored comparison (s < b[i] is b[i] > s).
@workunit
def greater_vv(i, out, a, b):
    out[i] = a[i] > b[i]


@workunit
def greater_vs(i, out, a, s):
    out[i] = a[i] > s


@workunit
def greater_equal_vv(i, out, a, b):
    out[i] = a[i] >= b[i]


@workunit
def greater_equal_vs(i, out, a, s):
    out[i] = a[i] >= s


@workunit
def less_vv(i, out, a, b):
    out[i] = a[i] < b[i]


@workunit
def less_vs(i, out, a, s):
    out[i] = a[i] < s


@workunit
def less_equal_vv(i, out, a, b):
    out[i] = a[i] <= b[i]


@workunit
def less_equal_vs(i, out, a, s):
    out[i] = a[i] <= s


@workunit
def equal_vv(i, out, a, b):
    out[i] = a[i] == b[i]


@workunit
def equal_vs(i, out, a, s):
    out[i] = a[i] == s


@workunit
def not_equal_vv(i, out, a, b):
    out[i] = a[i] != b[i]


@workunit
def not_equal_vs(i, out, a, s):
    out[i] = a[i] != s


# Truth is "non-zero" (NaN is true), as in NumPy.
@workunit
def logical_and_vv(i, out, a, b):
    out[i] = (a[i] != 0) and (b[i] != 0)


@workunit
def logical_and_vs(i, out, a, s):
    out[i] = (a[i] != 0) and (s != 0)


@workunit
def logical_or_vv(i, out, a, b):
    out[i] = (a[i] != 0) or (b[i] != 0)


@workunit
def logical_or_vs(i, out, a, s):
    out[i] = (a[i] != 0) or (s != 0)


@workunit
def logical_xor_vv(i, out, a, b):
    out[i] = (a[i] != 0) != (b[i] != 0)


@workunit
def logical_xor_vs(i, out, a, s):
    out[i] = (a[i] != 0) != (s != 0)


# --- more binary arithmetic ------------------------------------------------------------------------
@function
def floordiv_f(a: double, b: double) -> double:
    """NumPy's float floor division: from fmod, so that a == b * q + r holds exactly (1 // 0.1 is 9.0)."""
    if b == 0.0:
        return a / b
    r = math.fmod(a, b)
    q = (a - r) / b
    if r != 0.0 and (b < 0.0) != (r < 0.0):
        q -= 1.0
    if q == 0.0:
        return math.copysign(0.0, a / b)
    f = math.floor(q)
    if q - f > 0.5:
        f += 1.0
    return f


@function
def floordiv_i(a: int64, b: int64) -> int64:
    """NumPy's integer floor division: a zero divisor gives 0 (NumPy warns)."""
    if b == 0:
        return 0
    return a // b


@function
def floordiv_u(a: uint64, b: uint64) -> uint64:
    """Unsigned floor division (through int64, values from 2**63 would wrap); a zero divisor gives 0."""
    if b == 0:
        return 0
    return a // b


@workunit
def floordiv_u_vv(i, out, a, b):
    out[i] = floordiv_u(a[i], b[i])


@workunit
def floordiv_u_vs(i, out, a, s):
    out[i] = floordiv_u(a[i], s)


@workunit
def floordiv_u_sv(i, out, s, b):
    out[i] = floordiv_u(s, b[i])


@workunit
def floordiv_f_vv(i, out, a, b):
    out[i] = floordiv_f(a[i], b[i])


@workunit
def floordiv_f_vs(i, out, a, s):
    out[i] = floordiv_f(a[i], s)


@workunit
def floordiv_f_sv(i, out, s, b):
    out[i] = floordiv_f(s, b[i])


@workunit
def floordiv_i_vv(i, out, a, b):
    out[i] = floordiv_i(a[i], b[i])


@workunit
def floordiv_i_vs(i, out, a, s):
    out[i] = floordiv_i(a[i], s)


@workunit
def floordiv_i_sv(i, out, s, b):
    out[i] = floordiv_i(s, b[i])


@function
def logaddexp_f(x: double, y: double) -> double:
    """log(exp(x) + exp(y)) without overflow, as NumPy computes it."""
    if x == y:
        return x + 0.6931471805599453  # log(2); also right for equal infinities
    d = x - y
    if d > 0.0:
        return x + math.log1p(math.exp(-d))
    if d <= 0.0:
        return y + math.log1p(math.exp(d))
    return d  # NaN


@workunit
def logaddexp_vv(i, out, a, b):
    out[i] = logaddexp_f(a[i], b[i])


@workunit
def logaddexp_vs(i, out, a, s):
    out[i] = logaddexp_f(a[i], s)


@function
def maximum_f(x: double, y: double) -> double:
    """NumPy's maximum: NaN if either is NaN."""
    if x != x:
        return x
    if y != y:
        return y
    return x if x >= y else y


@function
def minimum_f(x: double, y: double) -> double:
    if x != x:
        return x
    if y != y:
        return y
    return x if x <= y else y


@workunit
def maximum_vv(i, out, a, b):
    out[i] = maximum_f(a[i], b[i])


@workunit
def maximum_vs(i, out, a, s):
    out[i] = maximum_f(a[i], s)


@workunit
def minimum_vv(i, out, a, b):
    out[i] = minimum_f(a[i], b[i])


@workunit
def minimum_vs(i, out, a, s):
    out[i] = minimum_f(a[i], s)


@workunit
def maximum_i_vv(i, out, a, b):
    out[i] = max(a[i], b[i])


@workunit
def maximum_i_vs(i, out, a, s):
    out[i] = max(a[i], s)


@workunit
def minimum_i_vv(i, out, a, b):
    out[i] = min(a[i], b[i])


@workunit
def minimum_i_vs(i, out, a, s):
    out[i] = min(a[i], s)


# --- more unary ---------------------------------------------------------------------------------------
@workunit
def reciprocal_f_k(i, out, a):
    out[i] = 1.0 / a[i]


@workunit
def reciprocal_i_k(i, out, a):
    """C's 1 / x: 1 and -1 are their own reciprocals, every other integer gives 0 (NumPy leaves 0 undefined)."""
    x = a[i]
    out[i] = x if x == 1 or x == -1 else 0


@workunit
def sign_k(i, out, a):
    x = a[i]
    out[i] = 1 if x > 0 else (-1 if x < 0 else x)  # 0 and NaN are their own sign


@function
def rint_f(x: double) -> double:
    """Round half to even (C's rint in the default mode, NumPy's round); the sign of a zero result is x's."""
    r = math.floor(x)
    d = x - r
    if d > 0.5 or (d == 0.5 and math.fmod(r, 2.0) != 0.0):
        r += 1.0
    if r == 0.0:
        return math.copysign(0.0, x)
    return r


@workunit
def round_k(i, out, a, scale):
    out[i] = rint_f(a[i] * scale) / scale


@workunit
def round_neg_k(i, out, a, scale):
    out[i] = rint_f(a[i] / scale) * scale


@workunit
def tan_k(i, out, a):
    out[i] = math.tan(a[i])


@workunit
def tanh_k(i, out, a):
    out[i] = math.tanh(a[i])


@workunit
def sinh_k(i, out, a):
    out[i] = math.sinh(a[i])


@workunit
def cosh_k(i, out, a):
    out[i] = math.cosh(a[i])


@workunit
def log2_k(i, out, a):
    out[i] = math.log2(a[i])


@workunit
def log10_k(i, out, a):
    out[i] = math.log10(a[i])


@workunit
def log1p_k(i, out, a):
    out[i] = math.log1p(a[i])


@workunit
def expm1_k(i, out, a):
    out[i] = math.expm1(a[i])


@workunit
def exp2_k(i, out, a):
    out[i] = 2.0 ** a[i]


@workunit
def floor_k(i, out, a):
    out[i] = math.floor(a[i])


@workunit
def ceil_k(i, out, a):
    out[i] = math.ceil(a[i])


@workunit
def trunc_k(i, out, a):
    out[i] = math.trunc(a[i])


@workunit
def isnan_k(i, out, a):
    out[i] = a[i] != a[i]


@workunit
def isinf_k(i, out, a):
    out[i] = math.isinf(a[i])


@workunit
def isfinite_k(i, out, a):
    out[i] = math.isfinite(a[i])


# --- integer and product reductions ---------------------------------------------------------------
@workunit
def sum_int_k(i, acc: Acc[int64], a):
    acc += a[i]


@workunit
def dot_int_k(i, acc: Acc[int64], a, b):
    acc += a[i] * b[i]


@workunit
def pick_value_int_k(i, acc: Acc[int64], vals, largest):
    best = vals[0]
    for c in range(1, vals.extent(0)):
        x = vals[c]
        if x > best if largest else x < best:
            best = x
    acc += best


@workunit
def chunk_prod_k(c, vals, a, chunk):
    """Product of chunk c of a (kernel reductions only sum; a second launch multiplies the chunks). The product
    starts from a literal: ``vals`` is new memory, whatever it held (NaN included) must not reach it."""
    begin = c * chunk
    end = min(begin + chunk, a.extent(0))
    p = 1.0
    for j in range(begin, end):
        p *= a[j]
    vals[c] = p


@workunit
def chunk_prod_int_k(c, vals, a, chunk):
    """``chunk_prod_k`` for integer and bool arrays: int64 products, wrapping as NumPy's."""
    begin = c * chunk
    end = min(begin + chunk, a.extent(0))
    p: int64 = 1
    for j in range(begin, end):
        p *= a[j]
    vals[c] = p


@workunit
def pick_prod_k(i, acc: Acc[double], vals):
    p = 1.0
    for c in range(vals.extent(0)):
        p *= vals[c]
    acc += p


@workunit
def pick_prod_int_k(i, acc: Acc[int64], vals):
    p = vals[0]
    for c in range(1, vals.extent(0)):
        p *= vals[c]
    acc += p


@workunit
def rows_sum_int_k(i, out, a):
    s = 0
    for j in range(a.extent(1)):
        s += a[i][j]
    out[i] = s


@workunit
def rows_prod_k(i, out, a):
    p = 1.0
    for j in range(a.extent(1)):
        p *= a[i][j]
    out[i] = p


@workunit
def rows_prod_int_k(i, out, a):
    p = 1
    for j in range(a.extent(1)):
        p *= a[i][j]
    out[i] = p
