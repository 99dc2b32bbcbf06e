"""Element-wise operations recorded with fusion on, and run as few kernels when anything else happens.

Tracing each array operation as a kernel call costs it a binding, a trace entry and its share of the fuser's
analysis: tens of microseconds, where NumPy takes one. With fusion on, an element-wise operation on plain
contiguous Views is recorded here instead (a ``Step``: its workunit, its result View and its operands) and
returns its result at once. Before the runtime does anything else (logs a kernel call, lets the host touch a
View, resolves a Future, flushes) it runs the ``Batch``: consecutive steps over one size become one kernel
(kfuse/ops/expressions.py) logged as one call, which the tracer then fuses with its neighbours as usual.

Which results are stored is decided then, by reference counts as in kfuse/tracer/liveness.py: a result
nothing but the batch refers to (the program dropped it: ``pk.log(pk.multiply(v, 2))``'s inner array) stays a
local of the kernel and its memory is never written; any other reference (a name, a container, another View
or array over its memory, a later call's arguments) keeps the store. A result nobody reads is not computed.

Steps join one kernel only where thread ``i`` of it may run them all in order: every pair of accesses to
overlapping memory is to the same bytes as the same dtype (element ``i`` is element ``i`` for both), so
shifted Views of one array (stencils) split; memory then orders the kernels, as the trace does.
"""
from __future__ import annotations

import time
from collections import Counter

from .. import buffers, context, counters, escape, guard, refcount
from ..fuser import explain
from ..tracer.failures import is_fault
from ..dispatch import parallel_for, parallel_reduce, run_now
from ..future import Future
from ..types import DType
from ..views import View
from . import _common, expressions  # _common imports this module: its names are read at call time

_MAX_STEPS = 256  # recorded steps that run without waiting for anything else
_INT64 = (-2 ** 63, 2 ** 63 - 1)  # a larger Python int is refused by the kernel call: at the operation, not later


class Step:
    """One recorded operation; a whole-array reduction has no target and delivers ``future`` instead."""

    __slots__ = ("wu", "target", "operands", "fresh", "future")

    def __init__(self, wu, target: View | None, operands: tuple, fresh: bool = False, future: Future | None = None):
        self.wu, self.target, self.operands, self.fresh, self.future = wu, target, operands, fresh, future


class Batch:
    """The steps recorded since the runtime last ran anything (the runtime calls ``run`` first, kfuse/engine.py)."""

    def __init__(self):
        self.steps: list = []

    def run(self, now: bool = False) -> None:
        """Log the steps as kernel calls; ``now``: run them at once (the caller knows nothing else is pending)."""
        start = time.perf_counter()
        steps, self.steps = self.steps, []
        stored, groups = _stored(steps), _groups(steps)
        _read_later(steps, groups, stored)
        unstored = {group[0]: sum(1 for k in group if stored[k] is not True) for group in groups}
        counters.bump("unstored_arrays", sum(unstored.values()))
        seconds = time.perf_counter() - start
        mode = _Mode(now)
        for group in groups:
            _launch([steps[k] for k in group], [stored[k] for k in group], mode)
        if mode.now:  # (else the pipeline counts and records the flushes)
            counters.bump("flushes")
            explain.record_operations(context.current(), [step.wu.__name__ for step in steps], groups,
                                      {k: n for k, n in unstored.items() if n}, seconds)


class _Mode:
    """Whether a batch's kernels still run at once. One that cannot (an argument or build error before it
    launched: never a fault, after which running it again could apply it twice) and every later one go through
    the trace, which runs them in order and reports the failure where its results are read."""

    def __init__(self, now: bool):
        self.now = now


def _append(rt, batch: Batch, step: Step) -> None:
    """Record ``step`` (the caller holds ``guard.lock``); a long batch runs without waiting."""
    batch.steps.append(step)
    rt.counts["array_ops_recorded"] += 1
    if len(batch.steps) >= _MAX_STEPS:
        rt.run_batch()


def run(wu, target: View, operands: tuple, fresh: bool) -> View:
    """``target[i] = wu(operands...)`` for every element (operands per workunit parameter after ``out``: plain
    contiguous Views of ``target``'s size, or kernel scalars); ``fresh``: ``target`` is new memory no NumPy array
    reaches. Recorded with fusion on, else run as one kernel call."""
    rt = context.current()
    if rt.enabled and rt.fuse and not (escape.live() and _escaped(target, operands, fresh)) \
            and _int64_scalars(operands):
        with guard.lock:
            batch = rt.batch
            if batch is None:
                batch = rt.batch = Batch()
            _append(rt, batch, Step(wu, target, operands, fresh))
        return target
    _call_one(Step(wu, target, operands), _Mode(False))
    return target


