"""``pk.capture(fn)``: a function of kernel calls whose later calls launch what its settled flush launched, without
running its Python.

A repeated flush is rerun without tracing (kfuse/rerun.py), but each of its calls still costs the program's own
Python and a comparison with the kept call: 2-6 us a call, which for NSTREAM's 50 calls a run on a GPU is more host
time than their one fused kernel takes. ``torch.compile`` and ``jax.jit`` remove that cost by running a function's
Python once and replaying what it made; ``capture`` does the same for kernel calls, and as they do, compiles up front:
the fusion of its flush's groups does not wait until their compile is repaid (fuser/cost.py; capturing a function
says it repeats), though each group is still timed fused and apart (KFUSE_PROFIT=measure), so a replay is never slower
than running the group's calls apart. It keeps the same contract as they do: **the
function's kernel calls depend only on its arguments** -- the Views it is given (by identity) and its scalar
arguments (by value) -- not on globals that change, data it reads on the host or the time. Its Python runs until its
calls make a kept flush of their own whose groups are decided (fused or apart, fuser/profit.py), or a flush of one
kernel call (its array operations make one, say); from then on a call with the same arguments launches that flush's
kernels at once (its kept launches, whether its timing against running untraced is still open or chose untraced:
that weighs comparing each call, which a replay does not do), with no Python of the function run. While its Python
runs, every call it makes goes to the trace (none runs untraced, by its streak or a kept flush's repetition,
kfuse/untraced.py) and its array operations are logged as kernel calls (when it returns, or when a group of them
closes: none runs at once). What is checked, so that a replay is what running the function would compute:

- its calls run as one flush, which launches every kernel the call launched: earlier pending calls run first, the
  function's own run when it returns (a call that runs at once, on memory the host holds, say, leaves no such
  flush: the next call runs as Python again);
- its array operations (``pk.add``, ``pk.sum``...) run as kernels of its flush (recorded, then logged as kernel calls
  when it returns), the small ones too (NumPy computes those on the host at once otherwise, ``KFUSE_HOST_ELEMENTS``:
  no kernel a replay could repeat);
- it touches no data on the host (a View's elements, a copy between Views, a Future's value: its Python could act
  on what it reads, and a replay would skip what it writes); one that does is never replayed;
- every View its calls take lies in the memory of a View argument, or in new memory the function made with no
  contents (array operations' results, ``pk.empty``): a replay makes that memory anew, as running the function
  would, laid out as before (its Views overlap one another as the recorded ones did, so the kept kernels' analysis
  holds), and nothing is copied into it (the kernels write what they read, or the program read undefined values
  both ways); memory made with contents (``pk.zeros``, ``pk.array`` inside it) is never replayed, since a replay
  would not fill it;
- its result is None, a constant, one of its arguments, a View in new memory it made (the replay's new View), a
  Future of one of its reductions, or a tuple or list of those;
- at a replay, the kept flush is still decided, made under the settings in force, in the same execution space,
  with each View argument's memory unchanged (``View.resize``), nothing failed and the process did not fork; else
  the function runs again as Python.

With fusion off (or tracing only) the function just runs. A captured call's failing kernel is reported as a
repeated flush's is: raised at once when it is one call, else where its results are read.
"""
from __future__ import annotations

import functools
import threading
from math import copysign, prod

import numpy as np

from . import context, guard, views
from .calls import KernelCall, runs_off_gpu
from .future import Future, done
from .ops._common import new_view
from .pipeline import execute
from .views import View

_PLANS = 8  # argument sets kept per function (each holds its Views)
_CONSTANTS = (bool, int, float, str, type(None))
_UNPLACED = object()  # ``_shape`` of a Future of no call of the flush (one run at once: the next call may place it)
#: the most bytes of new result memory a plan makes ahead for its next replay (``_Made.make_ahead``): that saves a
#: replay ~15 us of host time before its first launch, which only counts where kernels are short, so small results
_AHEAD_BYTES = 1 << 24


