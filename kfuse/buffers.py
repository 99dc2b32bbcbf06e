"""Memory for the results of array operations, reused once nothing refers to it.

With fusion on, every intermediate result lives until its partition has run (the trace holds it), so a loop
of array statements allocates fresh memory for each one, and fresh memory costs a page fault per page on
its first write: fdtd_2d written as array code (NPBench medium, 20 steps) took 0.85 s fused against 0.16 s
with the same allocations served from warm memory. So results come from slabs kept here: a slab whose only
reference is this pool's (no View, array or pending call over it) is handed out again for a result of the same
size, already paged in, its address known (asking NumPy for it costs a microsecond, more than a small result's
allocation). A result keeps its slab through NumPy's ``base``.

The pool keeps at most ``KFUSE_POOL_BYTES`` of slabs; past that, new results are plain allocations. A slab
handed out again is new memory to everyone else: the GPU mirror of the old contents is dropped first
(runtime/device.py), no pending call can name it (it would hold a View over it), and the bytes a failed call
lost in it are forgotten (kfuse/tracer/failures.py keys them by memory owner, which for pooled memory is the
slab, alive in the pool: they would poison the new result; the failure itself is still reported at
``pk.fence()``). The failures forgotten are the runtime's in charge: a program running several runtimes may
see a later result of another one refused as lost (an error, never a stale value).
"""
from __future__ import annotations

import math

import numpy as np

from . import config, context, refcount
from .runtime import device

_slabs: dict = {}  # nbytes -> [slab, ...]
_addresses: dict = {}  # id() of every slab (each alive while listed) -> its memory's address
_cursor: dict = {}  # nbytes -> where the next look for a free slab starts (slabs are freed oldest first)
_PROBES = 8
_held = 0  # bytes of all slabs


def _free_slab(nbytes: int):
    """A slab of ``nbytes`` nothing else refers to, or None (a few looked at, from where the last look ended)."""
    slabs = _slabs.get(nbytes)
    if slabs is None:
        return None
    start = _cursor.get(nbytes, 0)
    for step in range(min(len(slabs), _PROBES)):  # a long trace holds many: look at a few, round the list
        i = (start + step) % len(slabs)
        if not refcount.others(slabs, i):
            _cursor[nbytes] = i + 1
            device.forget(slabs[i])
            failures = context.current().failures
            if failures:
                address = _addresses[id(slabs[i])]
                failures.clear(address, address + nbytes)
            return slabs[i]
    _cursor[nbytes] = start + _PROBES
    return None


def empty(shape: tuple, dtype: np.dtype, make_room=None) -> tuple:
    """(array, its address): an uninitialised C-contiguous array, a free slab of its size if there is one, else new
    memory (pooled while the pool has room). With the pool full, ``make_room()`` (run the pending kernels, whose
    intermediates then give their slabs back) is asked once before fresh memory is taken."""
    global _held
    if not isinstance(dtype, np.dtype):
        dtype = np.dtype(dtype)
    if type(shape) is not tuple:
        shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(shape)
    nbytes = math.prod(shape) * dtype.itemsize
    if not nbytes:
        return _unpooled(shape, dtype)
    slab = _free_slab(nbytes)
    if slab is None and _held + nbytes > config.POOL_BYTES.get() and make_room is not None and make_room():
        slab = _free_slab(nbytes)
    if slab is None:
        if _held + nbytes > config.POOL_BYTES.get():
            return _unpooled(shape, dtype)
        slab = np.empty(nbytes, np.uint8)
        _slabs.setdefault(nbytes, []).append(slab)
        _addresses[id(slab)] = slab.__array_interface__["data"][0]
        _held += nbytes
    array = slab.view(dtype)
    return array if len(shape) == 1 else array.reshape(shape), _addresses[id(slab)]


def _unpooled(shape: tuple, dtype: np.dtype) -> tuple:
    array = np.empty(shape, dtype)
    return array, array.__array_interface__["data"][0]


def holds(array: np.ndarray) -> bool:
    """Whether ``array`` is one of the pool's slabs (the pool's reference is then one of its references)."""
    return id(array) in _addresses  # a listed slab is alive, so no other object has its id


def release() -> int:
    """Drop the slabs nothing uses; returns the bytes given back."""
    global _held
    freed = 0
    for nbytes, slabs in list(_slabs.items()):
        keep = [slabs[i] for i in range(len(slabs)) if refcount.others(slabs, i)]
        kept = {id(slab) for slab in keep}
        for slab in slabs:
            if id(slab) not in kept:
                del _addresses[id(slab)]
        freed += nbytes * (len(slabs) - len(keep))
        if keep:
            _slabs[nbytes] = keep
        else:
            del _slabs[nbytes]
    _held -= freed
    return freed
