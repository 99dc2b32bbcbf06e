"""Shape and layout functions: ``reshape, ravel, transpose, expand_dims, atleast_2d, hstack, col``.

As in NumPy, a result that can share the input's memory does (``transpose``, ``expand_dims``, ``atleast_2d``,
and ``reshape``/``ravel`` of an array contiguous in the requested order): a new View over the same bytes, made
without touching the data, so nothing waits for pending kernels and writes through one are seen by the other.
Where NumPy copies, the copy is a kernel (traced and fused like any other) for 1-D and 2-D data and a host
copy through the barrier above that (kfuse's copy kernels take strided Views of rank 1 and 2). PyKokkos copies
in every case; where memory can be shared the values are the same either way.
"""
from __future__ import annotations

import operator

import numpy as np

from ..views import View
from ._common import axes, new_view, transposed, view_of
from .elementwise import copy


def _copied(v: View) -> View:
    """A new C-contiguous View with v's elements: a copy kernel for rank <= 2, else a host copy (barrier)."""
    return copy(v) if v.ndim <= 2 else View.wrap(v.copy())


def _order(name: str, order: str, v: View) -> str:
    """'C' or 'F' for ``order`` ('A' is 'F' for Fortran-contiguous arrays only, as in NumPy)."""
    if order not in ("C", "F", "A"):
        raise ValueError(f"{name}: order must be 'C', 'F' or 'A', got {order!r}")
    if order == "A":
        flags = v._array.flags
        return "F" if flags.f_contiguous and not flags.c_contiguous else "C"
    return order


