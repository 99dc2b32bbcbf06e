"""The runtime: the one place that decides when pending work runs, and the state it needs.

A ``Runtime`` owns the trace, the failures of delayed calls, the plan and fused-kernel caches, the
``explain()`` records, the counters, the settings the program overrode (transforms, default space) and
its backend. The process has one (installed by kfuse/__init__.py); tests and, later, MPI communicators
make their own (kfuse/context.py).

With tracing on, ``parallel_*`` calls are logged here and return at once (reductions return a
Future). Work runs when the host needs it: a View access (through the View host barrier), a Future's
value, ``pk.fence()``, ``disable_fusion()``, a full trace, or interpreter exit -- and at once for a
call touching escaped memory (kfuse/escape.py), which the host can reach without a barrier.

Threads: one runtime (trace) and one re-entrant lock (``guard.lock``) for the process. A thread's host
access waits while another thread runs a partition, so no read skips its barrier; calls from several
threads on shared Views are ordered as they were logged. Per-thread traces would be cheaper under
contention but wrong for Views shared between threads.
"""
from __future__ import annotations

import contextlib
import sys
from collections import deque

from . import calls as call_stage, config, context, counters, escape, guard, spaces, untraced, views
from . import backends
from .errors import public_error
from .fuser import explain as explain_records, profit
from .future import Future
from .pipeline import run_partition
from .rerun import Rerun
from .tracer.failures import Failures
from .tracer.trace import Trace

_RECORDS_KEPT = 16  # flushes ``explain()`` shows


