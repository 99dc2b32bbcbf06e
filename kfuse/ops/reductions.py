"""Reductions: ``sum, prod, mean, var, max, min, argmax, argmin`` with NumPy's ``axis`` (None, an int or a
tuple; argmax/argmin one axis), ``keepdims`` and ``out=``, on arrays of any rank.

Over the whole array the result comes from ``pk.parallel_reduce``: a Python number, or a Future while
fusion is on (``mean``/``var`` fold their divisions into the reduction so nothing waits on the host); with
``keepdims`` or ``out=`` a fill kernel writes it into a View, which takes the Future without waiting.
Kernel reductions only sum, so max/min take two launches: each of a few hundred chunks finds its best
element, then one thread picks the best chunk. Along axes the array is seen as a 2-D (kept positions,
reduced elements) View (``_lines``) and one kernel reduces each row.
Whole-array results are Python numbers of NumPy's kind: ints for integer and bool arrays (sum, prod, max, min,
argmax, argmin), floats otherwise; View results have NumPy's dtypes.
"""
from __future__ import annotations

import builtins
import numbers
import operator

import numpy as np

from ..dispatch import parallel_for, parallel_reduce
from ..views import View
from ..types import DType
from . import kernels as k, lazy
from ._common import flat, new_view, output, view_of
from ._lines import c_order, reduced_axes, result_shape, rows
from .elementwise import copy, fill

_MAX_CHUNKS = 512


def _reduce(name: str, v: View, axis, out, keepdims: bool, dtype, whole, along):
    """Run a reduction of v: ``whole(flat View)`` gives the number (or Future) for the whole array,
    ``along(rows, target)`` fills the 1-D ``target`` with one result per row of the 2-D ``rows``."""
    reduced = reduced_axes(name, v, axis)
    shape = result_shape(v.shape, reduced, bool(keepdims))
    if reduced is None:
        value = whole(flat(c_order(v)))
        if out is None and not keepdims:
            return value
        return fill(output(out, shape, dtype, name), value)
    lines = rows(v, reduced)
    target = output(out, shape, dtype, name)
    direct = target.storage == "right" or target.ndim == 1
    dest = flat(target) if direct else new_view(lines.shape[0], dtype)
    along(lines, dest)
    if not direct:
        _copy_back(dest, target)
    return target


def _each_row(wu, lines: View, **args) -> None:
    """One thread per row of ``lines`` (none for no rows)."""
    if lines.shape[0]:
        parallel_for(lines.shape[0], wu, a=lines, **args)


def _row_sums(lines: View, target: View, divisor: float, fresh: bool) -> None:
    """``target[i] = sum(lines[i, :]) / divisor``: into new memory (``fresh``) recorded with the operations
    computing ``lines`` while they are pending (kfuse/ops/lazy.py ``rows_sum``), else the row kernel."""
    if not (fresh and lazy.rows_sum(lines, target, divisor)):
        _each_row(k.rows_sum_k, lines, out=target, divisor=divisor)


def _copy_back(dest: View, target: View) -> None:
    """A strided ``out=`` receives the results computed in the contiguous ``dest`` (a copy kernel)."""
    copy(View.wrap(dest._array.reshape(target.shape)), out=target)


def _sum_dtype(v: View) -> np.dtype:
    """NumPy's dtype of a sum or product of v: int64 for bools and signed integers, uint64 for unsigned, the
    float dtype for floats."""
    kind = v.dtype.np.kind
    if kind in "bi":
        return np.dtype(np.int64)
    if kind == "u":
        return np.dtype(np.uint64)
    return v.dtype.np


def _whole_sum(f: View, scale: float):
    """``sum(f) * scale`` for a float64 View: recorded with the operations producing ``f`` while they are
    pending (kfuse/ops/lazy.py), else a reduction kernel call."""
    if f.dtype is DType.float64:
        future = lazy.reduce(k.sum_k, f, (scale,), DType.float64)
        if future is not None:
            return future
    return parallel_reduce(f.size, k.sum_k, a=f, scale=scale)


def _mean_dtype(v: View) -> np.dtype:
    """NumPy's dtype of a mean or variance: float64 but for float32 arrays."""
    return v.dtype.np if v.dtype.np.kind == "f" else np.dtype(np.float64)


def sum(a, axis=None, out=None, keepdims=False):  # noqa: A001 - NumPy spelling
    """Sum of the elements (an int for integer and bool arrays, a float otherwise; a Future while fusion is on),
    or a View along ``axis`` in NumPy's dtype (int64 for integers, the float dtype)."""
    v = view_of("sum", "a", a)
    dtype = _sum_dtype(v)
    if dtype.kind != "f":
        return _reduce("sum", v, axis, out, keepdims, dtype, lambda f: parallel_reduce(f.size, k.sum_int_k, a=f),
                       lambda r, t: _each_row(k.rows_sum_int_k, r, out=t))
    return _reduce("sum", v, axis, out, keepdims, dtype,
                   lambda f: _whole_sum(f, 1.0),
                   lambda r, t: _row_sums(r, t, 1.0, out is None))


