"""Turning tracing on and off, and the one place that decides when pending work runs.

With tracing on, ``parallel_*`` calls are logged here and return at once (reductions return a
Future). Work runs when the host needs it: a View access (through the View host barrier), a Future's
value, ``pk.fence()``, ``disable_fusion()``, a full trace, or interpreter exit.
"""
from __future__ import annotations

import contextlib

from .. import config, views
from ..errors import KfuseError
from ..runtime import device, dispatch, kokkos_runtime, stats
from .future import Future
from .trace import Trace


class Tracer:
    def __init__(self):
        self.trace = Trace()
        self.enabled = False
        self._running = False
        self.fuse = True  # False: trace and run calls one by one (to measure tracing alone)

    # --- logging --------------------------------------------------------------------------
    def log(self, call):
        stats.bump("ops_traced")
        result = None
        if call.op != "for":
            result = Future(call.prepared.spec.accs[0], self.resolve, call)
            call.result = result
        self.trace.append(call)
        if len(self.trace) >= config.MAX_TRACE.get():
            self.flush_all()
        return result

    # --- running --------------------------------------------------------------------------
    def barrier(self, view, write: bool) -> None:
        """Host access to ``view``: run what produces its current contents (and, for writes, its readers),
        then bring a GPU copy back if the device holds newer data (no-op on host-only runs)."""
        if not self._running and self.trace.entries:
            self._run(self.trace.partition_for(view.bounds, write))
        device.host_access(view, write)

    def resolve(self, future: Future) -> None:
        """Compute ``future``; pending reductions over the same range come along, so the fuser can deliver
        several results from one launch (running a pending call early is safe: its dependencies come too)."""
        policy = future.call.policy
        siblings = tuple(e.call for e in self.trace.entries if e.call.result is not None and e.call.policy == policy)
        self._run(self.trace.partition_for(None, False, (future.call,) + siblings))

    def run_now(self, call) -> None:
        """Run a logged call (with what it depends on) at once."""
        self._run(self.trace.partition_for(None, False, (call,)))

    def flush_all(self) -> None:
        if self.trace.entries:
            self._run(list(self.trace.entries))

    def _run(self, entries) -> None:
        if not entries:
            return
        from ..fuser.runner import run_partition

        self.trace.remove(entries)
        stats.bump("flushes")
        self._running = True
        try:
            run_partition([e.call for e in entries], fuse=self.fuse)
        finally:
            self._running = False


_tracer = Tracer()


def enable_fusion(trace_only: bool = False) -> None:
    """Trace kernel calls and fuse them when their results are needed (KFUSE_FUSION=0 overrides)."""
    if config.FUSION.get() is False:
        return
    _tracer.enabled = True
    _tracer.fuse = not trace_only


def disable_fusion() -> None:
    """Run everything pending, then execute each call as it is made (off even if a pending kernel fails)."""
    try:
        _tracer.flush_all()
        device.sync_all()  # like pk.fence(): host memory (and NumPy aliases of Views) is current afterwards
    finally:
        _tracer.enabled = False


def fusion_enabled() -> bool:
    return _tracer.enabled


@contextlib.contextmanager
def fusion():
    """``with pk.fusion(): ...`` traces and fuses inside the block and flushes at its end."""
    was = _tracer.enabled
    enable_fusion()
    try:
        yield
    finally:
        if not was:
            disable_fusion()


def flush_all() -> None:
    _tracer.flush_all()


def explain() -> str:
    from ..fuser.explain import report

    return report()


def _at_exit() -> None:
    try:
        _tracer.flush_all()
    except KfuseError as exc:  # a failing delayed kernel at exit: report, do not crash the interpreter
        import sys

        print(f"kfuse: pending work failed at exit: {exc}", file=sys.stderr)


kokkos_runtime.on_exit(_at_exit)
views.set_host_barrier(_tracer.barrier)
dispatch.tracer = _tracer
_tracer.enabled = config.FUSION.get() is True
