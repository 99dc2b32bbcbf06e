"""Loaded kernels and launching them: pack arguments into 8-byte slots, call the C entry point.

A launch costs one ``struct.pack`` and one ctypes call; View pointers, extents and strides are read
from attributes the View computed once when it was made. ``benchmarks/bench_dispatch.py`` measures it.

Each loaded library is a few memory mappings, and a process may hold about 65,000 (vm.max_map_count),
so at most KFUSE_MAX_LOADED_KERNELS kernels stay loaded: loading one more unloads the one launched
least recently (second-chance order), and an unloaded kernel loads itself again at its next launch.
"""
from __future__ import annotations

import _ctypes
import ctypes
import struct

from .. import config
from ..codegen.kernel import GeneratedKernel
from ..compiler import cache
from ..errors import ArgumentError, LaunchError, kernel_fault
from ..frontend.spec import KernelSpec
from ..policies import MDRangePolicy, RangePolicy
from ..types import DType
from .. import context, counters, guard, spaces
from ..views import View
from . import device, kokkos_runtime

_ERRLEN = 1 << 16  # a fault record lists every other member of a fused kernel that faulted
_err = ctypes.create_string_buffer(_ERRLEN)
_errlen = ctypes.c_int64(_ERRLEN)
_KERNEL_FAULT = 2  # the entry's return code when a thread faulted (codegen.kernel)


#: When a list, every launch appends (kernel name, C++-measured seconds, fused?, ``Runtime.calls_made``: an eager
#: call's own place among the program's kernel calls, the number of the flush it runs in or None) — used by
#: kfuse.bench.
profile: list | None = None


