"""Array constructors (``zeros``, ``ones``, ``full``, ``empty``, their ``*_like`` forms, ``linspace``, ``logspace``).

New memory has no pending readers or writers, so constant fills, and the ranges of ``linspace``/``logspace``
(NumPy's values to the last bit), are done by NumPy at allocation; only a ``full`` with a Future value needs
a kernel (it must wait for the reduction that produces it). While the default space is a GPU's, a constant fill
is also marked as such (``views.mark_constant``), so the GPU's copy is filled there rather than copied over, and
``empty``'s memory is undefined (no copy before the first GPU write).
"""
from __future__ import annotations

import numbers
import operator

import numpy as np

from ..future import Future
from .. import views
from ..runtime import device
from ..types import dtype_of
from ..views import View, mark_constant
from ._common import for_gpu
from .elementwise import fill


def _np_dtype(dtype) -> np.dtype:
    return dtype_of(np.float64 if dtype is None else dtype).np


def _constant(array: np.ndarray) -> View:
    if for_gpu():
        mark_constant(array)
    return View.wrap(array)


def empty(shape, dtype=None) -> View:
    array = np.empty(shape, dtype=_np_dtype(dtype))
    if for_gpu():
        device.undefined(array)
    view = View.wrap(array)
    views.note_undefined(array)
    return view


def zeros(shape, dtype=None) -> View:
    return _constant(np.zeros(shape, dtype=_np_dtype(dtype)))


def ones(shape, dtype=None) -> View:
    return _constant(np.ones(shape, dtype=_np_dtype(dtype)))


def full(shape, fill_value, dtype=None) -> View:
    """Like NumPy, the dtype defaults to that of ``fill_value``."""
    if isinstance(fill_value, Future):
        return fill(empty(shape, fill_value.dtype if dtype is None else dtype), fill_value)
    if dtype is None:
        dtype = np.asarray(fill_value).dtype
    return _constant(np.full(shape, fill_value, dtype=_np_dtype(dtype)))


def _like(a, dtype) -> tuple:
    """Shape and dtype of ``a`` (its shape is known without waiting for pending kernels)."""
    if isinstance(a, View):
        return a.shape, a.dtype.np if dtype is None else dtype
    arr = np.asarray(a)
    return arr.shape, arr.dtype if dtype is None else dtype


def empty_like(a, dtype=None) -> View:
    return empty(*_like(a, dtype))


def zeros_like(a, dtype=None) -> View:
    return zeros(*_like(a, dtype))


def ones_like(a, dtype=None) -> View:
    return ones(*_like(a, dtype))


def full_like(a, fill_value, dtype=None) -> View:
    shape, dtype = _like(a, dtype)
    return full(shape, fill_value, dtype)


def _num(name: str, num) -> int:
    try:
        num = operator.index(num)
    except TypeError:
        raise TypeError(f"{name}: num must be an int, got {type(num).__name__}") from None
    if num < 0:
        raise ValueError(f"{name}: num must be non-negative, got {num}")
    return num


def _bound(name: str, param: str, x) -> float:
    if isinstance(x, (numbers.Real, Future)) or isinstance(x, np.ndarray) and x.ndim == 0:
        return float(x)
    raise TypeError(f"{name}: {param} must be a number, got {type(x).__name__}")


def linspace(start, stop, num=50, endpoint=True, *, dtype=None):
    """``num`` evenly spaced numbers (float64 unless ``dtype``) from ``start`` to ``stop``, which is included
    unless ``endpoint`` is False."""
    values = np.linspace(_bound("linspace", "start", start), _bound("linspace", "stop", stop),
                         _num("linspace", num), endpoint=endpoint, dtype=_np_dtype(dtype))
    return View.wrap(values)


def logspace(start, stop, num=50, base=10.0, *, endpoint=True, dtype=None):
    """``base ** linspace(start, stop, num)`` (PyKokkos's argument order: ``base`` is the fourth; NumPy's
    ``endpoint`` and ``dtype`` are keywords)."""
    values = np.logspace(_bound("logspace", "start", start), _bound("logspace", "stop", stop),
                         _num("logspace", num), endpoint=endpoint, base=_bound("logspace", "base", base),
                         dtype=_np_dtype(dtype))
    return View.wrap(values)
