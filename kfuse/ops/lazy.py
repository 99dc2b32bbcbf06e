"""Element-wise operations recorded with fusion on, and run as few kernels as their accesses allow.

Tracing each array operation as a kernel call costs it a binding, a trace entry and its share of the fuser's
analysis: tens of microseconds, where NumPy takes one. With fusion on, an element-wise operation on plain Views
is recorded here instead (a ``Step``: its workunit, its result View and its operands) and returns its result at
once. The steps recorded form one open group (kfuse/ops/group.py), which one generated kernel computes
(kfuse/ops/expressions.py), storing only the results something else refers to (kfuse/ops/stores.py). A step
that cannot join the group (another size, a View shifted against what the group writes, a step after a
reduction) first runs it; so does anything else the runtime does (log a kernel call, let the host touch a View,
resolve a Future, flush). The group runs at once when nothing else is pending and no failure is recorded (what
NumPy would have done by then); otherwise it is logged as one call, which the tracer fuses with its neighbours
as usual.

An operation whose ``out=`` overlaps an operand at other elements computes into a new View first and copies
it over, as NumPy reads every input before it writes.
"""
from __future__ import annotations

import time

from .. import context, counters, escape, guard
from ..fuser import explain
from ..tracer.failures import is_fault
from ..dispatch import parallel_for, parallel_reduce, run_now
from ..future import Future
from ..policies import MDRangePolicy
from ..types import DType
from ..views import View, escaped_any
from . import _common, kernels, overlap, plans, stores  # _common imports this module: its names are read at call time
from .group import Group, elements

_MAX_STEPS = 256  # recorded steps that run without waiting for anything else
_INT64 = (-2 ** 63, 2 ** 63 - 1)  # a larger Python int is refused by the kernel call: at the operation, not later
_GRIDS: dict = {}  # shape -> the MDRangePolicy of a 2-D group's kernel


class Step:
    """One recorded operation; a whole-array reduction has no target and delivers ``future`` instead."""

    __slots__ = ("wu", "target", "operands", "fresh", "future")

    def __init__(self, wu, target: View | None, operands: tuple, fresh: bool = False, future: Future | None = None):
        self.wu, self.target, self.operands, self.fresh, self.future = wu, target, operands, fresh, future


class Batch(Group):
    """The open group, recorded since the runtime last ran anything (the runtime calls ``run`` before anything
    else, kfuse/engine.py)."""

    def run(self, now: bool = False) -> None:
        """Run the group as one kernel call; ``now``: at once (the caller knows nothing else is pending)."""
        start = time.perf_counter()
        stored = stores.stored(self)
        unstored = sum(1 for s in stored if s is not True)
        counters.bump("unstored_arrays", unstored)
        seconds = time.perf_counter() - start
        mode = _Mode(now)
        _launch(self, stored, mode)
        if mode.now:  # (else the pipeline counts and records the flushes)
            counters.bump("flushes")
            explain.record_operations(context.current(), [step.wu.__name__ for step in self.steps],
                                      [list(range(len(self.steps)))], {0: unstored} if unstored else {}, seconds)


class _Mode:
    """Whether a group's kernels still run at once. One that cannot (an argument or build error before it
    launched: never a fault, after which running it again could apply it twice) and every later one go through
    the trace, which runs them in order and reports the failure where its results are read."""

    def __init__(self, now: bool):
        self.now = now


def run(wu, target: View, operands: tuple, fresh: bool) -> View:
    """``target[i] = wu(operands...)`` for every element (operands per workunit parameter after ``out``: Views of
    ``target``'s size, contiguous or of rank 1 or 2, of its shape where one is strided 2-D, which needs an
    inlinable ``wu`` (expressions.template); or kernel scalars); ``fresh``: ``target`` is new memory no NumPy
    array reaches. Recorded with fusion on, else run as one kernel call."""
    views, grid, wide = [], target.ndim == 2 and target.storage != "right", False
    for x in operands:  # (one loop: this runs per operation)
        if type(x) is View:
            views.append(x)
            grid = grid or x.ndim == 2 and x.storage != "right"
        elif type(x) is int and not _INT64[0] <= x <= _INT64[1]:
            wide = True  # refused by the kernel call: at the operation, not later
    if not fresh and _overlaps_apart(target, views):
        scratch = _common.new_view(target.shape, target.dtype.np)
        return run(kernels.copy_k, target, (run(wu, scratch, operands, True),), False)
    step = Step(wu, target, operands, fresh)
    rt = context.current()
    if rt.enabled and rt.fuse and not wide and not (escape.live() and escaped_any(None if fresh else target, views)):
        with guard.lock:
            _append(rt, step, views, grid)
        return target
    _alone(step, grid, _Mode(False))
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
        _append(rt, Step(wu, None, (view, *scalars), future=future), [view], False)
    return future


