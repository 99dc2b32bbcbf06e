"""The python backend: kernels run by the Python interpreter with the compiled kernels' semantics.

It needs no compiler, so tests of the tracer, the fuser and the transforms can run anywhere (like tinygrad's
PYTHON device). A kernel (one workunit's specialisation, or a fused group after its passes) is its typed IR,
the one the C++ is printed from, written as Python by ``pyemit`` and run one thread index at a time over
the Views' NumPy memory: 64-bit wrapping integers, float32 rounded after every operation, IEEE floats,
integer ``//`` and ``%`` and every View index checked. A fault does not stop the launch: the faulting
operation yields 0, the launch runs to its end, and the first fault is raised as the compiled kernels
raise it (``errors.kernel_fault`` reads the same record).
"""
from __future__ import annotations

import itertools
import time
from dataclasses import dataclass

import numpy as np

from .. import counters
from ..codegen.kernel import roles
from ..errors import ArgumentError
from ..ir.lower import lowered as lowered_ir
from ..runtime.launch import argument_range_error
from . import pyemit
from .base import Backend, Kernel, Lowered
from .interp import DebugTeamMember, debug_view
from .pyops import CONVERT, ZERO, Runtime


@dataclass(frozen=True)
class Rendered:
    """A kernel as Python: its function (thread index(es), accumulators, last_pass, parameters) and runtime."""

    lowered: Lowered
    function: object
    runtime: Runtime
    python: str  # the emitted source, for reading


def render_python(lowered: Lowered) -> Rendered:
    """The kernel's IR as Python functions (its helper instances, then the kernel), compiled."""
    emitted = pyemit.emit(lowered_ir(lowered.source, lowered.spec), f"<kfuse python kernel {lowered.name}>")
    runtime = Runtime(emitted.sites)
    namespace = runtime.namespace()
    exec(emitted.code, namespace)  # noqa: S102 - written from the kernel's IR
    return Rendered(lowered, namespace["_kf_kernel"], runtime, emitted.python)


class PythonKernel(Kernel):
    def __init__(self, rendered: Rendered):
        self.rendered = rendered
        self.name = rendered.lowered.name
        self.fused = rendered.lowered.fused
        self._seconds = 0.0

    def launch(self, bounds: tuple, args: tuple) -> tuple:
        lowered, runtime = self.rendered.lowered, self.rendered.runtime
        spec = lowered.spec
        error = argument_range_error(spec, self.name, self.fused, bounds, args)
        if error is not None:
            raise error
        for (name, t), a, written in zip(spec.params, args, lowered.writes):
            if written and t.is_view and not a._array.flags.writeable:  # (NumPy refuses the stores mid-kernel)
                raise ArgumentError(f"workunit '{self.name}': parameter '{name}' is written, but its memory is "
                                    "read-only (a NumPy array with writeable=False); the python backend does not "
                                    "write through it")
        values = [debug_view(a, n) if t.is_view else CONVERT[t.dtype](a) for a, (n, t) in zip(args, spec.params)]
        runtime.fault, runtime.faulted = None, 0
        start = time.perf_counter()
        with np.errstate(all="ignore"):
            results = _run(self.rendered.function, spec, _points(spec, bounds), values)
        self._seconds = time.perf_counter() - start
        results = tuple(float(r) if d.is_float else int(r) for r, d in zip(results, spec.accs))
        fault = runtime.take_fault(self.name)
        if fault is not None:
            fault.results = results  # the launch ran to its end
            raise fault
        counters.bump("kernels_launched")
        if self.fused:
            counters.bump("fused_kernels_launched")
        return results

    @property
    def last_seconds(self) -> float:
        return self._seconds


def _points(spec, bounds: tuple):
    if spec.policy == "range":
        return ((i,) for i in range(bounds[0], bounds[1]))
    if spec.policy == "mdrange":
        return itertools.product(*(range(b, e) for b, e in zip(bounds[:spec.rank], bounds[spec.rank:])))
    scratch = (bounds[3:5], bounds[5:7])
    return ((DebugTeamMember(r, bounds[0], scratch),) for r in range(bounds[0]))


def _run(fn, spec, points, values: list) -> tuple:
    if spec.op == "for":
        for p in points:
            fn(*p, *values)
        return ()
    zeros = tuple(ZERO[d] for d in spec.accs)
    if spec.op == "reduce":
        accs = zeros
        for p in points:
            accs = fn(*p, *accs, *values)
        return accs
    points = list(points)  # scan: a first pass accumulates, a second pass with last_pass=True writes
    acc = zeros
    for p in points:
        acc = fn(*p, *acc, False, *values)
    total = acc
    acc = zeros
    for p in points:
        acc = fn(*p, *acc, True, *values)
    return total


class PythonBackend(Backend):
    """Kernels run by the Python interpreter (host spaces only), from the IR the C++ is printed from."""

    name = "python"
    host_only = True
    persistent = False
    transforms = frozenset({"args", "loops", "memory"})  # restrict only means something to a C++ compiler

    def check_space(self, space: str, workunit: str) -> None:
        if space not in ("OpenMP", "Serial"):
            raise ArgumentError(f"workunit '{workunit}': execution space {space} is not available to the python "
                                "backend, which runs kernels on the host; use pk.OpenMP or pk.Serial")

    def translate(self, source, spec, name):
        """The C++ backend's errors at the user's call: parameters that do not fit the policy, then the
        lowering's unsupported syntax and type errors."""
        roles(source, spec)
        lowered_ir(source, spec)
        return None

    def render(self, lowered: Lowered, translated=None) -> Rendered:
        return render_python(lowered)

    def load(self, rendered: Rendered) -> PythonKernel:
        return PythonKernel(rendered)


PYTHON = PythonBackend()  # the process's one: specialisations and their kernels are kept per backend instance