class _Plan:
    """What a call with one set of arguments replays: the kept flush and the Views in its slots (the flush's template
    may meet other Views later: kfuse/rerun.py), or the one kernel call its flush ran (a flush of one call is kept as
    no template: nothing in it to fuse), and how to rebuild the function's result."""

    __slots__ = ("template", "views", "call", "space", "result", "pinned", "pointers", "made")

    def __init__(self, template, call, space, result, pinned: tuple, made: "_Made | None" = None):
        self.template, self.call, self.space, self.result, self.made = template, call, space, result, made
        self.views = list(template.views if template is not None else call.args)  # per slot (a call's: per argument)
        for slot in made.slots if made is not None else ():
            if slot is not None:
                self.views[slot] = None  # (each replay makes its own: the recorded memory is not held)
        self.pinned = pinned  # the View arguments the key names by id (alive while the plan is)
        self.pointers = [v.ptr for v in pinned]  # theirs then: a View made from one inside the function (a slice)
        # keeps its memory, so an argument given new memory (``View.resize``) means running the Python again

    def replay(self, rt) -> tuple | None:
        """(the Futures of a replay, per call of the flush; the Views made anew for it), or None where the plan no
        longer holds (nothing ran)."""
        if rt.failures or [v.ptr for v in self.pinned] != self.pointers:
            return None
        call = self.call
        if call is not None:
            if rt.default_space is not self.space or guard.forked_after_start:
                return None
        elif not rt.rerun.settled(rt, self.template):
            return None
        filled, made = self.views, ()
        if self.made is not None:
            made, filled = self.made.make(), list(filled)
            for slot, view in zip(self.made.slots, made):
                if slot is not None:
                    filled[slot] = view
        if call is not None:
            if made:
                call = KernelCall(call.prepared, call.policy, tuple(filled), site=call.site)
            return [_launch(rt, call)], made
        return rt.rerun.replay(rt, self.template, filled, laid_out=bool(made)), made


