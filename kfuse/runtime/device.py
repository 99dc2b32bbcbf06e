"""Device copies of Views for GPU execution spaces (Cuda), moved only when the other side needs them.

A View's memory is NumPy memory on the host. The first time a GPU kernel uses it, kfuse allocates a
device buffer mirroring the whole host allocation it belongs to (the root NumPy buffer, so subviews and
Views sharing a buffer share one mirror and keep their offsets and strides), and copies it over.
After that, data moves only at barriers:
- before a GPU launch, a mirror whose host side changed is copied to the device;
- a GPU kernel that writes a View marks its mirror "device newer";
- a host access to the View (the View's barrier, after the tracer has run pending work) copies that View's
  "device newer" mirror back, and a host write marks the mirror "host newer". Nothing else is copied back:
  ``pk.fence()`` only waits (PyKokkos semantics), and results stay on the GPU until something reads them.
Memory the program reaches without a barrier -- plain NumPy arrays passed straight to a GPU kernel, and
escaped memory (kfuse/escape.py: NumPy aliases of a View the program holds) -- is copied in before and out
after every launch that uses it, so it is never "device newer" when control returns to the program.
``pk.deep_copy`` between two Views that both have device copies copies on the device (``copy``).
No unified memory is used.
The result of an array operation is allocated on the host with undefined contents (``np.empty``: address
space, no pages) and first written by its GPU kernel; it is registered as ``undefined``, so its mirror starts
as "both sides agree" and nothing is copied to the device before that write (a host write first clears it).
A View made while the default space is a GPU's (``pk.View``, ``pk.zeros``, ``pk.ones``, ``pk.full``) holds one value
that nobody has changed yet (``views.constant``): its device copy is filled on the device instead of copied over;
``pk.empty`` is ``undefined``.
"""
from __future__ import annotations

import ctypes
import weakref

import numpy as np

from .. import config, context, escape
from ..errors import LaunchError
from .. import views
from ..views import DeviceView, NumpyArgument, View, memory_owner, overlaps

HOST, DEVICE, BOTH = "host", "device", "both"
_DIRECTIONS = {"kfuse_copy_to_device": "to_device", "kfuse_copy_to_host": "to_host"}  # the pk.stats() counters


class Mirror:
    __slots__ = ("host_ptr", "nbytes", "device_ptr", "state", "__weakref__")

    def __init__(self, host_ptr: int, nbytes: int, device_ptr: int):
        self.host_ptr = host_ptr
        self.nbytes = nbytes
        self.device_ptr = device_ptr
        self.state = HOST


_mirrors: dict = {}  # root buffer address -> Mirror
_spare: dict = {}  # nbytes -> device buffers of that size whose Views went, kept for the next mirror of that size
_spare_bytes = 0
_undefined: "weakref.WeakValueDictionary" = weakref.WeakValueDictionary()  # id -> root array of undefined contents
_staled = 0  # times a device copy a live View may hold was made stale ("host newer"): see ``epoch``


def undefined(array: np.ndarray) -> None:
    """``array``'s memory (a new allocation, or a pooled array kfuse/buffers.py hands out again) holds no values yet;
    its first writer is a GPU kernel (kfuse/ops). Mirrors are per memory owner, so the owner is registered."""
    root = memory_owner(array)
    _undefined[id(root)] = root


def _lib():
    from .kokkos_runtime import ensure_initialized

    return ensure_initialized()


def _copy(name: str, dst: int, src: int, nbytes: int) -> None:
    """One copy through the runtime library (it fences first); a failed one must not pass as data."""
    rc = getattr(_lib(), name)(ctypes.c_void_p(dst), ctypes.c_void_p(src), nbytes)
    if rc:
        raise LaunchError(f"kfuse: {name} of {nbytes} bytes failed (CUDA/HIP error {rc})")
    direction = _DIRECTIONS.get(name)
    if direction is not None:
        counts = context.current().counts
        counts["copies_" + direction] += 1
        counts["bytes_" + direction] += nbytes


