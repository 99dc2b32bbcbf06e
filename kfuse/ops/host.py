"""Array functions that NumPy computes on the host: sorting, searching, set membership, truth tests, weighted
averages, and gathers whose indices must be checked.

Each needs the values before it can answer (a result's shape, an error, a Python number for an ``if``), so
there is no kernel to defer: the inputs are read through their host barrier (``host_values``), which runs the
pending kernels that write them first, and NumPy computes the result. Arrays come back as new Views and
scalars as NumPy scalars, with NumPy's dtypes (PyKokkos returns float64 Views from ``unique``/``index`` and
int8/uint8 ones from ``in1d``; NumPy's types keep integers integral and masks boolean).
"""
from __future__ import annotations

import numpy as np

from ..views import View
from ._common import axes, host_values


def _result(value):
    """A new array as a View; a NumPy scalar (or 0-d array) as a NumPy scalar."""
    if isinstance(value, np.ndarray) and value.ndim:
        return View.wrap(value)
    return value[()] if isinstance(value, np.ndarray) else value


def unique(view):
    """The sorted distinct elements of ``view`` (flattened), in its dtype."""
    return View.wrap(np.unique(host_values("unique", "view", view)))


def all(x, /, *, axis=None, keepdims=False):  # noqa: A001 - PyKokkos/NumPy spelling
    """Whether every element is true (non-zero; NaN counts as true): a NumPy bool, or a bool View with ``axis``
    or ``keepdims``."""
    values = host_values("all", "x", x)
    return _result(np.all(values, axis=axes("all", axis, values.ndim), keepdims=keepdims))


def any(x, /, *, axis=None, keepdims=False):  # noqa: A001 - PyKokkos/NumPy spelling
    """Whether some element is true, shaped as :func:`all`."""
    values = host_values("any", "x", x)
    return _result(np.any(values, axis=axes("any", axis, values.ndim), keepdims=keepdims))


def find_max(viewA):
    """The largest element of ``viewA`` over all its dimensions, as a NumPy scalar of its dtype (NaN if any
    element is NaN, as ``np.max``). PyKokkos applies Python's ``max`` to the View, which compares rows of a
    2-D View; every dimension is what a NumPy user expects."""
    values = host_values("find_max", "viewA", viewA)
    if values.size == 0:
        raise ValueError("find_max: viewA is empty")
    return np.max(values)


def searchsorted(view, ele, side="left", sorter=None):
    """Where ``ele`` would be inserted into the sorted 1-D ``view`` to keep it sorted (NumPy's
    ``searchsorted``): an integer for a number, an int64 View for an array."""
    values = host_values("searchsorted", "view", view)
    if values.ndim != 1:
        raise ValueError(f"searchsorted: view must be 1-D, got shape {values.shape}")
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    order = None
    if sorter is not None:
        order = host_values("searchsorted", "sorter", sorter)
        if order.shape != values.shape or order.dtype.kind not in "iu":
            raise ValueError(f"searchsorted: sorter must be integer indices of view's shape {values.shape}")
    return _result(np.searchsorted(values, host_values("searchsorted", "ele", ele), side=side, sorter=order))


def in1d(viewA, viewB, assume_unique=False, invert=False):
    """For each element of ``viewA`` (flattened), whether it occurs in ``viewB``: a 1-D bool View (NumPy's
    ``in1d``; PyKokkos returns 0/1 int8, which would index as integers rather than as a mask)."""
    a = host_values("in1d", "viewA", viewA)
    b = host_values("in1d", "viewB", viewB)
    return View.wrap(np.isin(a.ravel(), b, assume_unique=assume_unique, invert=invert))


def index(viewA, viewB):
    """``viewA[viewB]`` for an integer array ``viewB``: a new View of ``viewA``'s dtype whose shape is
    ``viewB``'s followed by ``viewA``'s trailing ones (NumPy's integer-array indexing; negative indices count
    from the end). Indices are checked on the host, where a kernel would read out of bounds."""
    values = host_values("index", "viewA", viewA)
    idx = host_values("index", "viewB", viewB)
    if values.ndim == 0:
        raise ValueError("index: viewA must have at least one dimension")
    if idx.dtype.kind not in "iu":
        raise TypeError(f"index: viewB must hold integers, got {idx.dtype}")
    n = values.shape[0]
    if idx.size and not (-n <= idx.min() and idx.max() < n):
        bad = idx[(idx < -n) | (idx >= n)].flat[0]
        raise IndexError(f"index: viewB holds {bad}, out of range for the {n} elements along viewA's first axis")
    return View.wrap(values[idx])


def average(a, axis=None, weights=None, returned=False, *, keepdims=False):
    """NumPy's ``average``: the mean along ``axis`` weighted by ``weights`` (the shape of ``a``, or 1-D along
    ``axis``); with ``returned``, also the sum of the weights. Numbers for ``axis=None``, else Views."""
    values = host_values("average", "a", a)
    axis = axes("average", axis, values.ndim)
    w = None
    if weights is not None:
        w = host_values("average", "weights", weights)
        if w.shape != values.shape:
            if axis is None:
                raise TypeError(f"average: weights of shape {w.shape} differ from a's {values.shape}; give axis")
            if w.ndim != 1 or isinstance(axis, tuple):
                raise TypeError(f"average: weights of shape {w.shape} must be 1-D along one axis of a")
            if w.shape[0] != values.shape[axis]:
                raise ValueError(f"average: weights has {w.shape[0]} elements, axis {axis} of a has "
                                 f"{values.shape[axis]}")
    reduced = range(values.ndim) if axis is None else axis if isinstance(axis, tuple) else (axis,)
    if 0 in (values.shape[d] for d in reduced):
        raise ValueError("average: a has no elements to average along axis")  # NumPy: NaN and a warning
    try:
        result = np.average(values, axis=axis, weights=w, returned=returned, keepdims=keepdims)
    except ZeroDivisionError:
        raise ZeroDivisionError("average: weights sum to zero, so the average is undefined") from None
    if returned:
        return tuple(_result(r) for r in result)
    return _result(result)

