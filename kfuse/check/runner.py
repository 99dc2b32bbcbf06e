"""Run a case in one mode and record what the host observed, step by step.

Every step gives one event, ``(label, status, payload)``: status ``ok`` with the value the host saw
(None for calls and writes), ``error`` with ``(exception type, message)``, so an exception is an
observation too (eager runs raise at a failing call; fused runs raise later, at a read). The end
of a run adds a ``flush`` event (turning tracing off runs what is pending), then the final value of
every result and array. :mod:`kfuse.check.oracle` compares the events of two runs.
"""
from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass

import numpy as np

import kfuse as pk

from .. import config, views
from . import arrays as fixture
from .faults import failing_compiles
from .host import READS, USES, WRITES
from .kernels import KERNELS
from .generate import FAILING_KERNELS
from .program import HUGE_TEAM, Call, Case, Export, Fence, Read, Realloc, UseResult, Write, validate

OK, ERROR = "ok", "error"
THREAD_TIMEOUT_S = 300.0  # a thread still running after this is reported as a hang


class Unavailable(Exception):
    """A step needs a value an earlier step of this run failed to make; the message is that step's index."""


@dataclass(frozen=True)
class Mode:
    """``profit``, ``trials``: KFUSE_PROFIT and KFUSE_PROFIT_TRIALS for the run (None: as the environment says).
    ``known_contents``: memory whose contents kfuse knows exists during the run, as in a GPU program (new arrays
    filled on the device, ``views.constant``), so the paths that drop that knowledge run on the host too.
    ``host_elements``: KFUSE_HOST_ELEMENTS (None: as the environment says); eager runs every array operation
    through its kernel, so the other modes' small operations done by NumPy (kfuse/ops/on_host.py) are checked
    against the kernels bit for bit. ``align``: KFUSE_ALIGN_VIEWS (None: as the environment says); "all" fuses
    different Views of one memory lined up thread by thread, on the host too (off by default)."""

    name: str
    trace: bool = False
    fuse: bool = False
    max_trace: int | None = None
    profit: str | None = None
    trials: int | None = None
    known_contents: bool = False
    host_elements: int | None = None
    align: str | None = None
    captured: int = 0  # > 0: each program is this many runs of one program in a row, and each sequence of two or
    # more calls with constant scalars within a run is one ``pk.capture``d function


EAGER = Mode("eager", host_elements=0)
TRACED = Mode("traced", trace=True)
FUSED = Mode("fused, KFUSE_ALIGN_VIEWS=all", trace=True, fuse=True, profit="off",
             align="all")  # every group the fuser forms runs fused
# A case whose steps repeat: occurrence 1 of a group runs fused, occurrence 2 apart, then the faster way (the
# worker's runtime keeps decisions from case to case, so later cases also run decided groups).
TWICE = Mode("fused, each program twice in a row, KFUSE_PROFIT=measure, contents known", trace=True, fuse=True,
             profit="measure", trials=1, known_contents=True)
# A case run four times in a row with its runs of calls captured: later runs replay them (kfuse/capturing.py).
CAPTURED = Mode("fused, each program four times in a row, its sequences of calls captured, KFUSE_ALIGN_VIEWS=all",
                trace=True, fuse=True, profit="off", captured=4, align="all")


def modes_for(case: Case) -> list:
    """The modes a case is compared in against eager (a small KFUSE_MAX_TRACE with the environment's
    KFUSE_PROFIT: measure unless set)."""
    modes = [TRACED, FUSED]
    if case.max_trace is not None:
        modes.append(Mode(f"fused, KFUSE_MAX_TRACE={case.max_trace}", True, True, case.max_trace))
    return modes


@dataclass
class Run:
    """The events of one case in one mode: per thread, its steps then its finals; ``flush`` in between."""

    case: Case
    mode: Mode
    steps: list  # per thread: list of events, one per step
    flush: tuple
    finals: list  # per thread: events for every result, then every array


# --- one step ---------------------------------------------------------------------------------------
def _launch(op: str, policy, workunit, kwargs):
    return workunit(**kwargs) if policy == "ops" else _DISPATCH[op](policy, workunit, **kwargs)


_DISPATCH = {"for": pk.parallel_for, "reduce": pk.parallel_reduce, "scan": pk.parallel_scan}
#: The file:line of every kernel call a program makes: a DeferredError must name it.
LAUNCH_SITE = f"{__file__}:{_launch.__code__.co_firstlineno + 1}"


