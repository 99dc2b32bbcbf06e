"""Reductions: ``sum, prod, mean, var, max, min, argmax, argmin`` over a whole array or one axis of a 2-D array.

Over the whole array the result comes from ``pk.parallel_reduce``: a Python number, or a Future while
fusion is on (``mean``/``var`` fold their divisions into the reduction so nothing waits on the host).
Kernel reductions only sum, so max/min take two launches: each of a few hundred chunks finds its best
element, then one thread picks the best chunk. Along an axis the result is a View; axis 0 is computed
as the rows of the transposed (strided) View, so every axis kernel reduces along its last index.
Whole-array results are Python numbers of NumPy's kind: ints for integer and bool arrays (sum, prod, max, min,
argmax, argmin), floats otherwise; axis results have NumPy's dtypes.
"""
from __future__ import annotations

import builtins

import numpy as np

from ..dispatch import parallel_for, parallel_reduce
from ..views import View
from . import kernels as k
from ._common import as_view, contiguous, flat, new_view, output, transposed, view_of

_MAX_CHUNKS = 512


def _whole(a) -> View:
    return flat(contiguous(as_view(a)))


def _rows(name: str, a, axis: int) -> View:
    """The 2-D View whose rows are the lines reduced along ``axis``."""
    v = as_view(a)
    if v.ndim != 2:
        raise ValueError(f"{name}: axis reductions take 2-D arrays, got {v.ndim}-D")
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)) or axis not in (0, 1, -1, -2):
        raise ValueError(f"{name}: axis {axis!r} is out of range for a 2-D array")
    return v if axis in (1, -1) else transposed(v)


def _whole_axis(a, axis) -> bool:
    """axis=None, or the only axis of a 1-D array (NumPy returns a scalar then too)."""
    return axis is None or (as_view(a).ndim == 1 and axis in (0, -1))


def _sum_dtype(name: str, v: View) -> np.dtype:
    """NumPy's dtype of a sum or product of v: int64 for bools and signed integers, uint64 for unsigned, the
    float dtype for floats."""
    kind = v.dtype.np.kind
    if kind == "b" or kind == "i":
        return np.dtype(np.int64)
    if kind == "u":
        return np.dtype(np.uint64)
    return v.dtype.np


def sum(a, axis=None, out=None):  # noqa: A001 - NumPy spelling
    """Sum of all elements (an int for integer and bool arrays, a float otherwise; a Future while fusion is on),
    or a View along ``axis`` of a 2-D array in NumPy's dtype (int64 for integers, the float dtype)."""
    v = view_of("sum", "a", a)
    dtype = _sum_dtype("sum", v)
    if _whole_axis(v, axis):
        v = _whole(v)
        if dtype.kind != "f":
            return parallel_reduce(v.size, k.sum_int_k, a=v)
        return parallel_reduce(v.size, k.sum_k, a=v, scale=1.0)
    rows = _rows("sum", v, axis)
    if dtype.kind != "f":
        return _launch_rows(k.rows_sum_int_k, rows, out, dtype)
    return _launch_rows(k.rows_sum_k, rows, out, dtype, divisor=1.0)