def _new_shape(shape, size: int) -> tuple:
    """``shape`` (an int or a sequence, one entry may be -1) for ``size`` elements, with -1 filled in."""
    try:
        dims = (operator.index(shape),) if np.ndim(shape) == 0 else tuple(operator.index(d) for d in shape)
    except TypeError:
        raise TypeError(f"reshape: shape must be an int or a tuple of ints, got {shape!r}") from None
    if dims.count(-1) > 1 or any(d < -1 for d in dims):
        raise ValueError(f"reshape: shape {dims} may have one -1 and no other negative entry")
    known = int(np.prod([d for d in dims if d != -1]))
    if -1 in dims:
        if known == 0 or size % known:
            raise ValueError(f"reshape: cannot reshape {size} elements into shape {dims}")
        dims = tuple(size // known if d == -1 else d for d in dims)
    if int(np.prod(dims)) != size:
        raise ValueError(f"reshape: cannot reshape {size} elements into shape {dims}")
    return dims


def _reshape_c(v: View, shape: tuple, copy_: bool | None) -> View:
    if copy_ is False and v.storage != "right":
        raise ValueError("reshape: copy=False, but the array is not contiguous in the requested order, so its "
                         "elements cannot be reshaped without a copy")
    source = _copied(v) if copy_ or v.storage != "right" else v
    return View.wrap(source._array.reshape(shape))


def reshape(x, /, shape, *, order="C", copy=None):
    """``x`` with a new ``shape`` (one entry may be -1), its elements read and placed in ``order`` ('C' row-major,
    'F' column-major, 'A'). ``copy``: True always copies, False raises where a copy is needed, None (default)
    shares memory when ``x`` is contiguous in that order. NumPy shares memory in a few more strided cases."""
    v = view_of("reshape", "x", x)
    shape = _new_shape(shape, v.size)
    if _order("reshape", order, v) == "F":  # column-major order is row-major order on the reversed axes
        return transposed(_reshape_c(transposed(v), shape[::-1], copy))
    return _reshape_c(v, shape, copy)


def ravel(view, order="C"):
    """The elements of ``view`` as a 1-D View in ``order`` ('C', 'F' or 'A'), sharing memory when ``view`` is
    contiguous in that order (as ``np.ravel``; PyKokkos copies)."""
    v = view_of("ravel", "view", view)
    _order("ravel", order, v)
    return reshape(v, -1, order=order)


def transpose(view, axes=None):
    """``view`` with its axes reversed (or permuted by ``axes``), sharing its memory as NumPy's transpose does.
    PyKokkos returns a copy for 2-D Views; values are the same, but writes to one are seen by the other here."""
    v = view_of("transpose", "view", view)
    if axes is None:
        return transposed(v)
    try:
        perm = tuple(operator.index(a) for a in axes)
    except TypeError:
        raise TypeError(f"transpose: axes must be a sequence of ints, got {axes!r}") from None
    if sorted(a % v.ndim if -v.ndim <= a < v.ndim else a for a in perm) != list(range(v.ndim)):
        raise ValueError(f"transpose: axes {axes!r} is not a permutation of the {v.ndim} axes")
    return View.wrap(v._array.transpose(perm))


def expand_dims(view, axis=0):
    """``view`` with a new axis of length 1 at ``axis`` (an int or a tuple, positions in the result), sharing
    its memory (NumPy's ``expand_dims``)."""
    v = view_of("expand_dims", "view", view)
    if axis is None:
        raise TypeError("expand_dims: axis must be an int or a tuple of ints, got None")
    ndim = v.ndim + (len(axis) if isinstance(axis, tuple) else 1)
    return View.wrap(np.expand_dims(v._array, axes("expand_dims", axis, ndim)))


def atleast_2d(*arys):
    """Each argument as a View of at least two dimensions (a number is 1x1, a 1-D array of n elements 1xn),
    sharing memory; a list of them for several arguments, as NumPy's ``atleast_2d``."""
    if not arys:
        raise TypeError("atleast_2d: needs at least one array")
    views = [view_of("atleast_2d", "arys", x) for x in arys]
    views = [v if v.ndim >= 2 else View.wrap(v._array.reshape((1, -1))) for v in views]
    return views[0] if len(views) == 1 else views


def hstack(viewA, viewB=None, *views):
    """The arrays joined along their second axis (their first if all are 1-D; numbers count as 1-element
    arrays), in NumPy's result dtype. Called as in PyKokkos, ``hstack(a, b, ...)``, or with one sequence, as
    in NumPy: ``hstack((a, b))``. The copies are kernels for 1-D and 2-D arrays."""
    if viewB is None and not views:
        if isinstance(viewA, (View, np.ndarray)) or not hasattr(viewA, "__iter__"):
            raise TypeError("hstack: give the arrays as hstack(a, b, ...) or as one sequence, hstack((a, b, ...))")
        arrays = list(viewA)
        names = [f"viewA[{i}]" for i in range(len(arrays))]
    else:
        arrays = [viewA, viewB, *views]
        names = ["viewA", "viewB"] + [f"views[{i}]" for i in range(len(views))]
    if not arrays:
        raise ValueError("hstack: needs at least one array")
    parts = [view_of("hstack", name, x) for name, x in zip(names, arrays)]
    parts = [View.wrap(p._array.reshape(1)) if p.ndim == 0 else p for p in parts]
    axis = 0 if all(p.ndim == 1 for p in parts) else 1
    first = parts[0]

    def others(v: View) -> tuple:  # the dimensions that must match
        return v.shape[:axis] + v.shape[axis + 1:]

    for p in parts[1:]:
        if p.ndim != first.ndim or others(p) != others(first):
            raise ValueError(f"hstack: arrays of shapes {first.shape} and {p.shape} cannot be joined along axis "
                             f"{axis} (all other dimensions must match)")
    if first.ndim > 2:  # host copies through the barrier
        return View.wrap(np.concatenate([p.copy() for p in parts], axis=1))
    shape = list(first.shape)
    shape[axis] = sum(p.shape[axis] for p in parts)
    out = new_view(tuple(shape), np.result_type(*(p.dtype.np for p in parts)))
    start = 0
    for p in parts:
        stop = start + p.shape[axis]
        copy(p, out=View.wrap(out._array[start:stop] if axis == 0 else out._array[:, start:stop]))
        start = stop
    return out


def col(view, col):
    """Column ``col`` of the 2-D ``view`` as a new 1-D View (a copy, as in PyKokkos; ``view[:, col]`` in NumPy
    terms, negative ``col`` counting from the end)."""
    v = view_of("col", "view", view)
    if v.ndim != 2:
        raise ValueError(f"col: view must be 2-D, got shape {v.shape}")
    try:
        j = operator.index(col)
    except TypeError:
        raise TypeError(f"col: col must be an int, got {type(col).__name__}") from None
    if not -v.shape[1] <= j < v.shape[1]:
        raise IndexError(f"col: col {j} is out of range for a view with {v.shape[1]} columns")
    return copy(View.wrap(v._array[:, j]))
