"""The workunits behind the array operations.

Elementwise kernels index every View by the thread index alone (``out[i] = f(a[i], b[i])``), the one
access pattern the fuser can prove safe to merge with neighbouring kernels; they run over flat 1-D
Views (see ``_common.flat``). Kept apart from the API modules because those define ``sum``/``max``/
``abs``, which would shadow the builtins these kernels call.
"""
from __future__ import annotations

import math

from ..frontend.workunit import workunit
from ..types import Acc, double, int64


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
