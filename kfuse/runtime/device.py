"""Device copies of Views for GPU execution spaces (Cuda), moved only when the other side needs them.

A View's memory is NumPy memory on the host. The first time a GPU kernel uses it, kfuse allocates a
device buffer mirroring the whole host allocation it belongs to (the root NumPy buffer, so subviews and
Views sharing a buffer share one mirror and keep their offsets and strides), and copies it over.
After that, data moves only at barriers:
- before a GPU launch, a mirror whose host side changed is copied to the device;
- a GPU kernel that writes a View marks its mirror "device newer";
- a host access to the View (the View's barrier, after the tracer has run pending work) copies a
  "device newer" mirror back, and a host write marks the mirror "host newer".
Plain NumPy arrays passed straight to a GPU kernel have no barrier of their own, so they are copied in
before and out after every launch. No unified memory is used.
The result of an array operation is allocated on the host with undefined contents (``np.empty``: address
space, no pages) and first written by its GPU kernel; it is registered as ``undefined``, so its mirror starts
as "both sides agree" and nothing is copied to the device before that write (a host write first clears it).
"""
from __future__ import annotations

import ctypes
import weakref

import numpy as np

from .. import escape
from ..views import DeviceView, NumpyArgument

HOST, DEVICE, BOTH = "host", "device", "both"


class Mirror:
    __slots__ = ("host_ptr", "nbytes", "device_ptr", "state", "__weakref__")

    def __init__(self, host_ptr: int, nbytes: int, device_ptr: int):
        self.host_ptr = host_ptr
        self.nbytes = nbytes
        self.device_ptr = device_ptr
        self.state = HOST


_mirrors: dict = {}  # root buffer address -> Mirror
_undefined: "weakref.WeakValueDictionary" = weakref.WeakValueDictionary()  # id -> root array of undefined contents


def undefined(array: np.ndarray) -> None:
    """``array``'s memory (a new allocation, or a slab kfuse/buffers.py hands out again) holds no values yet;
    its first writer is a GPU kernel (kfuse/ops). Mirrors are per memory owner, so the owner is registered."""
    root = _root(array)
    _undefined[id(root)] = root


def _root(array: np.ndarray) -> np.ndarray:
    """The array owning the memory, through NumPy's base chain and kfuse's own aliases (kfuse/escape.py)."""
    while True:
        base = array.base
        if isinstance(base, np.ndarray):
            array = base
        elif isinstance(base, escape.Alias):
            array = base.target
        else:
            return array


def _lib():
    from .kokkos_runtime import ensure_initialized

    return ensure_initialized()


def _mirror_for(view) -> Mirror:
    root = _root(view._array)
    address = root.__array_interface__["data"][0]
    mirror = _mirrors.get(address)
    if mirror is None:
        lib = _lib()
        nbytes = max(root.nbytes, 1)
        device_ptr = lib.kfuse_device_malloc(nbytes)
        if not device_ptr:
            raise MemoryError(f"could not allocate {nbytes} bytes of device memory")
        mirror = _mirrors[address] = Mirror(address, nbytes, device_ptr)
        finalizer = weakref.finalize(root, _release, address, device_ptr)  # a reused address never inherits it
        finalizer.atexit = False  # at exit, kokkos_runtime copies results back first, then frees (release_all)
    return mirror


def _release(address: int, device_ptr: int) -> None:
    mirror = _mirrors.pop(address, None)
    from . import kokkos_runtime

    if mirror is not None and kokkos_runtime.is_running():
        kokkos_runtime.library().kfuse_device_free(ctypes.c_void_p(device_ptr))


def forget(root: np.ndarray) -> None:
    """``root``'s memory is handed out anew (kfuse/buffers.py): whatever its mirror held is stale; the host's
    contents are the new owner's (undefined until written)."""
    if _mirrors:
        mirror = _mirrors.get(root.__array_interface__["data"][0])
        if mirror is not None:
            mirror.state = HOST


def release_all() -> None:
    """Free every device buffer before Kokkos is finalised (at exit)."""
    for address, mirror in list(_mirrors.items()):
        _release(address, mirror.device_ptr)


def device_pointer(view, writes: bool) -> int:
    """The device address of ``view``'s first element, with the device copy brought up to date."""
    if type(view) is DeviceView:  # GPU memory the caller owns (CuPy): nothing to mirror
        return view.ptr
    mirror = _mirror_for(view)
    if mirror.state == HOST and _undefined:
        root = _root(view._array)
        if _undefined.get(id(root)) is root:  # nothing to copy: the GPU kernel about to run defines the contents
            del _undefined[id(root)]
            mirror.state = BOTH
    if mirror.state == HOST:
        _lib().kfuse_copy_to_device(ctypes.c_void_p(mirror.device_ptr), ctypes.c_void_p(mirror.host_ptr),
                                    mirror.nbytes)
        mirror.state = BOTH
    if writes:
        mirror.state = DEVICE
    return mirror.device_ptr + (view.ptr - mirror.host_ptr)


def before_launch(args) -> None:
    """NumPy arrays passed straight to a kernel may have changed on the host since the last launch."""
    for a in args:
        if isinstance(a, NumpyArgument):
            mirror = _mirror_for(a)
            if mirror.state == DEVICE:
                copy_back(a)
            mirror.state = HOST


def after_launch(args, writes) -> None:
    """Bring results for NumPy arrays passed straight to the kernel back at once (no barrier will)."""
    for a, w in zip(args, writes):
        if w and isinstance(a, NumpyArgument):
            copy_back(a)


def copy_back(view) -> None:
    mirror = _mirrors.get(_root(view._array).__array_interface__["data"][0])
    if mirror is not None and mirror.state == DEVICE:
        _lib().kfuse_copy_to_host(ctypes.c_void_p(mirror.host_ptr), ctypes.c_void_p(mirror.device_ptr),
                                  mirror.nbytes)
        mirror.state = BOTH


def sync_all() -> None:
    """Copy every device-newer mirror back (``pk.fence()``): NumPy arrays aliasing Views are then current."""
    for mirror in _mirrors.values():
        if mirror.state == DEVICE:
            _lib().kfuse_copy_to_host(ctypes.c_void_p(mirror.host_ptr), ctypes.c_void_p(mirror.device_ptr),
                                      mirror.nbytes)
            mirror.state = BOTH


def host_access(view, write: bool) -> None:
    """Barrier for host access: fetch device-newer data; a host write makes the device copy stale."""
    if view._array is None:  # GPU memory the caller owns
        return
    if write and _undefined:
        _undefined.pop(id(_root(view._array)), None)
    if not _mirrors:  # nothing mirrored
        return
    mirror = _mirrors.get(_root(view._array).__array_interface__["data"][0])
    if mirror is None:
        return
    if mirror.state == DEVICE:
        copy_back(view)
    if write:
        mirror.state = HOST