class CompiledKernel:
    """A kernel library, loaded into the process while it is among the most recently launched ones.

    Holders (a Prepared specialisation, the fused-kernel cache) keep the object; whether its library is
    loaded is this class's business. Unloading happens only inside a load, under ``guard.lock`` like
    every launch, so no thread is running the code it unmaps, and it swaps the entry point for
    ``_load_and_call`` first, so a later launch loads the library again instead of calling unmapped code.
    """

    def __init__(self, generated: GeneratedKernel, spec: KernelSpec, fused: bool = False, writes: tuple = (),
                 artifact=None):
        """``writes``: per parameter, whether the kernel writes that View (device spaces keep copies coherent);
        ``artifact``: the library if it was just built (cache.build's result), else it is looked up now."""
        kokkos_runtime.ensure_initialized()
        self.name = generated.name
        self.spec = spec
        self.fused = fused
        self._generated = generated  # to load (or rebuild) the library again after it was unloaded
        self.artifact = artifact or cache.build(generated.name, generated.source)
        self.recent = True  # launched since the eviction sweep last passed it
        self._load()
        n_results = len(generated.result_format)
        self._out = ctypes.create_string_buffer(max(8, 8 * n_results))
        self._unpack = struct.Struct("=" + generated.result_format).unpack_from if n_results else None
        self.on_device = spaces.on_device(spec.space)
        writes = writes or tuple(t.is_view or None for _, t in spec.params)  # unknown: assume every View written
        self.pack = _packer(struct.Struct("=" + generated.slot_format).pack, spec,
                            writes if self.on_device else None, self.name, fused)
        self._writes = writes
        self.view_writes = tuple((i, bool(writes[i])) for i, (_, t) in enumerate(spec.params) if t.is_view)
        self.pointer_slots = _pointer_slots(spec, len(generated.slot_format))  # per View parameter, as view_writes

    def _load(self) -> None:
        with guard.lock:
            _make_room()
            self.lib = ctypes.CDLL(str(self.artifact.library))
            # No argtypes: every call passes bytes, two ctypes buffers and a c_int64, which ctypes hands to C
            # as they are; declaring argtypes would convert each argument again on every launch (~0.3 us).
            self._fn = self.lib.kfuse_launch
            self._fn.restype = ctypes.c_int
            # codegen.kernel: a GPU kernel that cannot fault also launches without waiting for the device
            self._queued = getattr(self.lib, "kfuse_launch_queued", None)
            if self._queued is not None:
                self._queued.restype = ctypes.c_int
            self._last_ns = ctypes.c_int64.in_dll(self.lib, "kfuse_last_ns")
            _loaded[self] = None
            counters.bump("kernels_loaded")

    def _unload(self) -> None:
        """Close the library; ``_fn`` loads it again if the kernel is launched later."""
        handle = self.lib._handle
        if self.on_device:
            kokkos_runtime.fence()  # a queued launch of this kernel may still be running its code
        self._queued = None
        self._last_ns = ctypes.c_int64(self._last_ns.value)  # ``last_seconds`` stays readable
        self._fn = self._load_and_call
        self.lib = None
        _ctypes.dlclose(handle)
        counters.bump("kernels_unloaded")

    def _load_and_call(self, *entry_args):
        """The entry point of an unloaded kernel: load the library again (rebuilding it if the cache lost it)."""
        self.artifact = cache.build(self._generated.name, self._generated.source)
        self._load()
        return self._fn(*entry_args)

    @property
    def loaded(self) -> bool:
        return self.lib is not None

    def launch(self, bounds: tuple, args: tuple, packed: bytes | None = None, wait: bool = True):
        """Run the kernel once; returns the tuple of reduction results (empty for parallel_for). ``packed``: the
        buffer ``packed`` made for these ``bounds`` and ``args`` before (a rerun's kept launch), else packed now.
        ``wait=False``: a GPU kernel that cannot fault returns once queued, untimed (``last_seconds`` keeps the last
        timed launch's); the device runs queued kernels in order, and every copy between host and device, and
        ``pk.fence()``, waits for them first (kfuse_runtime), so only a caller that times the device must wait."""
        self.recent = True
        kept = packed if type(packed) is KeptDeviceBuffer else None
        if self.on_device:
            device.before_launch(args, self._writes, kept is not None and kept.plain(args))
        else:
            device.host_launch(args, self._writes)
        fn = self._fn if wait or self._queued is None or profile is not None else self._queued
        if kept is not None:
            packed = kept.current(self, bounds, args)
        rc = fn(self.pack(bounds, args) if packed is None else packed, self._out, _err, _errlen)
        if rc != 0 and rc != _KERNEL_FAULT:
            raise LaunchError(f"kernel '{self.name}' failed: {_err.value.decode(errors='replace')}")
        if self.on_device:  # (also after a fault: the kernel ran and wrote)
            device.after_launch(args, self._writes, kept is not None and kept.taken is not None)
        if rc == _KERNEL_FAULT:
            fault = kernel_fault(_err.value.decode(errors="replace"), self.name)
            fault.results = self._unpack(self._out) if self._unpack else ()  # the launch ran to its end
            raise fault
        counts = context.current().counts  # counters.bump, inlined: this is every launch's path
        counts["kernels_launched"] += 1
        if self.fused:
            counts["fused_kernels_launched"] += 1
        if profile is not None:
            rt = context.current()
            profile.append((self.name, self._last_ns.value * 1e-9, self.fused, rt.calls_made, rt.running_flush()))
        return self._unpack(self._out) if self._unpack else ()

    def launch_queued(self, bounds: tuple, args: tuple, packed: bytes | None = None):
        """``launch(..., wait=False)``: the interface's name for it (kfuse/backends/base.py)."""
        return self.launch(bounds, args, packed, wait=False)

    def packed(self, bounds: tuple, args: tuple):
        """The argument buffer of a launch over ``bounds`` with ``args`` (a rerun's kept launch, kfuse/rerun.py,
        packs once per set of Views instead of at every launch). A device kernel's pointers are its Views' device
        copies, known only at a launch: it gets a ``KeptDeviceBuffer``, packed at its first launch."""
        return KeptDeviceBuffer() if self.on_device else self.pack(bounds, args)

    def repacked(self, packed, bounds: tuple, args: tuple, moved: tuple):
        """The kept buffer ``packed`` (``packed()``'s) for ``args``, whose Views at positions ``moved`` replace
        others of the same shapes and strides (a rerun's, kfuse/rerun.py): on a device the same buffer, to take
        just their pointers again at its next launch; on the host packed anew."""
        if type(packed) is KeptDeviceBuffer:
            packed.move(moved)
            return packed
        return self.pack(bounds, args)

    @property
    def last_seconds(self) -> float:
        """Time of the last launch measured in C++ around the launch and its fence."""
        return self._last_ns.value * 1e-9