def prod(a, axis=None, out=None, keepdims=False):
    """Product of the elements (an int for integer and bool arrays; integers wrap as in NumPy's int64), or a
    View along ``axis``."""
    v = view_of("prod", "a", a)
    dtype = _sum_dtype(v)
    integral = dtype.kind != "f"

    def whole(f: View):
        if f.size == 0:
            return 1 if integral else 1.0
        chunk = builtins.max(64, -(-f.size // _MAX_CHUNKS))
        n_chunks = -(-f.size // chunk)
        vals = new_view(n_chunks, np.int64 if integral else np.float64)
        parallel_for(n_chunks, k.chunk_prod_int_k if integral else k.chunk_prod_k, vals=vals, a=f, chunk=chunk)
        return parallel_reduce(1, k.pick_prod_int_k if integral else k.pick_prod_k, vals=vals)

    wu = k.rows_prod_int_k if integral else k.rows_prod_k
    return _reduce("prod", v, axis, out, keepdims, dtype, whole, lambda r, t: _each_row(wu, r, out=t))


def mean(a, axis=None, out=None, keepdims=False):
    """Arithmetic mean: float64 for integer and bool arrays, the float dtype for floats. An empty reduction
    raises ValueError (NumPy warns and gives NaN)."""
    v = view_of("mean", "a", a)

    def whole(f: View):
        _nonempty("mean", f.size)
        return _whole_sum(f, 1.0 / f.size)

    def along(r: View, t: View):
        _nonempty("mean", r.shape[1])
        _row_sums(r, t, float(r.shape[1]), out is None)

    return _reduce("mean", v, axis, out, keepdims, _mean_dtype(v), whole, along)


def var(a, axis=None, ddof=0, out=None, keepdims=False):
    """Variance with divisor ``n - ddof`` (population variance by default), in two passes as NumPy computes
    it. ``n - ddof <= 0`` raises ValueError (NumPy warns and gives NaN or inf)."""
    v = view_of("var", "a", a)
    if isinstance(ddof, builtins.bool) or not isinstance(ddof, numbers.Real):
        raise TypeError(f"var: ddof must be a number, got {ddof!r}")
    ddof = float(ddof)

    def check(n: int):
        if n - ddof <= 0:
            raise ValueError(f"var: {n} element(s) per result, ddof={ddof:g} leaves no degrees of freedom")

    def whole(f: View):
        check(f.size)
        m = parallel_reduce(f.size, k.sum_k, a=f, scale=1.0 / f.size)
        return parallel_reduce(f.size, k.sqdev_k, a=f, mean=m, scale=1.0 / (f.size - ddof))

    def along(r: View, t: View):
        check(r.shape[1])
        _each_row(k.rows_var_k, r, out=t, ddof=ddof)

    return _reduce("var", v, axis, out, keepdims, _mean_dtype(v), whole, along)


def max(a, axis=None, out=None, keepdims=False):  # noqa: A001 - NumPy spelling
    """Largest element (NaN if any is NaN), in the array's dtype; a whole bool array gives 0 or 1."""
    return _best("max", a, axis, out, keepdims, largest=True, index=False)


def min(a, axis=None, out=None, keepdims=False):  # noqa: A001 - NumPy spelling
    return _best("min", a, axis, out, keepdims, largest=False, index=False)


amax, amin = max, min


def argmax(a, axis=None, out=None, keepdims=False):
    """Index of the first largest element (the first NaN if any, as NumPy), over the flattened array or along
    one axis (an int, as NumPy's argmax takes)."""
    return _best("argmax", a, axis, out, keepdims, largest=True, index=True)


def argmin(a, axis=None, out=None, keepdims=False):
    return _best("argmin", a, axis, out, keepdims, largest=False, index=True)


def _best(name: str, a, axis, out, keepdims: bool, largest: bool, index: bool):
    v = view_of(name, "a", a)
    if index and axis is not None:
        try:
            axis = operator.index(axis)
        except TypeError:
            raise TypeError(f"{name}: axis must be an int or None (one axis, as in NumPy), got {axis!r}") from None

    def whole(f: View):
        _nonempty(name, f.size)
        chunk = builtins.max(64, -(-f.size // _MAX_CHUNKS))
        n_chunks = -(-f.size // chunk)
        vals, idxs = new_view(n_chunks, f.dtype.np), new_view(n_chunks, np.int64)
        parallel_for(n_chunks, k.chunk_best_k, vals=vals, idxs=idxs, a=f, chunk=chunk, largest=largest)
        if index:
            return parallel_reduce(1, k.pick_index_k, vals=vals, idxs=idxs, largest=largest)
        if not f.dtype.is_float:  # integers (and bools, as 0/1) stay integers
            return parallel_reduce(1, k.pick_value_int_k, vals=vals, largest=largest)
        return parallel_reduce(1, k.pick_value_k, vals=vals, largest=largest)

    def along(r: View, t: View):
        _nonempty(name, r.shape[1])
        vals = new_view(r.shape[0], r.dtype.np) if index else t
        idxs = t if index else new_view(r.shape[0], np.int64)
        _each_row(k.rows_best_k, r, vals=vals, idxs=idxs, largest=largest)

    return _reduce(name, v, axis, out, keepdims, np.dtype(np.int64) if index else v.dtype.np, whole, along)


def _nonempty(name: str, n: int) -> None:
    if n == 0:
        raise ValueError(f"{name} of an empty array (or along an empty axis)")
