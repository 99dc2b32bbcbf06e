"""Array constructors (``zeros``, ``ones``, ``full``, ``empty`` and their ``*_like`` forms).

New memory has no pending readers or writers, so constant fills are done by NumPy at allocation; only a
``full`` with a Future value needs a kernel (it must wait for the reduction that produces it).
"""
from __future__ import annotations

import numpy as np

from ..future import Future
from ..types import dtype_of
from ..views import View
from .elementwise import fill


def _np_dtype(dtype) -> np.dtype:
    return dtype_of(np.float64 if dtype is None else dtype).np


def empty(shape, dtype=None) -> View:
    return View.wrap(np.empty(shape, dtype=_np_dtype(dtype)))


def zeros(shape, dtype=None) -> View:
    return View.wrap(np.zeros(shape, dtype=_np_dtype(dtype)))


def ones(shape, dtype=None) -> View:
    return View.wrap(np.ones(shape, dtype=_np_dtype(dtype)))


def full(shape, fill_value, dtype=None) -> View:
    """Like NumPy, the dtype defaults to that of ``fill_value``."""
    if isinstance(fill_value, Future):
        return fill(empty(shape, fill_value.dtype if dtype is None else dtype), fill_value)
    if dtype is None:
        dtype = np.asarray(fill_value).dtype
    return View.wrap(np.full(shape, fill_value, dtype=_np_dtype(dtype)))


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