class KeptDeviceBuffer:
    """A kept launch's argument buffer on a GPU, reused while its Views' device copies stay where they were and
    current (``device.still_current``): a replay then packs nothing and asks no View for its device address
    (GaussianNB's prediction passes 33 Views a replay). Views replaced by others of the same shapes and strides (a
    replay's new result memory: ``move``) take their device addresses again into their pointer slots, the rest of
    the buffer kept; anything else packs it again, through ``device_pointer``."""

    __slots__ = ("buffer", "taken", "moved", "epoch", "written")

    def __init__(self):
        self.buffer, self.taken, self.moved = None, None, frozenset()
        self.epoch, self.written = None, ()  # ``device.epoch()`` when ``taken`` was last known current; its
        # written Views' mirrors

    def plain(self, args: tuple) -> bool:
        """Whether every View argument is known to be a ``View`` (no NumPy array passed straight in): the buffer
        took every View's pointer at its last launch (``taken``), and the Views moved since are checked."""
        if self.taken is None:
            return False
        for position in self.moved:
            if type(args[position]) is not View:
                return False
        return True

    def move(self, positions) -> None:
        """The Views at argument ``positions`` are new at the next launch."""
        self.moved = self.moved.union(positions)

    def current(self, kernel: CompiledKernel, bounds: tuple, args: tuple):
        """The buffer for a launch over ``bounds`` with ``args``: kept, its moved pointers patched, or packed."""
        moved, self.moved = self.moved, frozenset()
        if self.taken is not None:
            if not moved and self.epoch == device.epoch():  # (what ``still_current`` would find, without asking)
                device.written(self.written)
                return self.buffer
            if self._repointed(kernel, args, moved) if moved else device.still_current(self.taken):
                self._known_current()
                return self.buffer
        return self.pack(kernel, bounds, args)

    def pack(self, kernel: CompiledKernel, bounds: tuple, args: tuple):
        self.buffer = ctypes.create_string_buffer(kernel.pack(bounds, args))
        self.taken = device.pointers_taken(args, kernel.view_writes)
        if self.taken is not None:
            self._known_current()
        return self.buffer

    def _known_current(self) -> None:
        self.epoch = device.epoch()
        self.written = tuple(mirror for _, _, mirror, writes in self.taken if writes)

    def _repointed(self, kernel: CompiledKernel, args: tuple, moved: frozenset) -> bool:
        """Patch the pointer slots of the Views at ``moved``, where each is a plain View of the shape and strides of
        the one it replaces and every other View is still current (as ``device_pointer`` would leave them)."""
        taken, entries = list(self.taken), []
        for entry, (position, _) in enumerate(kernel.view_writes):
            if position in moved:
                view, old = args[position], taken[entry][0]
                if type(view) is not View or view.shape != old.shape or view.strides != old.strides:
                    return False
                entries.append(entry)
        if not device.still_current([t for e, t in enumerate(taken) if e not in entries]):
            return False
        for entry in entries:
            position, writes = kernel.view_writes[entry]
            view = args[position]
            _POINTER.pack_into(self.buffer, 8 * kernel.pointer_slots[entry], device.device_pointer(view, writes))
            taken[entry] = (view, view.ptr, view._mirror, writes)
        self.taken = tuple(taken)
        return True


_POINTER = struct.Struct("=q")


#: Loaded kernels in the order the eviction sweep visits them (dicts keep insertion order).
_loaded: dict = {}


def _make_room() -> None:
    """Unload kernels until one more fits under KFUSE_MAX_LOADED_KERNELS. Second chance: a kernel launched
    since the sweep last passed it goes to the back instead, so the least recently launched go first."""
    limit = max(1, config.MAX_LOADED_KERNELS.get())
    while len(_loaded) >= limit:
        kernel = next(iter(_loaded))
        del _loaded[kernel]
        if kernel.recent:
            kernel.recent = False
            _loaded[kernel] = None
        else:
            kernel._unload()


def loaded_count() -> int:
    return len(_loaded)


