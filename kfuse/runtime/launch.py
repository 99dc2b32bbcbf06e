"""Loaded kernels and launching them: pack arguments into 8-byte slots, call the C entry point.

A launch costs one ``struct.pack`` and one ctypes call; View pointers, extents and strides are read
from attributes the View computed once when it was made. ``benchmarks/bench_dispatch.py`` measures it.
"""
from __future__ import annotations

import ctypes
import struct

from ..codegen.kernel import GeneratedKernel
from ..compiler import cache
from ..errors import LaunchError, kernel_fault
from ..frontend.spec import KernelSpec
from ..policies import MDRangePolicy, RangePolicy
from . import device, kokkos_runtime, stats

DEVICE_SPACES = ("Cuda", "HIP")

_ERRLEN = 2048
_err = ctypes.create_string_buffer(_ERRLEN)
_errlen = ctypes.c_int64(_ERRLEN)
_KERNEL_FAULT = 2  # the entry's return code when a thread faulted (codegen.kernel)


#: When a list, every launch appends (kernel name, C++-measured seconds, fused?) — used by kfuse.bench.
profile: list | None = None


class CompiledKernel:
    """A kernel library loaded into the process."""

    def __init__(self, generated: GeneratedKernel, spec: KernelSpec, fused: bool = False, writes: tuple = ()):
        """``writes``: per parameter, whether the kernel writes that View (device spaces keep copies coherent)."""
        kokkos_runtime.ensure_initialized()
        self.name = generated.name
        self.spec = spec
        self.fused = fused
        self.artifact = cache.build(generated.name, generated.source)
        self.lib = ctypes.CDLL(str(self.artifact.library))
        # No argtypes: every call passes bytes, two ctypes buffers and a c_int64, which ctypes hands to C
        # as they are; declaring argtypes would convert each argument again on every launch (~0.3 us).
        self._fn = self.lib.kfuse_launch
        self._fn.restype = ctypes.c_int
        self._last_ns = ctypes.c_int64.in_dll(self.lib, "kfuse_last_ns")
        n_results = len(generated.result_format)
        self._out = ctypes.create_string_buffer(max(8, 8 * n_results))
        self._unpack = struct.Struct("=" + generated.result_format).unpack_from if n_results else None
        self.on_device = spec.space in DEVICE_SPACES
        writes = writes or tuple(t.is_view or None for _, t in spec.params)  # unknown: assume every View written
        self.pack = _packer(struct.Struct("=" + generated.slot_format).pack, spec,
                            writes if self.on_device else None)
        self._writes = writes

    def launch(self, bounds: tuple, args: tuple):
        """Run the kernel once; returns the tuple of reduction results (empty for parallel_for)."""
        if self.on_device:
            device.before_launch(args)
        rc = self._fn(self.pack(bounds, args), self._out, _err, _errlen)
        if rc != 0 and rc != _KERNEL_FAULT:
            raise LaunchError(f"kernel '{self.name}' failed: {_err.value.decode(errors='replace')}")
        if self.on_device:
            device.after_launch(args, self._writes)  # also after a fault: the kernel ran and wrote
        if rc == _KERNEL_FAULT:
            raise kernel_fault(_err.value.decode(errors="replace"), self.name)
        stats.bump("kernels_launched")
        if self.fused:
            stats.bump("fused_kernels_launched")
        if profile is not None:
            profile.append((self.name, self._last_ns.value * 1e-9, self.fused))
        return self._unpack(self._out) if self._unpack else ()

    @property
    def last_seconds(self) -> float:
        """Time of the last launch measured in C++ around the launch and its fence."""
        return self._last_ns.value * 1e-9


def _packer(pack, spec: KernelSpec, device_writes: tuple | None = None):
    """``pack(bounds, args) -> bytes`` as one expression, built once per kernel so a launch runs no loop.

    Slots: the policy bounds, then per parameter its value, or a View's pointer and extents (and
    strides when it is not C-contiguous) -- the layout ``codegen.kernel`` unpacks.
    """
    parts = ["*bounds"]
    for i, (_, t) in enumerate(spec.params):
        if not t.is_view:
            parts.append(f"args[{i}]")
            continue
        pointer = f"args[{i}].ptr" if device_writes is None else f"dptr(args[{i}], {bool(device_writes[i])})"
        parts += [pointer, f"*args[{i}].shape"]
        if t.layout == "stride":
            parts.append(f"*args[{i}].strides")
    return eval(f"lambda bounds, args: pack({', '.join(parts)})",  # noqa: S307 - our own text
                {"pack": pack, "dptr": device.device_pointer})


def policy_slots(policy) -> tuple:
    """The leading slots of the argument buffer: the policy's bounds."""
    if isinstance(policy, RangePolicy):
        return (policy.begin, policy.end)
    if isinstance(policy, MDRangePolicy):
        return policy.begins + policy.ends
    return (policy.league_size, policy.team_size, policy.vector_length)