def _append(rt, step: Step, views: list, grid: bool) -> None:
    """Record ``step`` (the caller holds ``guard.lock``), after running the open group if the step cannot join
    it; a full group runs without waiting."""
    batch = rt.batch
    if batch is not None and not batch.takes(step, views, grid):
        rt.run_batch(host_waits=True)  # at once unless something else is pending
        batch = None
    if batch is None:
        batch = rt.batch = Batch()
    batch.add(step, views, grid)
    rt.counts["array_ops_recorded"] += 1
    if len(batch.steps) >= _MAX_STEPS:
        rt.run_batch(host_waits=True)


def _overlaps_apart(target: View, views: list) -> bool:
    """Whether an operand shares bytes with ``target`` other than as the same element as the same dtype
    (kfuse/ops/overlap.py)."""
    lo, hi = target.bounds
    for v in views:
        if v is not target and v.bounds[0] < hi and lo < v.bounds[1] and (v.dtype is not target.dtype or (
                elements(v) != elements(target) and overlap.conflict(v, target))):
            return True
    return False


def _launch(group: Group, stored: list, mode: _Mode) -> None:
    """The kernel calls for a group (kfuse/ops/plans.py): its generated kernel, or steps as calls of their own."""
    plan = plans.plan_for(group, stored)
    steps = group.steps
    for k in plan.alone:
        _alone(steps[k], group.grid, mode)
    if plan.wu is None:
        return
    grid, flat = group.grid, _common.flat
    values = [steps[k].target if grid else flat(steps[k].target) for k in plan.outputs]
    values += [group.input(n) if grid else flat(group.input(n)) for n in plan.inputs]
    values += [group.scalars[n] for n in plan.scalars]
    args = dict(zip(plan.names, values))
    last = steps[plan.last]
    if last.target is None:
        _deliver(last.future, _kernel("reduce", last.operands[0].size, plan.wu, args, mode))
    else:
        _kernel("for", _grid(last.target.shape) if grid else last.target.size, plan.wu, args, mode)
    if mode.now and plan.fused:
        counters.bump("fused_kernels_launched")


def _alone(step: Step, grid: bool, mode: _Mode) -> None:
    """A step as a kernel call of its own: its operation's kernel over flat Views, or in a 2-D group the kernel
    generated for it."""
    if not grid:
        _call_one(step, mode)
        return
    single = Group()
    single.add(step, [x for x in step.operands if type(x) is View], True)
    _launch(single, [True], mode)


def _grid(shape: tuple) -> MDRangePolicy:
    policy = _GRIDS.get(shape)
    if policy is None:
        if len(_GRIDS) >= 1024:  # a program of many shapes: keep the recent ones
            _GRIDS.clear()
        policy = _GRIDS[shape] = MDRangePolicy([0, 0], list(shape))
    return policy


def _call_one(step: Step, mode: _Mode) -> None:
    """A step as its operation's own kernel call, over flat Views."""
    args = {n: _common.flat(x) if type(x) is View else x for n, x in zip(step.wu.parsed.param_names[2:], step.operands)}
    if step.target is not None:
        _kernel("for", step.target.size, step.wu, dict(out=_common.flat(step.target), **args), mode)
    else:
        _deliver(step.future, _kernel("reduce", step.operands[0].size, step.wu, args, mode))


def _kernel(op: str, policy, wu, args: dict, mode: _Mode):
    """One kernel call: run at once while ``mode`` says so, else logged."""
    if mode.now:
        try:
            return run_now(op, policy, wu, args)
        except Exception as exc:
            if is_fault(exc):
                raise
            mode.now = False
    return (parallel_for if op == "for" else parallel_reduce)(policy, wu, **args)


def _deliver(future: Future, result) -> None:
    """Make the reduction behind ``result`` (a number, or the Future of a logged call) deliver ``future`` (the one
    the program holds)."""
    if not isinstance(result, Future):
        future.set_result(result)
    elif result.done:
        future.set_result(result.value())
    else:
        if result.call is None:  # a call a rerun matched (kfuse/rerun.py): the trace entry it becomes holds it
            context.current().trace  # (the property makes the matched calls entries)
        call = result.call
        call.result, future.call = future, call
