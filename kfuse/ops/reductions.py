"""Reductions: ``sum, mean, var, max, min, argmax, argmin`` over a whole array or one axis of a 2-D array.

Over the whole array the result comes from ``pk.parallel_reduce``: a Python number, or a Future while
fusion is on (``mean``/``var`` fold their divisions into the reduction so nothing waits on the host).
Kernel reductions only sum, so max/min take two launches: each of a few hundred chunks finds its best
element, then one thread picks the best chunk. Along an axis the result is a View; axis 0 is computed
as the rows of the transposed (strided) View, so every axis kernel reduces along its last index.
Whole-array results are float64 (argmax/argmin: int).
"""
from __future__ import annotations

import builtins

import numpy as np

from ..dispatch import parallel_for, parallel_reduce
from ..views import View
from . import kernels as k
from ._common import as_view, contiguous, flat, new_view, output, transposed

_MAX_CHUNKS = 512


def _whole(a) -> View:
    return flat(contiguous(as_view(a)))


def _rows(a, axis: int) -> View:
    """The 2-D View whose rows are the lines reduced along ``axis``."""
    v = as_view(a)
    if v.ndim != 2:
        raise ValueError(f"axis reductions take 2-D arrays, got {v.ndim}-D")
    if axis not in (0, 1, -1, -2):
        raise ValueError(f"axis {axis} is out of range for a 2-D array")
    return v if axis in (1, -1) else transposed(v)


def _whole_axis(a, axis) -> bool:
    """axis=None, or the only axis of a 1-D array (NumPy returns a scalar then too)."""
    return axis is None or (as_view(a).ndim == 1 and axis in (0, -1))


def sum(a, axis=None, out=None):  # noqa: A001 - NumPy spelling
    if _whole_axis(a, axis):
        v = _whole(a)
        return parallel_reduce(v.size, k.sum_k, a=v, scale=1.0)
    rows = _rows(a, axis)
    return _launch_rows(k.rows_sum_k, rows, out, np.float64, divisor=1.0)


def mean(a, axis=None, out=None):
    if _whole_axis(a, axis):
        v = _whole(a)
        _nonempty(v, "mean")
        return parallel_reduce(v.size, k.sum_k, a=v, scale=1.0 / v.size)
    rows = _rows(a, axis)
    _nonempty(rows, "mean", along=True)
    return _launch_rows(k.rows_sum_k, rows, out, np.float64, divisor=float(rows.shape[1]))


def var(a, axis=None, ddof: int = 0, out=None):
    """Population variance by default (``ddof=0``), computed in two passes as NumPy does."""
    if _whole_axis(a, axis):
        v = _whole(a)
        if v.size - ddof <= 0:
            raise ValueError("var needs more elements than ddof")
        m = parallel_reduce(v.size, k.sum_k, a=v, scale=1.0 / v.size)
        return parallel_reduce(v.size, k.sqdev_k, a=v, mean=m, scale=1.0 / (v.size - ddof))
    rows = _rows(a, axis)
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
        return parallel_reduce(1, k.pick_value_k, vals=vals, largest=largest)
    rows = _rows(a, axis)
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