def prod(a, axis=None, out=None):
    """Product of all elements (an int for integer and bool arrays; integers wrap as in NumPy's int64), or a
    View along ``axis`` of a 2-D array."""
    v = view_of("prod", "a", a)
    dtype = _sum_dtype("prod", v)
    integral = dtype.kind != "f"
    if _whole_axis(v, axis):
        v = _whole(v)
        if v.size == 0:
            return 1 if integral else 1.0
        chunk = builtins.max(64, -(-v.size // _MAX_CHUNKS))
        n_chunks = -(-v.size // chunk)
        vals = new_view(n_chunks, np.int64 if integral else np.float64)
        parallel_for(n_chunks, k.chunk_prod_k, vals=vals, a=v, chunk=chunk)
        return parallel_reduce(1, k.pick_prod_int_k if integral else k.pick_prod_k, vals=vals)
    rows = _rows("prod", v, axis)
    return _launch_rows(k.rows_prod_int_k if integral else k.rows_prod_k, rows, out, dtype)


def mean(a, axis=None, out=None):
    """Arithmetic mean: float64 for integer arrays, the float dtype along an axis."""
    v = view_of("mean", "a", a)
    dtype = np.dtype(np.float64) if v.dtype.np.kind != "f" else v.dtype.np
    if _whole_axis(v, axis):
        v = _whole(v)
        _nonempty(v, "mean")
        return parallel_reduce(v.size, k.sum_k, a=v, scale=1.0 / v.size)
    rows = _rows("mean", v, axis)
    _nonempty(rows, "mean", along=True)
    return _launch_rows(k.rows_sum_k, rows, out, dtype, divisor=float(rows.shape[1]))


def var(a, axis=None, ddof: int = 0, out=None):
    """Population variance by default (``ddof=0``), computed in two passes as NumPy does."""
    if _whole_axis(a, axis):
        v = _whole(a)
        if v.size - ddof <= 0:
            raise ValueError("var needs more elements than ddof")
        m = parallel_reduce(v.size, k.sum_k, a=v, scale=1.0 / v.size)
        return parallel_reduce(v.size, k.sqdev_k, a=v, mean=m, scale=1.0 / (v.size - ddof))
    rows = _rows("var", a, axis)
    if rows.shape[1] - ddof <= 0:
        raise ValueError("var needs more elements than ddof along the axis")
    return _launch_rows(k.rows_var_k, rows, out, np.float64, ddof=int(ddof))


def max(a, axis=None, out=None):  # noqa: A001 - NumPy spelling
    return _best(a, axis, out, largest=True, index=False)


def min(a, axis=None, out=None):  # noqa: A001 - NumPy spelling
    return _best(a, axis, out, largest=False, index=False)


amax, amin = max, min


def argmax(a, axis=None, out=None):
    """Index of the first largest element (the first NaN if any, as NumPy)."""
    return _best(a, axis, out, largest=True, index=True)


def argmin(a, axis=None, out=None):
    return _best(a, axis, out, largest=False, index=True)


def _best(a, axis, out, largest: bool, index: bool):
    name = ("arg" if index else "") + ("max" if largest else "min")
    if _whole_axis(a, axis):
        v = _whole(a)
        _nonempty(v, name)
        chunk = builtins.max(64, -(-v.size // _MAX_CHUNKS))
        n_chunks = -(-v.size // chunk)
        vals, idxs = new_view(n_chunks, v.dtype.np), new_view(n_chunks, np.int64)
        parallel_for(n_chunks, k.chunk_best_k, vals=vals, idxs=idxs, a=v, chunk=chunk, largest=largest)
        if index:
            return parallel_reduce(1, k.pick_index_k, vals=vals, idxs=idxs, largest=largest)
        if not v.dtype.is_float:  # integers (and bools, as 0/1) stay integers
            return parallel_reduce(1, k.pick_value_int_k, vals=vals, largest=largest)
        return parallel_reduce(1, k.pick_value_k, vals=vals, largest=largest)
    rows = _rows(name, a, axis)
    _nonempty(rows, name, along=True)
    n = rows.shape[0]
    vals = new_view(n, rows.dtype.np) if index else output(out, (n,), rows.dtype.np)
    idxs = output(out, (n,), np.int64) if index else new_view(n, np.int64)
    if n:
        parallel_for(n, k.rows_best_k, vals=vals, idxs=idxs, a=rows, largest=largest)
    return idxs if index else vals


def _launch_rows(wu, rows: View, out, dtype, **scalars) -> View:
    target = output(out, (rows.shape[0],), dtype)
    if rows.shape[0]:
        parallel_for(rows.shape[0], wu, out=target, a=rows, **scalars)
    return target


def _nonempty(v: View, name: str, along: bool = False) -> None:
    if (v.shape[1] if along else v.size) == 0:
        raise ValueError(f"{name} of an empty array")
