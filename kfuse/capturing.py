"""``pk.capture(fn)``: a function of kernel calls whose later calls launch what its settled flush launched, without
running its Python.

A repeated flush is rerun without tracing (kfuse/rerun.py), but each of its calls still costs the program's own
Python and a comparison with the kept call: 2-6 us a call, which for NSTREAM's 50 calls a run on a GPU is more host
time than their one fused kernel takes. ``torch.compile`` and ``jax.jit`` remove that cost by running a function's
Python once and replaying what it made; ``capture`` does the same for kernel calls, under the same contract: **the
function's kernel calls depend only on its arguments** -- the Views it is given (by identity) and its scalar
arguments (by value) -- not on globals that change, data it reads on the host or the time. Its Python runs until its
calls make a kept flush of their own whose way of running is decided (rerun fused or untraced, fuser/profit.py), or
a flush of one kernel call (its array operations make one, say); from then on a call with the same arguments
launches that flush's kernels at once (its kept launches, even where its trial decided it untraced: that decision
weighed comparing each call, which a replay does not do), with no Python of the function run. While its Python runs,
every call it makes goes to the trace (none runs untraced by its streak, kfuse/untraced.py) and its array operations
are logged as kernel calls when it returns. What is checked, so that a replay is what running the function would
compute:

- its calls run as one flush, which launches every kernel the call launched: earlier pending calls run first, the
  function's own run when it returns (a call that runs at once, on memory the host holds, say, leaves no such
  flush: the next call runs as Python again);
- its array operations (``pk.add``, ``pk.sum``...) run as kernels of its flush (recorded, then logged as kernel calls
  when it returns), none small enough for NumPy (``KFUSE_HOST_ELEMENTS``: no kernel to repeat);
- it touches no data on the host (a View's elements, a copy between Views, a Future's value: its Python could act
  on what it reads, and a replay would skip what it writes); one that does is never replayed;
- every View its calls take lies in the memory of a View argument: memory the function makes itself (``pk.zeros``
  inside it) is new each time it runs, which a replay cannot make, so such a function is never replayed;
- its result is None, a constant, one of its arguments, a Future of one of its reductions, or a tuple or list of
  those;
- at a replay, the kept flush is still decided, made under the settings in force, in the same execution space,
  with each View argument's memory unchanged (``View.resize``), nothing failed and the process did not fork; else
  the function runs again as Python.

With fusion off (or tracing only) the function just runs. A captured call's failing kernel is reported as a
repeated flush's is: raised at once when it is one call, else where its results are read.
"""
from __future__ import annotations

import functools
import threading
from math import copysign

from . import context, guard, views
from .calls import runs_off_gpu
from .future import Future, done
from .pipeline import execute
from .views import View

_PLANS = 8  # argument sets kept per function (each holds its Views)
_CONSTANTS = (bool, int, float, str, type(None))
_UNPLACED = object()  # ``_shape`` of a Future of no call of the flush (one run at once: the next call may place it)


class _Plan:
    """What a call with one set of arguments replays: the kept flush and the Views in its slots (the flush's template
    may meet other Views later: kfuse/rerun.py), or the one kernel call its flush ran (a flush of one call is kept as
    no template: nothing in it to fuse), and how to rebuild the function's result."""

    __slots__ = ("template", "views", "call", "space", "result", "pinned", "pointers")

    def __init__(self, template, call, space, result, pinned: tuple):
        self.template, self.call, self.space, self.result = template, call, space, result
        self.views = list(template.views) if template is not None else None
        self.pinned = pinned  # the View arguments the key names by id (alive while the plan is)
        self.pointers = [v.ptr for v in pinned]  # theirs then: a View made from one inside the function (a slice)
        # keeps its memory, so an argument given new memory (``View.resize``) means running the Python again

    def replay(self, rt) -> list | None:
        """The Futures of a replay (per call of the flush), or None where the plan no longer holds (nothing ran)."""
        if rt.failures or any(v.ptr != p for v, p in zip(self.pinned, self.pointers)):
            return None
        if self.call is not None:
            return [_launch(rt, self.call)] if rt.default_space is self.space and not guard.forked_after_start \
                else None
        return rt.rerun.replay(rt, self.template, self.views) if rt.rerun.settled(rt, self.template) else None