class Runtime:
    def __init__(self, backend=None, fusion: bool | None = None):
        """``backend``: a backends.base.Backend (default: the one KFUSE_BACKEND names); ``fusion``: start with tracing on or off
        (default: as KFUSE_FUSION says)."""
        self.backend = backend or backends.named(config.BACKEND.get())
        self.logged = Trace()  # the pending calls (read it through ``trace``, which adds a Rerun's matched calls)
        self.rerun = Rerun()  # repeated flushes, rerun without tracing (kfuse/rerun.py)
        self._streak_sets: dict = {}  # transform set -> its streaks (a group kept apart without transforms may pay
        # with them); ``streaks``: the current set's, specialisation -> whether its calls fuse (kfuse/untraced.py)
        self.failures = Failures()
        self.enabled = config.FUSION.get() is True if fusion is None else fusion
        self._running = False  # a partition is running on the lock's owner: its own View accesses pass
        self.fuse = True  # False: trace and run calls one by one (to measure tracing alone)
        self.counts = counters.fresh()
        self.default_space = spaces.from_setting()
        if self.backend.host_only and spaces.on_device(self.default_space.value):  # an interpreter on the host
            self.default_space = spaces.ExecutionSpace.OpenMP
        self.transforms = None  # pk.set_transforms: the transforms fused kernels get (None: KFUSE_TRANSFORMS)
        self.plans: dict = {}  # (group bound, partition graph) -> plan
        self.replays: dict = {}  # partition signature -> fuser.replay.Replay
        self.fused: dict = {}  # fused group key -> (kernel, arg_index)
        self.rendered: dict = {}  # fused group key -> (rendered kernel, arg_index), until it is loaded
        self.profit = profit.Book()  # per group signature: fused or apart, and the timings behind it
        self.records: deque = deque(maxlen=_RECORDS_KEPT)  # explain()'s flush records
        self.record_sink: list | None = None  # when a list, every flush record is also kept here (kfuse.bench)
        self.flush_count = 0
        self.calls_made = 0  # kernel calls the program made (kfuse/dispatch.py): a call's place in the program
        self.host_accesses = 0  # host accesses to Views and copies between them (kfuse/capturing.py asks)
        self.capturing = False  # a captured function's Python runs: every call goes to the trace (kfuse/capturing.py)
        self.compiling_up_front = False  # a captured function's flush runs: fusing waits for no repaid compile
        self.batch = None  # array operations recorded but not yet calls of the trace (kfuse/ops/lazy.py)

    @property
    def transforms(self):
        """pk.set_transforms's set (None: KFUSE_TRANSFORMS's); setting it switches ``streaks`` to that set's."""
        return self._transforms

    @transforms.setter
    def transforms(self, chosen) -> None:
        self._transforms = chosen
        self.streaks = self._streak_sets.setdefault(chosen, {})

    def idle(self) -> bool:
        """No trace entry, recorded array operation, call matched by a rerun or failure standing: the host may
        act on any View now, as nothing waits to run and nothing was lost."""
        return not (self.logged.entries or self.batch is not None or self.rerun.matched or self.failures)

    def may_run_now(self) -> bool:
        """Whether a call or an array operation may run at once rather than go to the trace: idle, and no captured
        function records (its flush must hold every kernel it launches, kfuse/capturing.py)."""
        return not self.capturing and self.idle()

    def running_flush(self) -> int | None:
        """The explain record number of the flush whose kernels run now, else None (the bench's launch profile)."""
        return self.flush_count if self._running else None

    @property
    def trace(self) -> Trace:
        """The pending calls, those a ``Rerun`` matched included (they become entries here first)."""
        if self.rerun.matched:
            self.rerun.materialize(self.logged)
        return self.logged

    # --- logging --------------------------------------------------------------------------
    def log(self, call):
        """Append ``call`` (the caller holds ``guard.lock``); it runs at once (with what it depends on) if it
        touches escaped memory, or prints (pk.printf output keeps its place among the program's own output)."""
        if self.batch is not None:
            self.run_batch()
        counts = self.counts
        counts["ops_traced"] += 1
        result = self._append(call)
        escaped = _escaped_views(call)
        if escaped or call.prepared.prints:
            counts["escaped_calls" if escaped else "printing_calls"] += 1
            self._run(self.trace.partition_for(None, False, (call,)))
            self._raise_at_call(call)  # (a GPU launch keeps escaped memory current itself: runtime/device.py)
        elif len(self.trace.entries) >= config.MAX_TRACE.get():
            self.flush_all()
        return result

    def _append(self, call):
        """Put ``call`` in the trace; a reduction or scan gets the Future it delivers (returned)."""
        spec = call.prepared.spec
        if spec.op != "for":
            call.result = Future(spec.accs[0], self.resolve, call)
        self.trace.append(call)
        return call.result

    def _raise_at_call(self, call) -> None:
        """A call that ran at once reports its failure at once, as eager does: its own error, or the
        DeferredError of the earlier delayed call it needed (the program may read what it wrote directly,
        where no barrier could raise later)."""
        failure = call.failure
        if failure is None:
            return
        if failure.call() is call:
            self.failures.forget(failure)
            raise failure.error
        raise failure.deferred("this kernel call")

    # --- running --------------------------------------------------------------------------
    def barrier(self, view, write: bool, overwrite: bool = False) -> None:
        """Host access to ``view``: run what produces its current contents (and, for writes, its readers),
        then bring a GPU copy back if the device holds newer data (no-op on host-only runs). Raises
        DeferredError if those contents were lost to a failed call (unless the host overwrites them all)."""
        with guard.lock:
            self.host_accesses += 1  # (under the lock: a capture's recording holds it, so it counts its own thread's)
            if self._running:
                return
            if not self.idle():  # (host code reading a View element by element pays only this when idle)
                self._settle(view, write, overwrite)
            self.backend.host_access(view, write, overwrite)

    def copy(self, dst, src) -> bool:
        """``pk.deep_copy(dst, src)`` of two Views where their data lives (a GPU), once the pending work on
        both has run: whether the backend did it (else the caller copies through the host barriers)."""
        with guard.lock:
            self.host_accesses += 1
            if self._running:
                return False
            self._settle(src, False)
            self._settle(dst, True, True)
            return self.backend.copy(dst, src)

    def _settle(self, view, write: bool, overwrite: bool = False) -> None:
        """Run the pending calls ``view``'s access depends on; raise if its contents were lost."""
        self._recorded_first()
        if self.trace.entries:
            self._run(self.trace.partition_for(view.bounds, write))
        if self.failures:
            if overwrite:
                self.failures.overwritten(view)
            else:
                failure = self.failures.at(view)
                if failure is not None:
                    raise failure.deferred("this host access to a View")

    def resolve(self, future: Future) -> None:
        """Compute ``future``; pending reductions over the same range come along, so the fuser can deliver
        several results from one launch (running a pending call early is safe: its dependencies come too)."""
        with guard.lock:
            self._recorded_first()  # a rerun delivers it, or makes its call a trace entry
            if future.done or future.call is None:  # another thread computed it meanwhile
                return
            policy = future.call.policy
            siblings = tuple(e.call for e in self.trace.entries
                             if e.call.result is not None and e.call.policy == policy)
            self._run(self.trace.partition_for(None, False, (future.call,) + siblings))

    def run_together(self, calls: list) -> None:
        """Run ``calls`` (an explicit fusion, ``pk.parallel_for(n, [wu1, wu2], args_0=..., args_1=...)``) now,
        with the pending calls they depend on: the program asked for fusion, so they are fused where safe even
        with fusion off, and split (with the reason in ``explain()``) where not. A failure raises as eager does."""
        if self.batch is not None:
            self.run_batch()
        for call in calls:
            self._append(call)
        self._run(self.trace.partition_for(None, False, tuple(calls)), fuse=True)
        for call in calls:
            self._raise_at_call(call)

    def _recorded_first(self) -> None:
        """Before a host access, a Future's value or a flush: what was recorded without a trace entry runs first --
        the calls a rerun matched (kfuse/rerun.py), then the array operations (at once if nothing else is pending)."""
        if self.rerun.matched:
            self.rerun.run(self)
        if self.batch is not None:
            self.run_batch(host_waits=True)

    def run_batch(self, host_waits: bool = False) -> None:
        """Log the array operations recorded so far as kernel calls (before any other work, which may need them).
        ``host_waits`` (a host access, a Future's value, a flush): run them at once instead when nothing else is
        pending (no trace entry, no partition to analyse), no failure is recorded (whose lost data they might
        read: the trace poisons what such calls write) and no captured function records (its flush must hold every
        kernel it launches, kfuse/capturing.py)."""
        batch, self.batch = self.batch, None
        batch.run(host_waits and not (self.trace.entries or self.failures or self.capturing))

    def flush_all(self) -> None:
        with guard.lock:
            self._recorded_first()
            if self.trace.entries:
                self._run(list(self.trace.entries))

    def check_eager(self, call) -> None:
        """An eager call must not read data a failed delayed call lost (the pipeline's own rule)."""
        failure = self.failures.blocking(call)
        if failure is not None:
            raise failure.deferred("this kernel call")

    def after_fork_in_child(self) -> None:
        """Pending OpenMP calls inherited from the parent run on the Serial backend here (kfuse/guard.py)."""
        entries = self.trace.entries
        self.rerun.forget()
        if guard.forked_after_start:
            for entry in entries:
                if entry.call.prepared.spec.space == "OpenMP":
                    entry.call.prepared = call_stage.serial_twin(entry.call.prepared)

    def _run(self, entries, fuse: bool | None = None) -> None:
        if not entries:
            return
        self.trace.remove(entries)
        counters.bump("flushes")
        self.backend.enter_thread()
        self._running = True
        calls = [e.call for e in entries]
        try:
            record, launches, waiting = run_partition(self, calls, fuse=self.fuse if fuse is None else fuse)
        finally:
            self._running = False
        judged = self.rerun.keep(self, entries, launches, record, waiting)
        if record.fused:
            untraced.after_flush(self.streaks, calls, record, judged)