def reduce(wu, view: View, scalars: tuple, dtype: DType) -> Future | None:
    """The Future for ``parallel_reduce(view.size, wu, view, *scalars)`` (a whole-array reduction kernel
    ``acc += f(a[i], s...)`` of accumulator ``dtype``) when ``view`` is the pending result of a recorded operation:
    recorded too, to run as the last step of its kernel. None when it must be a kernel call of its own."""
    rt = context.current()
    if type(view) is not View:
        return None
    with guard.lock:  # another thread may run the batch meanwhile
        batch = rt.batch
        if batch is None or not any(step.target is view for step in batch.steps):
            return None
        future = Future(dtype, rt.resolve)
        _append(rt, batch, Step(wu, None, (view, *scalars), future=future))
    return future


def _int64_scalars(operands: tuple) -> bool:
    """Whether every Python int operand fits int64 (a loop: this runs per operation)."""
    for x in operands:
        if type(x) is int and not _INT64[0] <= x <= _INT64[1]:
            return False
    return True


def _escaped(target: View, operands: tuple, fresh: bool) -> bool:
    """Whether the host reaches one of the Views past the barriers (the call must then run at once)."""
    return (not fresh and target.escaped(True)) or any(type(x) is View and x.escaped(False) for x in operands)


def _kernel(op: str, n: int, wu, args: dict, mode: _Mode):
    """One kernel call: run at once while ``mode`` says so, else logged."""
    if mode.now:
        try:
            return run_now(op, n, wu, args)
        except Exception as exc:
            if is_fault(exc):
                raise
            mode.now = False
    return (parallel_for if op == "for" else parallel_reduce)(n, wu, **args)


def _deliver(future: Future, result) -> None:
    """Make the reduction behind ``result`` (a number, or the Future of a logged call) deliver ``future`` (the one
    the program holds)."""
    if not isinstance(result, Future):
        future.set_result(result)
    elif result.done:
        future.set_result(result.value())
    else:
        call = result.call
        call.result, future.call = future, call


def _stored(steps: list) -> list:
    """Per step, whether its result must reach memory: something besides the batch refers to its View or the
    View's memory, or another step writes that View too (an ``out=`` accumulator). Of the others, False for
    those a step reads, None for those nobody reads (not computed either). Reductions: True."""
    held = Counter(id(x) for step in steps for x in step.operands if type(x) is View)
    written = Counter(id(step.target) for step in steps)
    targets = [step.target for step in steps]
    stored = []
    for k, step in enumerate(steps):
        if step.target is None or written[id(step.target)] > 1:
            stored.append(True)
        elif refcount.others(targets, k) != 1 + held[id(step.target)] or not _only_its_view(step.target):
            stored.append(True)
        else:
            stored.append(False if held[id(step.target)] else None)
    return stored


def _read_later(steps: list, groups: list, stored: list) -> None:
    """Results a later group reads are stored (that group's kernel reads them from memory)."""
    group_of = {k: g for g, group in enumerate(groups) for k in group}
    producer = {}
    for k, step in enumerate(steps):
        for x in step.operands:
            j = producer.get(id(x)) if type(x) is View else None
            if j is not None and group_of[j] != group_of[k]:
                stored[j] = True
        if step.target is not None:
            producer[id(step.target)] = k


def _only_its_view(view: View) -> bool:
    """Whether the View's memory is referenced only through it (its array by it alone; a pool slab behind it by
    the pool and that array alone)."""
    arrays = [view._array]
    if refcount.others(arrays, 0) != 1:
        return False
    base = arrays[0].base
    if base is None:
        return True
    arrays = [base]
    del base
    return buffers.holds(arrays[0]) and refcount.others(arrays, 0) == 2


def _groups(steps: list) -> list:
    """Runs of consecutive steps one kernel may compute (same size, inlinable, aligned accesses, at most one
    reduction, last), in order."""
    fresh = {id(step.target) for step in steps if step.fresh}
    groups, current, size, read, written = [], [], None, _Touched(), _Touched()
    for k, step in enumerate(steps):
        views = [x for x in step.operands if type(x) is View]
        target = step.target
        n = (target if target is not None else views[0]).size
        fits = current and n == size and steps[current[-1]].target is not None \
            and expressions.template(step.wu) is not None and all(written.aligned(v) for v in views) \
            and (target is None or step.fresh or written.aligned(target) and read.aligned(target))
        if not fits:
            if current:
                groups.append(current)
            current, size, read, written = [], n, _Touched(), _Touched()
        current.append(k)
        for v in views:
            read.add(v, id(v) in fresh)
        if target is not None:
            written.add(target, step.fresh)
    if current:
        groups.append(current)
    return groups