def _mirror_for(view) -> Mirror:
    """``view``'s memory's mirror, made at its first GPU use. The View keeps the one it found (each launch asks
    for every View it takes): its memory owner lives as long as it does, so while that mirror is listed it is
    the one at the owner's address."""
    mirror = view._mirror
    if mirror is not None and _mirrors.get(mirror.host_ptr) is mirror:
        return mirror
    view._mirror = mirror = _owner_mirror(view)
    return mirror


def _owner_mirror(view) -> Mirror:
    root = memory_owner(view._array)
    # (a View's pointer is its array's data address; NumPy builds ``__array_interface__`` anew at each ask)
    address = view.ptr if root is view._array else root.__array_interface__["data"][0]
    mirror = _mirrors.get(address)
    if mirror is None:
        nbytes = max(root.nbytes, 1)
        device_ptr = _allocate(nbytes)
        mirror = _mirrors[address] = Mirror(address, nbytes, device_ptr)
        finalizer = weakref.finalize(root, _release, address, device_ptr)  # a reused address never inherits it
        finalizer.atexit = False  # at exit, kokkos_runtime copies results back first, then frees (release_all)
    return mirror


def _allocate(nbytes: int) -> int:
    """Device memory of ``nbytes``: a spare buffer of that size, else new (after freeing the spares, if the
    device has no room)."""
    global _spare_bytes
    spares = _spare.get(nbytes)
    if spares:
        _spare_bytes -= nbytes
        return spares.pop()
    lib = _lib()
    device_ptr = lib.kfuse_device_malloc(nbytes)
    if not device_ptr and _spare:
        _free_spares()
        device_ptr = lib.kfuse_device_malloc(nbytes)
    if not device_ptr:
        raise MemoryError(f"could not allocate {nbytes} bytes of device memory")
    return device_ptr


def _release(address: int, device_ptr: int) -> None:
    """The View memory at ``address`` went: its device buffer is kept as a spare while they fit in
    KFUSE_DEVICE_POOL_BYTES (allocating and freeing GPU memory costs far more than a kernel on small data, and a
    free waits for the device), else freed."""
    global _spare_bytes
    mirror = _mirrors.pop(address, None)
    from . import kokkos_runtime

    if mirror is None or not kokkos_runtime.is_running():
        return
    if _spare_bytes + mirror.nbytes <= config.DEVICE_POOL_BYTES.get():
        _spare.setdefault(mirror.nbytes, []).append(device_ptr)
        _spare_bytes += mirror.nbytes
    else:
        _lib().kfuse_device_free(ctypes.c_void_p(device_ptr))


def _free_spares() -> None:
    global _spare_bytes
    lib = _lib()
    for spares in _spare.values():
        for device_ptr in spares:
            lib.kfuse_device_free(ctypes.c_void_p(device_ptr))
    _spare.clear()
    _spare_bytes = 0


def forget(address: int) -> None:
    """The memory at ``address`` (a memory owner's) is handed out anew (kfuse/buffers.py): whatever its mirror held
    is stale; the host's contents are the new owner's (undefined until written). Not counted in ``epoch``: memory
    is handed out anew only when no View holds it (buffers._free), so no View's pointers taken are of it."""
    if _mirrors:
        mirror = _mirrors.get(address)
        if mirror is not None:
            mirror.state = HOST


def release_all() -> None:
    """Free every device buffer before Kokkos is finalised (at exit)."""
    _stale()
    for address, mirror in list(_mirrors.items()):
        _mirrors.pop(address, None)
        _lib().kfuse_device_free(ctypes.c_void_p(mirror.device_ptr))
    _free_spares()


def defined(array: np.ndarray) -> None:
    """``array``'s memory gets its values on the host (a host kernel's result): a mark ``undefined`` left there by
    an earlier use of the memory (a pooled array handed out again) goes."""
    if _undefined:
        _undefined.pop(id(memory_owner(array)), None)