class _State:
    def __init__(self):
        self.arrays = fixture.make_arrays()
        self.results: list = []  # value/Future per result ordinal, or an Unavailable naming its step
        self.producers: dict = {}  # alias name -> index of the Export that made it
        self.blocks: dict = {}  # a run of calls -> its captured function (``Mode.captured``)


def _value(state: _State, ref):
    found = state.results[ref[1]]
    if isinstance(found, Unavailable):
        raise found
    return found


def _array(state: _State, name: str):
    found = state.arrays[name]
    if found is None:
        raise Unavailable(str(state.producers[name]))
    return found


def _policy(kernel, step: Call, n: int):
    if kernel.policy == "team":
        policy = pk.TeamPolicy(n, pk.AUTO if step.team == -1 else step.team)
        return policy.set_scratch_size(0, pk.PerTeam(kernel.scratch)) if kernel.scratch else policy
    if kernel.policy == "debug":
        return pk.RangePolicy(pk.Debug, 0, n)
    if kernel.policy == "ops":
        return "ops"
    return n


def _launch_step(step: Call, views: list, alpha):
    kernel = KERNELS[step.kernel]
    kwargs = dict(zip(kernel.params, views))
    if kernel.scalar:
        kwargs[kernel.scalar] = alpha
    workunit = kernel.workunit
    if kernel.method:  # a functor: its fields are the arguments
        workunit, kwargs = getattr(workunit(**kwargs), kernel.method), {}
    return _launch(kernel.op, _policy(kernel, step, min(v.shape[0] for v in views)), workunit, kwargs)


def _call(state: _State, index: int, step: Call) -> None:
    produces = KERNELS[step.kernel].op != "for"
    try:
        views = [_array(state, name) for name in step.arrays]
        result = _launch_step(step, views, _value(state, step.alpha) if isinstance(step.alpha, tuple) else step.alpha)
    except Unavailable as exc:
        if produces:
            state.results.append(exc)
        raise
    except Exception:
        if produces:
            state.results.append(Unavailable(str(index)))
        raise
    if produces:
        state.results.append(result)


def _step(state: _State, index: int, step):
    if isinstance(step, Call):
        return _call(state, index, step)
    if isinstance(step, Read):
        return READS[step.how](_array(state, step.name))
    if isinstance(step, Write):
        return WRITES[step.how](_array(state, step.name), step.value, step.at)
    if isinstance(step, UseResult):
        return USES[step.how](_value(state, ("r", step.k)))
    if isinstance(step, Realloc):
        state.arrays[step.name] = fixture.fresh(step.name)
        return None
    if isinstance(step, Fence):
        return pk.fence()
    if isinstance(step, Export):
        alias = "@" + step.name
        state.producers[alias] = index
        state.arrays[alias] = None  # unavailable if the export raises
        state.arrays[alias] = np.asarray(state.arrays[step.name])
        return None
    raise TypeError(f"unknown step {step!r}")


def _error(exc: Exception) -> tuple:
    kind = "DeferredError" if isinstance(exc, pk.DeferredError) else type(exc).__name__  # its subclasses too
    return (kind, str(exc))


def _event(label, action) -> tuple:
    try:
        return (label, OK, action())
    except Exception as exc:  # an exception is an observation: the oracle decides if it was allowed
        return (label, ERROR, _error(exc))


