"""Memory for the results of array operations, reused once nothing refers to it.

With fusion on, every intermediate result lives until its partition has run (the trace holds it), so a loop
of array statements allocates fresh memory for each one, and fresh memory costs a page fault per page on
its first write: fdtd_2d written as array code (NPBench medium, 20 steps) took 0.85 s fused against 0.16 s
with the same allocations served from warm memory. So results come from arrays kept here: an array whose only
reference is this pool's (no View, array or pending call over it) is handed out again for a result of the same
shape and dtype, already paged in, its address known (asking NumPy for it costs a microsecond, more than a small
result's allocation). The pooled array is the result's own: no view of other memory to make per result.

The pool keeps at most ``KFUSE_POOL_BYTES`` of arrays; past that, new results are plain allocations. An array
handed out again is new memory to everyone else: the GPU mirror of the old contents is dropped first
(runtime/device.py), no pending call can name it (it would hold a View over it), and the bytes a failed call
lost in it are forgotten (kfuse/tracer/failures.py keys them by memory owner, which for pooled memory is the
pooled array, alive in the pool: they would poison the new result; the failure itself is still reported at
``pk.fence()``). The failures forgotten are the runtime's in charge: a program running several runtimes may
see a later result of another one refused as lost (an error, never a stale value).
"""
from __future__ import annotations

import math

import numpy as np

from . import config, context, refcount
from .runtime import device

_pools: dict = {}  # (shape, dtype) -> _Pool
_addresses: dict = {}  # id() of every pooled array -> its memory's address
_PROBES = 8
_held = 0  # bytes of all pooled arrays


class _Pool:
    """The pooled arrays of one shape and dtype (each alive while listed), and where the next look for a free one
    starts (arrays are freed oldest first)."""

    __slots__ = ("arrays", "cursor")

    def __init__(self):
        self.arrays, self.cursor = [], 0


def _free(pool: _Pool) -> tuple | None:
    """(array, address) of a pooled array nothing else refers to, or None (a few looked at, from where the last
    look ended)."""
    arrays, start = pool.arrays, pool.cursor
    n = len(arrays)
    for step in range(n if n < _PROBES else _PROBES):  # a long trace holds many: look at a few, round the list
        i = (start + step) % n
        if not refcount.others(arrays, i):
            pool.cursor = i + 1
            address = _addresses[id(arrays[i])]
            device.forget(address)
            failures = context.current().failures
            if failures:
                failures.clear(address, address + arrays[i].nbytes)
            return arrays[i], address
    pool.cursor = start + _PROBES
    return None


def empty(shape: tuple, dtype: np.dtype, make_room=None) -> tuple:
    """(array, its address): an uninitialised C-contiguous array, a free pooled one of its shape and dtype if there
    is one, else new memory (pooled while the pool has room). With the pool full, ``make_room()`` (run the pending
    kernels, whose intermediates then give their memory back) is asked once before fresh memory is taken."""
    global _held
    if type(shape) is not tuple:
        shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(shape)
    if not isinstance(dtype, np.dtype):
        dtype = np.dtype(dtype)
    pool = _pools.get((shape, dtype))
    if pool is not None:
        found = _free(pool)
        if found is not None:
            return found
    nbytes = math.prod(shape) * dtype.itemsize
    if not nbytes:
        return _unpooled(shape, dtype)
    if _held + nbytes > config.POOL_BYTES.get() and make_room is not None and make_room() and pool is not None:
        found = _free(pool)
        if found is not None:
            return found
    if _held + nbytes > config.POOL_BYTES.get():
        return _unpooled(shape, dtype)
    array, address = _unpooled(shape, dtype)
    if pool is None:
        pool = _pools[shape, dtype] = _Pool()
    pool.arrays.append(array)
    _addresses[id(array)] = address
    _held += nbytes
    return array, address


def _unpooled(shape: tuple, dtype: np.dtype) -> tuple:
    array = np.empty(shape, dtype)
    return array, array.__array_interface__["data"][0]


def holds(array: np.ndarray) -> bool:
    """Whether ``array`` is one of the pool's (the pool's reference is then one of its references)."""
    return id(array) in _addresses  # a listed array is alive, so no other object has its id


def release() -> int:
    """Drop the pooled arrays nothing uses; returns the bytes given back."""
    global _held
    freed = 0
    for key, pool in list(_pools.items()):
        arrays = pool.arrays
        keep = [i for i in range(len(arrays)) if refcount.others(arrays, i)]
        for i in set(range(len(arrays))) - set(keep):
            del _addresses[id(arrays[i])]
            freed += arrays[i].nbytes
        if keep:
            pool.arrays, pool.cursor = [arrays[i] for i in keep], 0
        else:
            del _pools[key]
    _held -= freed
    return freed
