"""What the engine asks of a backend: turn a lowered kernel into something it can launch.

The pipeline (kfuse/pipeline.py) specialises and schedules calls and lowers each group to a
``Lowered`` kernel (the kernel AST after type checking, fusion and transforms). A backend does the
rest: render it in its language, compile (through its cache) and load it, pack arguments and move
memory around a launch. Everything a backend needs to know about a kernel is in ``Lowered``; a
backend never sees calls, traces or Views beyond the arguments of one launch.

Backends: ``kokkos`` (C++ Kokkos for OpenMP, Serial, Cuda, HIP), ``python`` (a reference
interpreter of the same kernel AST: no compiler, used by tests of the tracer, the fuser and the
transforms), ``null`` (records launches and runs nothing: schedule tests) and ``debug`` (the Debug
space: the user's own Python function, one thread index at a time).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..frontend.normalize import KernelSource
from ..frontend.spec import KernelSpec


@dataclass(frozen=True)
class Lowered:
    """A kernel ready to render: one workunit's specialisation, or a fused group after its passes.

    ``writes``: per parameter of ``spec.params``, whether the kernel writes that View (None for scalars);
    a device backend keeps host and device copies coherent with it. ``restrict``: View parameters proven
    not to overlap any other. ``workunit``: the Python function of an unfused call (the Debug space runs it).
    """

    source: KernelSource
    spec: KernelSpec
    name: str
    writes: tuple
    fused: bool = False
    restrict: frozenset = frozenset()
    workunit: object = field(default=None, compare=False)


class Kernel:
    """A loaded kernel. ``launch(bounds, args)`` runs it once over the policy ``bounds`` (``policy_slots``)
    with ``args`` in ``spec.params`` order and returns the tuple of reduction/scan results.

    Errors: ``LaunchError`` when it cannot run, ``ArgumentError`` for an argument that does not fit its
    parameter, and a ``KernelFault`` when a thread faulted. A kernel finishes its launch after a fault
    (the faulting operation yields 0), so the fault carries ``results`` (the reductions as computed) and
    ``member`` (the faulting call's position in a fused kernel, or None).
    """

    name: str
    fused: bool

    def launch(self, bounds: tuple, args: tuple) -> tuple:  # pragma: no cover - interface
        raise NotImplementedError

    def launch_queued(self, bounds: tuple, args: tuple, packed=None) -> tuple:
        """``launch``, returning before the device has run the kernel where the backend can (kfuse/rerun.py's
        replays: the device runs kernels in order, and whatever reads their results waits for them); here it runs
        at once."""
        return self.launch(bounds, args)

    def packed(self, bounds: tuple, args: tuple):
        """The argument buffer a ``launch`` with the same arguments may take as ``packed``, made once for launches
        repeated with them (kfuse/rerun.py); None where the kernel has none (its ``launch`` takes no buffer)."""
        return None

    @property
    def last_seconds(self) -> float:
        """Duration of the last launch as the backend measured it (0.0 when it does not measure)."""
        return 0.0


class Backend:
    """One way of running kernels. Subclasses set ``name`` and implement ``load``."""

    name = "abstract"
    #: transforms this backend can use (``restrict`` only means something to a C++ compiler).
    transforms = frozenset({"args", "loops", "restrict", "memory"})
    #: whether rendered fused kernels are kept across processes (``compiler/fused.py``).
    persistent = False
    #: seconds a kernel takes to build before its first launch (the cost model, fuser/cost.py: 0 = free).
    compile_seconds = 0.0
    #: whether kernels run on the host only (a GPU default space, KFUSE_DEFAULT_SPACE=Cuda, then means OpenMP).
    host_only = False

    def enter_thread(self) -> None:
        """Prepare the calling thread to launch kernels (called with ``guard.lock`` held, before launches)."""

    def host_access(self, view, write: bool, overwrite: bool = False) -> None:
        """The host is about to read (or write, or ``overwrite`` entirely) ``view``: bring back a newer copy the
        backend holds elsewhere."""

    def copy(self, dst, src) -> bool:
        """``pk.deep_copy(dst, src)`` of two Views where the backend holds their data; False: the host copies."""
        return False

    def synchronize(self) -> None:
        """Wait for all launched work (``pk.fence()``); Views come back to the host when the host reads them."""

    def check_space(self, space: str, workunit: str) -> None:
        """Raise ArgumentError if kernels cannot run in ``space`` (``spaces.ExecutionSpace`` value)."""

    def translate(self, source: KernelSource, spec: KernelSpec, name: str):
        """Type-check a specialisation when it is made, so errors show at the user's call even when fusion
        delays the kernel. Returns what ``render`` may reuse for the unfused kernel, or None."""
        return None

    def render(self, lowered: Lowered, translated=None):
        """The kernel in this backend's language, carrying what ``load`` needs (a persistent backend keeps it)."""
        raise NotImplementedError  # pragma: no cover - interface

    def compile_ahead(self, rendered: list) -> None:
        """A hint: these kernels will be loaded soon; a compiling backend may start building them together."""

    def built(self, rendered) -> bool:
        """Whether ``rendered`` loads without compiling (it is in the backend's cache)."""
        return True

    def load(self, rendered) -> Kernel:
        """Compile (through the backend's cache) and load a rendered kernel."""
        raise NotImplementedError  # pragma: no cover - interface

    def stored(self, digest: str):
        """``(rendered, arg_index)`` of a fused kernel an earlier process kept under ``digest``, or None."""
        return None

    def store(self, digest: str, rendered, arg_index: tuple) -> None:
        """Keep a rendered fused kernel for later processes (persistent backends only)."""