class Captured:
    """The function returned by ``pk.capture``. ``why_not``: why it is never replayed, once that is known."""

    def __init__(self, fn):
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.plans: dict = {}  # argument key -> _Plan
        self.why_not: str | None = None

    def __get__(self, instance, owner=None):
        """A method: bound to its instance, which is then an argument like any other (an object, so its calls run
        as Python: its fields are not arguments a key could compare)."""
        return self if instance is None else functools.partial(self, instance)

    def __call__(self, *args, **kwargs):
        rt = context.current()
        if not (rt.enabled and rt.fuse) or self.why_not is not None:
            return self.fn(*args, **kwargs)
        key = _key(args, kwargs)
        if key is None:
            return self.fn(*args, **kwargs)
        with guard.lock:
            plan = self.plans.get(key)
            if plan is not None:
                if not rt.idle():
                    rt.flush_all()
                futures = plan.replay(rt)
                if futures is not None:
                    if rt.logged.entries:  # its calls became trace entries (Rerun.run: a compile repaid, Views
                        rt.flush_all()  # that overlap): they run as made, and the next call records again
                        del self.plans[key]
                    return _rebuild(plan.result, args, kwargs, futures)
                del self.plans[key]
            return self._record(rt, key, args, kwargs)

    def _record(self, rt, key: tuple, args: tuple, kwargs: dict):
        """Run the function as Python, its calls as one flush, and keep a plan once that flush is settled."""
        rt.flush_all()
        rerun = rt.rerun
        rerun.last = None
        counts = rt.counts
        first, accesses, reads = rt.calls_made, rt.host_accesses, Future.reads
        launched, on_host = counts["kernels_launched"], counts["array_ops_on_host"]
        watched, Future.watched = Future.watched, threading.get_ident()
        capturing, rt.capturing = rt.capturing, True  # (no call runs untraced by its streak: the flush needs them all)
        try:
            result = self.fn(*args, **kwargs)
            if rt.batch is not None:
                rt.run_batch()  # its array operations as kernel calls of its flush (a flush would run them at once)
        finally:
            Future.watched, rt.capturing = watched, capturing
        made = rt.calls_made - first
        if rt.host_accesses != accesses or Future.reads != reads:
            self.why_not = "it touches data on the host (a View's elements, a copy, a Future's value), which its " \
                           "Python could act on"
        elif counts["array_ops_on_host"] != on_host:
            self.why_not = "it runs array operations small enough for NumPy (KFUSE_HOST_ELEMENTS), which launch no " \
                           "kernel a replay could repeat"
        pending = [e.call for e in rt.logged.entries]  # its calls in the order the flush takes them (a batch of
        # array operations is logged when a call or the return needs it: after calls the program made later)
        shape = _shape(result, args, kwargs, {id(call): k for k, call in enumerate(pending)}, rerun.futures)
        alone = pending[0] if made == 1 and len(pending) == 1 and not rerun.matched else None
        rt.flush_all()
        if shape is _UNPLACED:
            return result
        if shape is None and self.why_not is None:
            self.why_not = f"its result ({type(result).__name__}) is not None, a constant, an argument or a Future " \
                           "of its reductions"
        if self.why_not is not None or rt.failures:
            return result
        launches, template = counts["kernels_launched"] - launched, rerun.last
        if alone is not None and launches == 1 and alone.failure is None and not alone.futures:
            template, used = None, [alone.args[i] for i, _ in alone.prepared.view_params]
        elif template is not None and len(template.steps) == made and launches == rerun.last_launches \
                and rerun.settled(rt, template):
            alone, used = None, template.views
        else:
            return result  # (not yet one kept, decided flush of its calls alone, and all they launched: the next
            #             call records again)
        if not _within(used, args, kwargs):
            self.why_not = "its calls take memory it makes itself (not within a View argument)"
            return result
        if len(self.plans) >= _PLANS:
            del self.plans[next(iter(self.plans))]
        self.plans[key] = _Plan(template, alone, rt.default_space, shape,
                                tuple(a for a in (*args, *kwargs.values()) if type(a) is View))
        return result


def capture(fn):
    """``@pk.capture``: later calls with the same arguments launch the kernels the function's settled flush
    launched, without running its Python (module docstring: the contract and what is checked)."""
    return Captured(fn)


def _key(args: tuple, kwargs: dict) -> tuple | None:
    """The arguments as a plan is looked up: a View by identity, a constant by type and value (-0.0 apart from 0.0);
    None for anything else (a NumPy array, a list: the function then runs as Python)."""
    key = []
    for name, value in (*((None, a) for a in args), *kwargs.items()):
        kind = type(value)
        if kind is View:
            key.append((name, id(value)))
        elif kind in _CONSTANTS:
            key.append((name, kind, value, copysign(1.0, value) if kind is float else 0))
        else:
            return None
    return tuple(key)


def _shape(result, args: tuple, kwargs: dict, place: dict, matched: list):
    """How to rebuild ``result`` at a replay (see ``_rebuild``), None where it never can be, ``_UNPLACED`` where this
    run cannot tell. A Future is named by its call's place among the flush's calls: ``place`` (id of a pending
    call -> its place), or ``matched`` (the Future of each call a rerun matched, or run untraced)."""
    if type(result) in _CONSTANTS:
        return ("constant", result)
    if type(result) in (tuple, list):  # (a subclass, a namedtuple say, is not rebuilt from its items)
        parts = [_shape(part, args, kwargs, place, matched) for part in result]
        for missing in (None, _UNPLACED):
            if any(p is missing for p in parts):
                return missing
        return (type(result), parts)
    for i, arg in enumerate(args):
        if result is arg:
            return ("arg", i)
    for name, arg in kwargs.items():
        if result is arg:
            return ("kwarg", name)
    if type(result) is Future:
        if result.call is not None and id(result.call) in place:
            return ("future", place[id(result.call)])
        for k, future in enumerate(matched):
            if future is result:
                return ("future", k)
        return _UNPLACED
    return None


def _launch(rt, call):
    """Run ``call`` again, as its flush ran it; the Future of its reduction or scan, or None."""
    rt.calls_made += 1
    rt.counts["calls_captured"] += 1
    prepared = call.prepared
    if views.constant and runs_off_gpu(prepared.backend, prepared.spec.space):
        views.touched(call.args)
    prepared.backend.enter_thread()
    value = execute(call)
    return None if call.op == "for" else done(prepared.spec.accs[0], value)


def _rebuild(shape, args: tuple, kwargs: dict, futures: list):
    kind, what = shape
    if kind == "constant":
        return what
    if kind == "arg":
        return args[what]
    if kind == "kwarg":
        return kwargs[what]
    if kind == "future":
        return futures[what]
    return kind(_rebuild(part, args, kwargs, futures) for part in what)


def _within(used: list, args: tuple, kwargs: dict) -> bool:
    """Whether every View in ``used`` lies in the bytes of a View among the arguments."""
    spans = [a.bounds for a in (*args, *kwargs.values()) if type(a) is View]
    return all(any(lo <= v.bounds[0] and v.bounds[1] <= hi for lo, hi in spans) for v in used)
