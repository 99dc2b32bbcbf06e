"""kfuse: write parallel kernels in Python, run them as C++ Kokkos, and fuse them at run time.

A drop-in for PyKokkos programs: ``import kfuse as pk``.
"""
from __future__ import annotations

import os as _os
import time as _time

from . import context as _context, counters as _counters, engine as _engine
from .runtime import kokkos_runtime as _kokkos_runtime

from .errors import (ArgumentError, CompileError, DeferredError, KernelTypeError, KfuseError, LaunchError,
                     SourceError, UnsupportedSyntaxError)
from .errors import InternalError, KernelFault, KernelIndexError, KernelScratchError, KernelZeroDivisionError
from .errors import user_facing as _user_facing
from .frontend.workunit import classtype, function, workunit
from .kernel_api import *  # noqa: F401,F403 - math, atomics, printf for kernels
from .kernel_api import pow  # noqa: A004
from .policies import (AUTO, Iterate, MDRangePolicy, PerTeam, PerThread, RangePolicy, Rank, TeamPolicy,
                       TeamThreadMDRange, TeamThreadRange, TeamVectorMDRange, TeamVectorRange, ThreadVectorMDRange,
                       ThreadVectorRange)
from .binsort import BinOp, BinOp1D, BinOp3D, BinSort
from .dispatch import parallel_for, parallel_reduce, parallel_scan
from .capturing import capture
from .counters import reset as reset_stats
from .spaces import ExecutionSpace, MemorySpace, get_default_space, set_default_space
from .future import Future, value
from .types import (Acc, DataType, DataTypeClass, DType, ScratchView1D, ScratchView2D, ScratchView3D, ScratchView4D,
                    ScratchView5D, ScratchView6D, ScratchView7D, ScratchView8D, TeamMember, View1D, View2D, View3D,
                    bool_, double, float32, float64, int8, int16, int32, int64, real, uint8, uint16, uint32, uint64)
from .views import (Layout, Trait, View, ViewTypeInfo, array, asarray, create_mirror, create_mirror_view, deep_copy,
                    from_numpy)
from .workloads import callback, execute, functor, main, workload

float = float32  # noqa: A001 - PyKokkos: pk.float is 32-bit
bool = bool_  # noqa: A001 - PyKokkos spelling
LayoutDefault, LayoutLeft, LayoutRight = Layout.LayoutDefault, Layout.LayoutLeft, Layout.LayoutRight
globals().update(Trait.__members__)  # pk.Atomic, pk.Unmanaged ... as in PyKokkos
globals().update(MemorySpace.__members__)  # pk.HostSpace, pk.CudaSpace ... as in PyKokkos
OpenMP, Serial, Debug, Cuda = ExecutionSpace.OpenMP, ExecutionSpace.Serial, ExecutionSpace.Debug, ExecutionSpace.Cuda
Acc = Acc
pi = 3.141592653589793
e = 2.718281828459045


@_user_facing
def fence() -> None:
    """Wait for all work, including kernels still pending in the trace. Nothing is copied back from a GPU (as in
    PyKokkos): a View's results come back when the host reads it (kfuse/runtime/device.py)."""
    try:
        _engine.flush_all()  # raises the first failure of a delayed call not reported yet
    finally:
        _context.current().backend.synchronize()


def stats() -> dict:
    """Counters of the runtime in charge since it started (or the last ``reset_stats()``)."""
    return _counters.snapshot()


def initialize(*_args, **_kwargs) -> None:
    """Kokkos starts on the first launch; kept for PyKokkos programs that call it."""
    _kokkos_runtime.ensure_initialized()


def enable_uvm() -> None:
    """PyKokkos: put Views in CUDA unified memory. kfuse's Views are host memory that it moves to and from a GPU
    itself (see "GPUs" in the README), so there is nothing to change; kept for programs that call it."""


def finalize() -> None:
    """Kept for PyKokkos programs; kfuse finalises Kokkos itself at exit, after running pending work."""
    fence()


class Timer:
    """Wall-clock timer (PyKokkos spelling): ``t = pk.Timer(); ...; t.seconds()``."""

    def __init__(self):
        self._start = _time.perf_counter()

    def seconds(self) -> float:
        return _time.perf_counter() - self._start

    def reset(self) -> None:
        self._start = _time.perf_counter()


from .engine import Runtime, disable_fusion, enable_fusion, explain, fusion, fusion_enabled  # noqa: E402
disable_fusion = _user_facing(disable_fusion)  # it runs pending work, which may fail
from .transforms.manager import set_transforms  # noqa: E402
from .ops import *  # noqa: E402,F401,F403 - NumPy-style array operations (pk.add, pk.sum, pk.zeros ...)

# The composition root: the process's runtime, and the hooks that reach it at exit and after fork().
_context.install(_engine.Runtime())
_kokkos_runtime.on_exit(_engine.at_exit)
_os.register_at_fork(after_in_child=_engine.after_fork_in_child)
