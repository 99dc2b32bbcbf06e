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

_pools: dict = {}  # (shape, dtype) -> [array, ...]: results' memory, each alive while listed
_addresses: dict = {}  # id() of every pooled array -> its memory's address
_cursor: dict = {}  # (shape, dtype) -> where the next look for a free array starts (freed oldest first)
_PROBES = 8
_held = 0  # bytes of all pooled arrays


def _free(key: tuple):
    """A pooled array of ``key`` (shape, dtype) nothing else refers to, or None (a few looked at, from where the
    last look ended)."""
    arrays = _pools.get(key)
    if arrays is None:
        return None
    start = _cursor.get(key, 0)
    for step in range(min(len(arrays), _PROBES)):  # a long trace holds many: look at a few, round the list
        i = (start + step) % len(arrays)
        if not refcount.others(arrays, i):
            _cursor[key] = i + 1
            array = arrays[i]
            device.forget(array)
            failures = context.current().failures
            if failures:
                address = _addresses[id(array)]
                failures.clear(address, address + array.nbytes)
            return array
    _cursor[key] = start + _PROBES
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
    key = (shape, dtype)
    array = _free(key)
    if array is not None:
        return array, _addresses[id(array)]
    nbytes = math.prod(shape) * dtype.itemsize
    if not nbytes:
        return _unpooled(shape, dtype)
    if _held + nbytes > config.POOL_BYTES.get() and make_room is not None and make_room():
        array = _free(key)
        if array is not None:
            return array, _addresses[id(array)]
    if _held + nbytes > config.POOL_BYTES.get():
        return _unpooled(shape, dtype)
    array, address = _unpooled(shape, dtype)
    _pools.setdefault(key, []).append(array)
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
    for key, arrays in list(_pools.items()):
        keep = [arrays[i] for i in range(len(arrays)) if refcount.others(arrays, i)]
        kept = {id(array) for array in keep}
        for array in arrays:
            if id(array) not in kept:
                del _addresses[id(array)]
                freed += array.nbytes
        if keep:
            _pools[key] = keep
        else:
            del _pools[key]
    _held -= freed
    return freed