def device_pointer(view, writes: bool) -> int:
    """The device address of ``view``'s first element, with the device copy brought up to date."""
    if type(view) is DeviceView:  # GPU memory the caller owns (CuPy): nothing to mirror
        return view.ptr
    mirror = _mirror_for(view)
    if mirror.state == HOST and (_undefined or views.constant):
        root = memory_owner(view._array)
        if _undefined.get(id(root)) is root:  # nothing to copy: the GPU kernel about to run defines the contents
            del _undefined[id(root)]
            mirror.state = BOTH
        else:
            element = views.take_constant(root)
            if element is not None:  # a new View of one value: set there instead of copied over
                _fill(mirror, element)
                mirror.state = BOTH
    if mirror.state == HOST:
        _copy("kfuse_copy_to_device", mirror.device_ptr, mirror.host_ptr, mirror.nbytes)
        mirror.state = BOTH
    if writes:
        mirror.state = DEVICE
    return mirror.device_ptr + (view.ptr - mirror.host_ptr)


def pointers_taken(args, params) -> tuple | None:
    """After ``device_pointer`` gave every View in ``args`` (at ``params``' (position, writes) pairs) its address:
    (View, its pointer, its mirror, writes) per View, for ``still_current``; None where one is not a plain View
    (a caller's GPU array or NumPy memory: their pointers are asked for at every launch)."""
    taken = []
    for i, writes in params:
        view = args[i]
        if type(view) is not View or view._mirror is None:
            return None
        taken.append((view, view.ptr, view._mirror, writes))
    return tuple(taken)


def _stale() -> None:
    global _staled
    _staled += 1


def epoch() -> int:
    """A number that changes whenever ``still_current`` could turn false for Views whose pointers were taken: a
    mirror made "host newer" (a host write, memory the program reaches directly), all mirrors freed, or a View
    given new memory (``View.resize``). Mirrors made or released in between are of memory no such View holds
    (it keeps its memory alive), so they do not count. Equal before and after: those Views are still current."""
    return _staled + views.resize_count()


def written(mirrors: tuple) -> None:
    """What ``device_pointer`` does for Views still current that a launch writes: their mirrors "device newer"."""
    for mirror in mirrors:
        mirror.state = DEVICE


def still_current(taken) -> bool:
    """Whether ``device_pointer`` would give each of ``taken``'s Views the address it gave before with nothing to
    copy: the View's memory and its mirror are the same, listed, and the device copy is current (not "host
    newer"). Then it does what ``device_pointer`` does for such a View: a written one's mirror is "device newer"."""
    for view, ptr, mirror, _ in taken:
        if view.ptr != ptr or view._mirror is not mirror or mirror.state == HOST or \
                _mirrors.get(mirror.host_ptr) is not mirror:
            return False
    for _, _, mirror, writes in taken:
        if writes:
            mirror.state = DEVICE
    return True


def _fill(mirror: Mirror, element: bytes) -> None:
    """Set every element of ``mirror``'s device memory to ``element`` (its bytes, at most 8)."""
    pattern = int.from_bytes(element, "little")
    rc = _lib().kfuse_device_fill(ctypes.c_void_p(mirror.device_ptr), mirror.nbytes, pattern, len(element))
    if rc:
        raise LaunchError(f"kfuse: kfuse_device_fill of {mirror.nbytes} bytes failed (CUDA/HIP error {rc})")


def _reachable(view, writes) -> bool:
    """Whether the program can reach ``view``'s memory without a barrier while a kernel ``writes`` (or reads)
    it: a NumPy array passed straight in, or escaped memory (never a GPU array the caller owns)."""
    if type(view) is NumpyArgument:
        return True
    return view._array is not None and escape.live() and view.escaped(bool(writes))


def _none_reachable(args, plain: bool) -> bool:
    """Whether ``_reachable`` is false for every argument, known without asking each: no memory escaped and no
    NumPy array is passed straight in (``plain``: the caller knows every View argument is a ``View``)."""
    return not escape.live() and (plain or NumpyArgument not in map(type, args))