def _run_steps(state: _State, steps: tuple, captured: int = 0) -> list:
    events: list = []
    i, period = 0, len(steps) // captured if captured else 0
    scratch = captured and not any(_may_fail(step) for step in steps)
    while i < len(steps):
        end, stop = i, (i // period + 1) * period if period else 0
        while end < stop and type(steps[end]) is Call and not isinstance(steps[end].alpha, tuple):
            end += 1
        if end - i > 1 and all(state.arrays[n] is not None for s in steps[i:end] for n in s.arrays):
            events += _run_block(state, i, steps[i:end], scratch)
            i = end
            continue
        events.append(_event((i, type(steps[i]).__name__), lambda i=i: _step(state, i, steps[i])))
        i += 1
    return events


def _may_fail(step) -> bool:
    """Whether a step is a call that may fail (its data then lost: a scratch copy would lose more, see ``_block``):
    a failing kernel, a flag kernel given a flag that divides by zero, a team size no space allows."""
    return type(step) is Call and (step.kernel in FAILING_KERNELS or step.team == HUGE_TEAM or
                                   KERNELS[step.kernel].scalar == "flag" and step.alpha != -1)


def _block(calls: tuple, scratch: bool):
    """A captured function making ``calls`` on the arrays it is given by name: per call, its status, its error and
    what it returned. It keeps no state of its own, so a replay gives what running it would. ``scratch`` (a program
    with no call that may fail): the calls work on new copies (``pk.empty``, copied in, copied back at the end) of
    the Views they take that share no memory with another name the block uses -- new memory made inside a captured
    function, which each replay makes anew or reuses (kfuse/capturing.py), and the same values as the Views' own."""
    def run(**arrays):
        copies = {}
        if scratch:
            for name, view in arrays.items():
                group = fixture.GROUPS.get(name, name)
                if type(view) is pk.View and not any(fixture.GROUPS.get(other, other) == group
                                                     for other in arrays if other != name):
                    copies[name] = pk.empty(view.shape, view.dtype)
                    pk.copyto(copies[name], view)
        used = {**arrays, **copies}
        out = []
        for step in calls:
            try:
                out.append((OK, None, _launch_step(step, [used[n] for n in step.arrays], step.alpha)))
            except Exception as exc:
                out.append((ERROR, _error(exc), None))
        for name, copy in copies.items():
            pk.copyto(arrays[name], copy)
        return tuple(out)
    return pk.capture(run)


def _run_block(state: _State, start: int, calls: tuple, scratch: bool = False) -> list:
    """Run ``calls`` (steps ``start`` on) as one captured function, one event per call, as ``_call`` would."""
    captured = state.blocks.get((calls, scratch))
    if captured is None:
        captured = state.blocks[calls, scratch] = _block(calls, scratch)
    names = sorted({n for step in calls for n in step.arrays})
    events = []
    for k, (step, (status, error, result)) in enumerate(zip(calls, captured(**{n: state.arrays[n] for n in names}))):
        if KERNELS[step.kernel].op != "for":
            state.results.append(result if status == OK else Unavailable(str(start + k)))
        events.append(((start + k, "Call"), status, error))
    return events


def _scalar(found):
    if isinstance(found, Unavailable):
        raise found
    return found + 0  # a Future's number, or the number itself


def _finals(state: _State) -> list:
    events = [_event(("result", k), lambda found=found: _scalar(found)) for k, found in enumerate(state.results)]
    names = list(fixture.HOST_NAMES) + sorted(n for n in state.arrays if n.startswith("@"))
    events += [_event(("final", name), lambda name=name: np.asarray(_array(state, name)).copy()) for name in names]
    return events


# --- a whole run -------------------------------------------------------------------------------------
def _in_threads(states: list, programs: tuple, mode: Mode) -> list:
    """Each program in its own thread, all started together."""
    start = threading.Barrier(len(programs))
    events: list = [None] * len(programs)

    def work(t):
        start.wait()
        events[t] = _run_steps(states[t], programs[t], mode.captured)

    threads = [threading.Thread(target=work, args=(t,), daemon=True) for t in range(len(programs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(THREAD_TIMEOUT_S)
        if thread.is_alive():
            raise TimeoutError(f"a program thread still runs after {THREAD_TIMEOUT_S:.0f} s (hang)")
    return events


@contextlib.contextmanager
def _contents_known(known: bool):
    """A live array of known contents for the duration (``Mode.known_contents``)."""
    kept = np.zeros(8)
    if known:
        views.mark_constant(kept)
    try:
        yield
    finally:
        views.take_constant(kept)


def run(case: Case, mode: Mode = EAGER) -> Run:
    """Run ``case`` in ``mode`` (eager runs a multi-thread case's programs one after the other)."""
    for steps in case.threads:
        validate(steps)
    if pk.fusion_enabled():
        raise RuntimeError("kfuse.check runs need tracing off at the start (is KFUSE_FUSION=1 set?)")
    with failing_compiles(), config.overridden(config.MAX_TRACE, mode.max_trace), \
            config.overridden(config.PROFIT, mode.profit), config.overridden(config.PROFIT_TRIALS, mode.trials), \
            config.overridden(config.HOST_ELEMENTS, mode.host_elements), _contents_known(mode.known_contents), \
            config.overridden(config.ALIGN_VIEWS, mode.align):
        states = [_State() for _ in case.threads]
        if mode.trace:
            pk.enable_fusion(trace_only=not mode.fuse)
            if not pk.fusion_enabled():
                raise RuntimeError("tracing did not turn on (is KFUSE_FUSION=0 set?)")
        try:
            if mode.trace and len(case.threads) > 1:
                steps = _in_threads(states, case.threads, mode)
            else:
                steps = [_run_steps(state, program, mode.captured) for state, program in zip(states, case.threads)]
        finally:
            flush = _event(("flush",), pk.disable_fusion if mode.trace else pk.fence)
        return Run(case, mode, steps, flush, [_finals(state) for state in states])