class _Touched:
    """The memory a group reads (or writes): every span by its bounds, and apart, the spans of new results in
    the order they were made (a View made before a new result cannot overlap it: its memory was new then)."""

    def __init__(self):
        self.exact, self.others, self.fresh = {}, [], []

    def add(self, view: View, fresh: bool) -> None:
        if view.bounds in self.exact:
            return
        self.exact[view.bounds] = view.dtype
        if fresh:
            self.fresh.append((view.uid, *view.bounds))
        else:
            self.others.append(view.bounds)

    def aligned(self, view: View) -> bool:
        """Whether ``view`` overlaps none of this memory except as exactly the same bytes and dtype."""
        dtype = self.exact.get(view.bounds)
        if dtype is not None:
            return dtype is view.dtype
        lo, hi = view.bounds
        if not all(hi <= a or b <= lo for a, b in self.others):
            return False
        for uid, a, b in self.fresh:  # uids grow: stop at the first result made after the View
            if uid > view.uid:
                break
            if not (hi <= a or b <= lo):
                return False
        return True


def _launch(steps: list, stored: list, mode: _Mode) -> None:
    """One kernel call for a group of steps (the steps' own kernel for one alone)."""
    needed = _needed(steps, stored)
    steps = [s for s, keep in zip(steps, needed) if keep]
    stored = [s for s, keep in zip(stored, needed) if keep]
    if not steps:
        return
    if len(steps) == 1 or expressions.namespace(tuple((s.wu,) for s in steps)) is None:
        for step in steps:
            _call_one(step, mode)
        return
    key, outputs, inputs, scalars, writer = [], [], [], [], {}
    input_index = {}
    last_write = {step.target.bounds: k for k, step in enumerate(steps) if step.target is not None}
    for k, (step, store) in enumerate(zip(steps, stored)):
        operands = []
        for x in step.operands:
            if type(x) is not View:
                operands.append(("s", len(scalars)))
                scalars.append(x)
            elif x.bounds in writer:
                operands.append(("t", writer[x.bounds]))
            else:
                n = input_index.setdefault(id(x), len(inputs))
                if n == len(inputs):
                    inputs.append(_common.flat(x))
                operands.append(("v", n))
        if step.target is None:
            key.append((step.wu, tuple(operands), None, None))
            continue
        out = None
        if store is True and last_write[step.target.bounds] == k:  # earlier values of it are only forwarded
            out = len(outputs)
            outputs.append(_common.flat(step.target))
        writer[step.target.bounds] = k
        key.append((step.wu, tuple(operands), step.target.dtype, out))
    wu = expressions.kernel_for(tuple(key))
    args = {f"o{n}": v for n, v in enumerate(outputs)}
    args.update((f"v{n}", v) for n, v in enumerate(inputs))
    args.update((f"s{n}", s) for n, s in enumerate(scalars))
    last = steps[-1]
    if last.target is None:
        _deliver(last.future, _kernel("reduce", last.operands[0].size, wu, args, mode))
    else:
        _kernel("for", last.target.size, wu, args, mode)
    if mode.now:
        counters.bump("fused_kernels_launched")


def _call_one(step: Step, mode: _Mode) -> None:
    """A step as its operation's own kernel call."""
    args = {n: _common.flat(x) if type(x) is View else x for n, x in zip(step.wu.parsed.param_names[2:], step.operands)}
    if step.target is not None:
        _kernel("for", step.target.size, step.wu, dict(out=_common.flat(step.target), **args), mode)
    else:
        _deliver(step.future, _kernel("reduce", step.operands[0].size, step.wu, args, mode))


def _needed(steps: list, stored: list) -> list:
    """Which steps to compute: the stored ones and those whose value a computed step reads."""
    needed = [s is True for s in stored]
    writer, readers = {}, []
    for k, step in enumerate(steps):
        readers.append([writer[x.bounds] for x in step.operands if type(x) is View and x.bounds in writer])
        if step.target is not None:
            writer[step.target.bounds] = k
    for k in range(len(steps) - 1, -1, -1):
        if needed[k]:
            for j in readers[k]:
                needed[j] = True
    return needed