def _packer(pack, spec: KernelSpec, device_writes: tuple | None, name: str, fused: bool):
    """``pack(bounds, args) -> bytes`` as one expression, built once per kernel so a launch runs no loop.

    Slots: the policy bounds, then per parameter its value, or a View's pointer and extents (and
    strides when it is not C-contiguous) -- the layout ``codegen.kernel`` unpacks. Integer slots are
    int64: a value outside the parameter's type is reported by name (``argument_range_error``), not packed.
    """
    parts = ["*bounds"]
    for i, (_, t) in enumerate(spec.params):
        if not t.is_view:
            narrow = t.dtype.is_int and t.dtype is not DType.int64
            parts.append(f"fit(args[{i}], {', '.join(map(str, _limits(t.dtype)))})" if narrow else f"args[{i}]")
            continue
        pointer = f"args[{i}].ptr" if device_writes is None else f"dptr(args[{i}], {bool(device_writes[i])})"
        parts += [pointer, f"*args[{i}].shape"]
        if t.layout == "stride":
            parts.append(f"*args[{i}].strides")
    text = (f"def pack_arguments(bounds, args):\n"
            f"    try:\n"
            f"        return pack({', '.join(parts)})\n"
            f"    except (struct.error, OverflowError) as exc:\n"
            f"        raise out_of_range(bounds, args) or exc\n")
    namespace = {"pack": pack, "dptr": device.device_pointer, "fit": _fit, "struct": struct,
                 "out_of_range": lambda bounds, args: argument_range_error(spec, name, fused, bounds, args)}
    exec(text, namespace)  # noqa: S102 - our own text
    return namespace["pack_arguments"]


def _pointer_slots(spec: KernelSpec, slots: int) -> tuple:
    """Per View parameter, the slot of its pointer in the argument buffer (``_packer``'s layout: the policy's
    bounds, then per parameter a value, or a pointer, extents and, not C-contiguous, strides)."""
    sizes = [1 + t.ndim * (2 if t.layout == "stride" else 1) if t.is_view else 1 for _, t in spec.params]
    slot, found = slots - sum(sizes), []
    for (_, t), size in zip(spec.params, sizes):
        if t.is_view:
            found.append(slot)
        slot += size
    return tuple(found)


def _limits(dtype: DType) -> tuple[int, int]:
    bits = dtype.bits
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if dtype.is_signed else (0, (1 << bits) - 1)


def _fit(value: int, low: int, high: int) -> int:
    """``value`` as its int64 slot: checked against the parameter's type, uint64 above 2**63 wrapped."""
    if not low <= value <= high:
        raise OverflowError
    return value - (1 << 64) if value >= 1 << 63 else value


def argument_range_error(spec: KernelSpec, name: str, fused: bool, bounds: tuple,
                         args: tuple) -> ArgumentError | None:
    """The error naming the first policy bound or integer argument that does not fit its type."""
    low, high = _limits(DType.int64)
    what = f"{'fused kernel' if fused else 'workunit'} '{name}'"
    for bound in bounds:
        if not low <= bound <= high:
            return ArgumentError(f"{what}: policy bound {bound} does not fit a 64-bit integer")
    for (param, t), value in zip(spec.params, args):
        if t.is_view or not t.dtype.is_int:
            continue
        low, high = _limits(t.dtype)
        if not low <= value <= high:
            return ArgumentError(f"{what}: parameter '{param}' got {value}, which does not fit {t.dtype.name} "
                                 f"({low} to {high}), the C++ type it has in the kernel; pass a value in that range"
                                 f"{', or annotate the parameter float' if t.dtype is DType.int64 else ''}")
    return None


def policy_slots(policy) -> tuple:
    """The leading slots of the argument buffer: the policy's bounds (a TeamPolicy's: league size, team size, vector
    length, then its scratch bytes per team and per thread of levels 0 and 1)."""
    if isinstance(policy, RangePolicy):
        return (policy.begin, policy.end)
    if isinstance(policy, MDRangePolicy):
        return policy.begins + policy.ends
    (team0, thread0), (team1, thread1) = policy.scratch
    return (policy.league_size, policy.team_size, policy.vector_length, team0, thread0, team1, thread1)
