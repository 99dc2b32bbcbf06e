"""Execution spaces: where a kernel runs."""
from __future__ import annotations

import enum
import warnings

from .errors import LaunchError
from . import config, context, guard


class ExecutionSpace(enum.Enum):
    """OpenMP and Serial run compiled C++; Debug runs the workunit in the Python interpreter."""

    OpenMP = "OpenMP"
    Serial = "Serial"
    Debug = "Debug"
    Cuda = "Cuda"
    HIP = "HIP"
    Default = "Default"


DEVICE_SPACES = frozenset({"Cuda", "HIP"})  # spaces whose kernels run on a GPU, with memory of their own


def on_device(space: str) -> bool:
    """Whether kernels of ``space`` (an ExecutionSpace value) run on a GPU: memory moves around their launches,
    restrict is applied more carefully, faults are reported through device memory."""
    return space in DEVICE_SPACES


def from_setting() -> ExecutionSpace:
    """The default space KFUSE_DEFAULT_SPACE names (a new runtime starts with it)."""
    name = config.DEFAULT_SPACE.get()
    try:
        return ExecutionSpace[name]
    except KeyError:
        raise ValueError(f"KFUSE_DEFAULT_SPACE={name!r}: choose one of "
                         + ", ".join(s.name for s in ExecutionSpace if s is not ExecutionSpace.Default)) from None


def set_default_space(space: ExecutionSpace) -> None:
    """The space of kernels launched without one, for the runtime in charge."""
    if not isinstance(space, ExecutionSpace):
        raise TypeError(f"set_default_space expects a pk.ExecutionSpace, got {space!r}")
    context.current().default_space = ExecutionSpace.OpenMP if space is ExecutionSpace.Default else space


def get_default_space() -> ExecutionSpace:
    return context.current().default_space


def resolve(space: ExecutionSpace | None) -> ExecutionSpace:
    if space is None or space is ExecutionSpace.Default:
        space = context.current().default_space
    if guard.forked_after_start:
        return _in_forked_child(space)
    return space


_warned_fork = False


def _in_forked_child(space: ExecutionSpace) -> ExecutionSpace:
    """See kfuse/guard.py: OpenMP cannot continue after fork(), Serial can; GPUs cannot."""
    global _warned_fork
    if space is ExecutionSpace.OpenMP:
        if not _warned_fork:
            _warned_fork = True
            warnings.warn("kfuse: this process was forked after Kokkos started; OpenMP kernels run on the Serial "
                          "backend here (use multiprocessing's 'spawn' start method for parallel children)",
                          RuntimeWarning, stacklevel=6)  # the program's parallel_* call
        return ExecutionSpace.Serial
    if space in (ExecutionSpace.Cuda, ExecutionSpace.HIP):
        raise LaunchError(f"kfuse: this process was forked after Kokkos started, and a {space.value} context "
                           "cannot be used after fork(); start child processes with multiprocessing's 'spawn' "
                           "method")
    return space


class MemorySpace(enum.Enum):
    """PyKokkos's memory spaces, accepted where it takes one (``pk.View(shape, dtype, pk.HostSpace)``). Every
    View is host memory here: GPU launches keep their own device copy (kfuse/runtime/device.py), so a device
    space needs no different allocation, as PyKokkos itself allocates managed Cuda/HIP Views on the host."""

    HostSpace = "HostSpace"
    CudaSpace = "CudaSpace"
    CudaUVMSpace = "CudaUVMSpace"
    HIPSpace = "HIPSpace"
    HIPManagedSpace = "HIPManagedSpace"
    OpenMPTargetSpace = "OpenMPTargetSpace"
    MemorySpaceDefault = "MemorySpaceDefault"