def before_launch(args, writes, plain: bool = False) -> None:
    """Memory the program reaches directly may have changed on the host since the last launch: its host
    side is taken as current (after fetching what an earlier GPU kernel left on the device). ``plain``: every
    View argument is known to be a ``View`` (a kept argument buffer's launch: ``KeptDeviceBuffer.plain``)."""
    if _none_reachable(args, plain):  # (every launch passes here)
        return
    for a, w in zip(args, writes):
        if isinstance(a, View) and _reachable(a, w):
            mirror = _mirror_for(a)
            if mirror.state == DEVICE:
                copy_back(a)
            mirror.state = HOST
            _stale()


def host_launch(args, writes) -> None:
    """A host kernel (OpenMP, Serial, Debug) is about to use ``args``: as for any host access, device-newer data
    comes back first, and what it may write makes the device copy stale and its contents defined."""
    if not keeps_state():
        return
    for a, w in zip(args, writes):
        if isinstance(a, View) and a._array is not None:
            host_access(a, bool(w))


def after_launch(args, writes, plain: bool = False) -> None:
    """Bring results in memory the program reaches directly back at once (no barrier will)."""
    if _none_reachable(args, plain):
        return
    for a, w in zip(args, writes):
        if w and isinstance(a, View) and _reachable(a, w):
            copy_back(a)


def copy_back(view) -> None:
    mirror = _existing(view)
    if mirror is not None and mirror.state == DEVICE:
        _copy("kfuse_copy_to_host", mirror.host_ptr, mirror.device_ptr, mirror.nbytes)
        mirror.state = BOTH


def sync_all() -> None:
    """Copy every device-newer mirror back, at exit only: a View read after Kokkos is finalised (a destructor
    during interpreter teardown) finds its host memory current. ``pk.fence()`` copies nothing."""
    for mirror in _mirrors.values():
        if mirror.state == DEVICE:
            _copy("kfuse_copy_to_host", mirror.host_ptr, mirror.device_ptr, mirror.nbytes)
            mirror.state = BOTH


def _covers(view, mirror: Mirror) -> bool:
    """Whether ``view`` is every byte of its mirror (so overwriting it needs none of the old contents)."""
    array = view._array
    return array.nbytes == mirror.nbytes and (array.flags.c_contiguous or array.flags.f_contiguous)


def copy(dst, src) -> bool:
    """``pk.deep_copy(dst, src)`` on the GPU, where both Views already have device copies and ``src``'s is
    current: no round trip through the host. One device memcpy, so only for the same dtype, both C-contiguous,
    no shared bytes, and ``dst`` not escaped (the program's NumPy alias of it would go stale). False: the
    caller copies on the host."""
    if (not _mirrors or dst._array is None or src._array is None or dst.dtype is not src.dtype
            or dst.storage != "right" or src.storage != "right" or overlaps(dst, src) or _reachable(dst, True)):
        return False
    source, target = _existing(src), _existing(dst)
    if source is None or target is None or source.state == HOST:
        return False
    if _covers(dst, target):  # nothing of the old contents survives: no host-to-device copy first
        host_access(dst, True, True)  # (also: no longer undefined)
        target.state = BOTH
    src_ptr = device_pointer(src, writes=False)
    dst_ptr = device_pointer(dst, writes=True)
    if dst._array.nbytes:
        _copy("kfuse_copy_on_device", dst_ptr, src_ptr, dst._array.nbytes)
    return True


def _existing(view) -> Mirror | None:
    return _mirrors.get(memory_owner(view._array).__array_interface__["data"][0])


def keeps_state() -> bool:
    """Whether a host access may have something to do: a mirror, memory of undefined or known contents."""
    return bool(_mirrors or _undefined or views.constant)


def host_access(view, write: bool, overwrite: bool = False) -> None:
    """Barrier for host access: fetch device-newer data (not when the host ``overwrite``s every byte of the
    mirror); a host write makes the device copy stale."""
    if view._array is None:  # GPU memory the caller owns
        return
    if write and (_undefined or views.constant):
        root = memory_owner(view._array)
        _undefined.pop(id(root), None)
        views.take_constant(root)
    if not _mirrors:  # nothing mirrored
        return
    mirror = _existing(view)
    if mirror is None:
        return
    if mirror.state == DEVICE and not (overwrite and _covers(view, mirror)):
        copy_back(view)
    if write:
        mirror.state = HOST
        _stale()