class _Made:
    """The memory a function makes itself and a replay makes anew: new allocations of undefined contents (array
    operations' results, ``pk.empty``: nothing is copied into them, the replayed kernels write what is read), and the
    Views over them at their places -- those the flush's kept launches take, and those the result returns. Views the
    function made that no launch takes (array operations' results never stored) keep their recorded ones. An
    allocation no returned View lies in is made at the first replay only and serves every later one: only kfuse's
    launches ever see it (the recorded run's memory, which the function's Python could have kept, is not reused).
    The allocations of returned Views are made after each replay for the next one (``make_ahead``), when small. A
    View that was several of them (returned and taken by a launch, or returned twice) is one View at a replay too."""

    __slots__ = ("roots", "slots", "places", "same", "returned", "kept", "renewed", "ahead", "small")

    def __init__(self, roots: list, slots: list, places: list, same: list):
        self.roots = roots  # per allocation: (shape, NumPy dtype)
        self.slots = slots  # per View: its template slot, or None (returned only)
        self.places = places  # per View: (its allocation, byte offset, shape, byte strides, whether the whole of it)
        self.same = same  # per View: the earlier one it is (the same View object when recorded), or None
        self.returned = [False] * len(roots)  # per allocation: whether a returned View lies in it (new at each replay)
        for slot, (k, *_) in zip(slots, places):
            self.returned[k] = self.returned[k] or slot is None
        self.renewed = [n for n, (k, *_) in enumerate(places) if self.returned[k]]  # Views new at each replay
        self.kept = None  # the first replay's Views in allocations of no returned View (None at the others)
        self.ahead = None  # the next replay's Views in allocations of returned Views, made after the last replay
        self.small = sum(prod(shape) * dtype.itemsize
                         for (shape, dtype), new in zip(roots, self.returned) if new) <= _AHEAD_BYTES

    @classmethod
    def of(cls, wanted: list) -> "_Made | None":
        """From ``wanted``, (slot or None, View) pairs of Views made over undefined memory; None where one's
        memory is not an allocation a replay can make again (a C-contiguous array of its own)."""
        roots, allocation, slots, places, same, first = [], {}, [], [], [], {}
        for slot, view in wanted:
            earlier = first.setdefault(id(view), len(same))
            same.append(None if earlier == len(same) else earlier)
            owner = views.memory_owner(view._array)
            if not owner.flags.c_contiguous:
                return None
            if id(owner) not in allocation:  # (the owners are alive: the Views hold them)
                allocation[id(owner)] = len(roots)
                roots.append((owner.shape, owner.dtype))
            offset = view.ptr - owner.__array_interface__["data"][0]
            whole = offset == 0 and view._array.shape == owner.shape and view._array.strides == owner.strides
            slots.append(slot)
            places.append((allocation[id(owner)], offset, view._array.shape, view._array.strides, whole))
        made = cls(roots, slots, places, same)
        news = made.make()
        alike = all((a.sig, a.shape, a.strides, a.trait) == (b.sig, b.shape, b.strides, b.trait)
                    for (_, a), b in zip(wanted, news))
        return made if alike else None

    def make(self) -> list:
        """The Views of a replay at the recorded places: in new allocations, or the first replay's (see above)."""
        if self.kept is None:
            made = self._views([new_view(shape, dtype) for shape, dtype in self.roots], range(len(self.places)))
            self.kept = [None if self.returned[k] else view for view, (k, *_) in zip(made, self.places)]
            return made
        renewed, self.ahead = self.ahead or self._renewed(), None
        made = list(self.kept)
        for n, view in zip(self.renewed, renewed):
            made[n] = view
        return made

    def make_ahead(self) -> None:
        """After a replay: the next one's new memory, so that it need not be made before that replay's first launch
        (on a GPU, the host work before it is all the device waits for; what follows overlaps the kernels). Memory
        only kfuse holds, of undefined contents until that replay's kernels write it, as memory made then would be."""
        if self.small and self.kept is not None and self.ahead is None:
            self.ahead = self._renewed()

    def _renewed(self) -> list:
        """New allocations for the returned Views, and the Views at their places in them."""
        roots = [new_view(shape, dtype) if new else None for (shape, dtype), new in zip(self.roots, self.returned)]
        return self._views(roots, self.renewed)

    def _views(self, roots: list, numbers) -> list:
        """The Views at places ``numbers`` in ``roots``' memory (an allocation's first whole View is its root's)."""
        made, used, at = [], set(), {}
        for n in numbers:
            same = self.same[n]
            if same is not None:
                made.append(at[same])
                continue
            k, offset, shape, strides, whole = self.places[n]
            root = roots[k]
            if whole and k not in used:
                used.add(k)
                view = root
            else:
                array = root._array
                part = array.view() if whole else np.ndarray(shape, array.dtype, buffer=array, offset=offset,
                                                             strides=strides)
                view = View._part(part, root, root.ptr + offset)
            at[n] = view
            made.append(view)
        return made


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
                replayed = plan.replay(rt)
                if replayed is not None:
                    if rt.logged.entries:  # its calls became trace entries (Rerun.run: a compile repaid, Views
                        rt.flush_all()  # that overlap): they run as made, and the next call records again
                        del self.plans[key]
                    result = _rebuild(plan.result, args, kwargs, *replayed)
                    if plan.made is not None and key in self.plans:
                        plan.made.make_ahead()
                    return result
                del self.plans[key]
            return self._record(rt, key, args, kwargs)

    def _record(self, rt, key: tuple, args: tuple, kwargs: dict):
        """Run the function as Python, its calls as one flush, and keep a plan once that flush is settled."""
        rt.flush_all()
        rerun = rt.rerun
        rerun.last = None
        counts = rt.counts
        first, accesses, reads = rt.calls_made, rt.host_accesses, Future.reads
        launched = counts["kernels_launched"]
        watched, Future.watched = Future.watched, threading.get_ident()
        capturing, rt.capturing = rt.capturing, True  # (no call runs untraced by its streak: the flush needs them all)
        fresh: dict = {}
        outer = views.recording_undefined(fresh)
        try:
            result = self.fn(*args, **kwargs)
            if rt.batch is not None:
                rt.run_batch()  # its array operations as kernel calls of its flush (a flush would run them at once)
        finally:
            Future.watched, rt.capturing = watched, capturing
            views.recording_undefined(outer)
            if outer is not None:  # (a captured function recorded inside another: its memory is the outer's too)
                outer.update(fresh)
        made = rt.calls_made - first
        if rt.host_accesses != accesses or Future.reads != reads:
            self.why_not = "it touches data on the host (a View's elements, a copy, a Future's value), which its " \
                           "Python could act on"
        pending = [e.call for e in rt.logged.entries]  # its calls in the order the flush takes them (a batch of
        # array operations is logged when a call or the return needs it: after calls the program made later)
        returned: list = []
        shape = _shape(result, args, kwargs, {id(call): k for k, call in enumerate(pending)}, rerun.futures, fresh,
                       returned)
        alone = pending[0] if made == 1 and len(pending) == 1 and not rerun.matched else None
        rt.compiling_up_front = True
        try:
            rt.flush_all()
        finally:
            rt.compiling_up_front = False
        if shape is _UNPLACED:
            return result
        if shape is None and self.why_not is None:
            self.why_not = f"its result ({type(result).__name__}) is not None, a constant, an argument, a View it " \
                           "made of undefined contents or a Future of its reductions"
        if self.why_not is not None or rt.failures:
            return result
        launches, template = counts["kernels_launched"] - launched, rerun.last
        if alone is not None and launches == 1 and alone.failure is None and not alone.futures:
            template, slots, taken = None, list(alone.args), {i for i, _ in alone.prepared.view_params}
        elif template is not None and len(template.steps) == made and launches == rerun.last_launches \
                and rerun.settled(rt, template):
            alone, slots, taken = None, template.views, {slot for launch in template.launches for _, slot in launch[3]}
        else:
            return result  # (not yet one kept, decided flush of its calls alone, and all they launched: the next
            #             call records again)
        used = [v for v in slots if isinstance(v, View)]  # (a call's View arguments, NumPy ones too)
        if not _within([v for v in used if not views.in_undefined(v, fresh)], args, kwargs):
            self.why_not = "its calls take memory that is neither a View argument's nor new memory it made without " \
                           "contents (pk.zeros, pk.array inside it: a replay would not fill it)"
            return result
        remade = None
        if returned or any(views.in_undefined(v, fresh) for v in used):
            remade = _Made.of(_remade(slots, taken, fresh, returned))
            if remade is None:
                self.why_not = "it makes memory a replay cannot make again (not a C-contiguous allocation of its own)"
                return result
        if len(self.plans) >= _PLANS:
            del self.plans[next(iter(self.plans))]
        self.plans[key] = _Plan(template, alone, rt.default_space, shape,
                                tuple(a for a in (*args, *kwargs.values()) if type(a) is View), remade)
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


