"""The lines an axis reduction reduces, as one 2-D View: row r holds the elements that make result element r.

Reducing any set of axes of an array of any rank is then a reduction along the last index of a 2-D View of
shape (kept positions, reduced elements), so one set of row kernels serves every rank and every axis tuple.
Where the array's memory already has that shape through two strides (every 2-D case, and the leading or
trailing axes of any rank) the 2-D View is a strided View of the same memory: no copy, nothing read. Where it
has not (axes in the middle of a rank >= 3 array), a gather kernel copies the elements into a new (kept,
reduced) View, reading them through offsets computed on the host from the shape alone: one more pass over the
data, but traced like any kernel, so nothing waits, and the row kernels stay the only reduction code.
"""
from __future__ import annotations

import math

import numpy as np

from ..dispatch import parallel_for
from ..policies import MDRangePolicy
from ..views import View
from . import math_kernels as mk
from ._common import axes, contiguous, flat, new_view


def reduced_axes(name: str, v: View, axis) -> tuple | None:
    """The sorted axes ``axis`` reduces, or None when it reduces the whole array (None, or every axis)."""
    chosen = axes(name, axis, v.ndim)
    if chosen is None:
        return None
    chosen = chosen if isinstance(chosen, tuple) else (chosen,)
    return None if len(chosen) == v.ndim else tuple(sorted(chosen))


def result_shape(shape: tuple, reduced, keepdims: bool) -> tuple:
    """The shape of a reduction's result: reduced axes dropped, or kept as length 1 with ``keepdims``."""
    if reduced is None:
        return (1,) * len(shape) if keepdims else ()
    if keepdims:
        return tuple(1 if d in reduced else n for d, n in enumerate(shape))
    return tuple(n for d, n in enumerate(shape) if d not in reduced)


def c_order(v: View) -> View:
    """v's elements in a C-contiguous View: v itself, a copy kernel for rank 2, a host copy (through the
    barrier) for strided Views of rank 3 and above, which kfuse's copy kernels do not take."""
    if v.storage == "right" or v.ndim <= 2:
        return contiguous(v)
    return View.wrap(v.copy())


def rows(v: View, reduced: tuple) -> View:
    """The 2-D (kept positions, reduced elements) View of v for reducing ``reduced``, both in C order."""
    kept = [d for d in range(v.ndim) if d not in reduced]
    n_kept = math.prod(v.shape[d] for d in kept)
    n_reduced = math.prod(v.shape[d] for d in reduced)
    lines = _reshaped_in_place(v._array.transpose(kept + list(reduced)), (n_kept, n_reduced))
    if lines is not None:
        return View.wrap(lines)
    out = new_view((n_kept, n_reduced), v.dtype.np)
    if out.size:
        source = flat(c_order(v))
        base, offset = (View.wrap(_offsets(v.shape, dims)) for dims in (kept, reduced))
        parallel_for(MDRangePolicy([0, 0], [n_kept, n_reduced]), mk.gather_rows_k, out=out, a=source, base=base,
                     offset=offset)
    return out


def _reshaped_in_place(array: np.ndarray, shape: tuple) -> np.ndarray | None:
    """``array`` reshaped without copying, or None where no strides reach that shape (only a View of the View's
    own memory will do: a copy would read it past the barrier). NumPy before 2.1 has no ``reshape(copy=False)``;
    there a plain reshape either views the same memory or copies it into memory of its own."""
    try:
        return array.reshape(shape, copy=False)
    except ValueError:
        return None
    except TypeError:  # NumPy < 2.1
        lines = array.reshape(shape)
        return lines if np.may_share_memory(lines, array) else None


def _offsets(shape: tuple, dims) -> np.ndarray:
    """Offsets into a C-contiguous array of ``shape`` of every position over ``dims`` (in C order), the other
    indices 0."""
    strides = [math.prod(shape[d + 1:]) for d in range(len(shape))]
    offsets = np.zeros(1, dtype=np.int64)
    for d in dims:
        offsets = (offsets[:, None] + np.arange(shape[d], dtype=np.int64) * strides[d]).ravel()
    return offsets