def _escaped_views(call) -> list:
    """The View arguments of ``call`` the host can reach past the barriers (kfuse/escape.py). Without any
    export or user base alive, only NumPy and GPU arrays passed straight in can be (the common, fast case)."""
    args, view_params = call.args, call.prepared.view_params
    if escape.live():
        return [args[i] for i, write in view_params if args[i].escaped(write)]
    return [args[i] for i, _ in view_params if isinstance(args[i], _REACHABLE)]


_REACHABLE = (views.NumpyArgument, views.DeviceView)  # arguments the caller holds directly (View subclasses are not)


def enable_fusion(trace_only: bool = False) -> None:
    """Trace kernel calls and fuse them when their results are needed (KFUSE_FUSION=0 overrides)."""
    if config.FUSION.get() is False:
        return
    rt = context.current()
    rt.enabled = True
    rt.fuse = not trace_only


def disable_fusion() -> None:
    """Run everything pending, then execute each call as it is made (off even if a pending kernel failed:
    the first failure the program has not seen yet is raised here)."""
    try:
        flush_all()
        context.current().backend.synchronize()  # like pk.fence()
    finally:
        context.current().enabled = False


def fusion_enabled() -> bool:
    return context.current().enabled


@contextlib.contextmanager
def fusion():
    """``with pk.fusion(): ...`` traces and fuses inside the block and flushes at its end."""
    was = context.current().enabled
    enable_fusion()
    try:
        yield
    finally:
        if not was:
            try:
                disable_fusion()
            except Exception as exc:  # a delayed call failed: show the user's ``with`` line, not kfuse's frames
                raise public_error(exc)  # noqa: B904 - public_error keeps the cause


def flush_all() -> None:
    """Run everything pending; raise the first failure of a delayed call the program has not seen yet."""
    rt = context.current()
    rt.flush_all()
    with guard.lock:
        rt.failures.raise_unreported()


def explain(last: int | None = None) -> str:
    """An account of the last flushes: partitions, groups, and why groups split."""
    return explain_records.report(context.current(), last)


def at_exit() -> int:
    """Run pending work; a delayed call whose failure the program never saw makes the exit status 1."""
    rt = context.current()
    rt.flush_all()
    lost = rt.failures.unreported()
    for failure in lost:
        print(f"kfuse: {failure.where()} failed and its results were never read:\n{failure.error}", file=sys.stderr)
    return 1 if lost else 0


def after_fork_in_child() -> None:
    context.current().after_fork_in_child()