def _shape(result, args: tuple, kwargs: dict, place: dict, matched: list, fresh: dict, returned: list):
    """How to rebuild ``result`` at a replay (see ``_rebuild``), None where it never can be, ``_UNPLACED`` where this
    run cannot tell. A Future is named by its call's place among the flush's calls: ``place`` (id of a pending
    call -> its place), or ``matched`` (the Future of each call a rerun matched, or run untraced); a View in memory
    the function made of undefined contents (``fresh``: views.recording_undefined) by its place in ``returned``."""
    if type(result) in _CONSTANTS:
        return ("constant", result)
    if type(result) in (tuple, list):  # (a subclass, a namedtuple say, is not rebuilt from its items)
        parts = [_shape(part, args, kwargs, place, matched, fresh, returned) for part in result]
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
    if type(result) is View and views.in_undefined(result, fresh):
        returned.append(result)
        return ("made", len(returned) - 1)
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
    value = execute(call, queued=True)  # (as a replayed flush's kept launches are)
    return None if call.op == "for" else done(prepared.spec.accs[0], value)


def _rebuild(shape, args: tuple, kwargs: dict, futures: list, made):
    kind, what = shape
    if kind == "constant":
        return what
    if kind == "arg":
        return args[what]
    if kind == "kwarg":
        return kwargs[what]
    if kind == "future":
        return futures[what]
    if kind == "made":
        return made[what]
    return kind(_rebuild(part, args, kwargs, futures, made) for part in what)


def _remade(slots: list, taken: set, fresh: dict, returned: list) -> list:
    """(slot or None, View) of the Views a replay makes anew: those the result returns (first, in order: ``_rebuild``
    names them by place), then each slot's View in memory the function made that a kept launch takes (``taken``)
    or that shares that memory with one of those (so their overlaps stay as they were)."""
    wanted = [(None, v) for v in returned] + [(slot, slots[slot]) for slot in sorted(taken)]
    owners = {id(views.memory_owner(v._array)) for _, v in wanted}
    return [(None, v) for v in returned] + [
        (slot, v) for slot, v in enumerate(slots)
        if type(v) is View and views.in_undefined(v, fresh) and id(views.memory_owner(v._array)) in owners]


def _within(used: list, args: tuple, kwargs: dict) -> bool:
    """Whether every View in ``used`` lies in the bytes of a View among the arguments."""
    spans = [a.bounds for a in (*args, *kwargs.values()) if type(a) is View]
    return all(any(lo <= v.bounds[0] and v.bounds[1] <= hi for lo, hi in spans) for v in used)
