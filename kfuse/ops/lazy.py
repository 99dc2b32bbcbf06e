"""Element-wise operations recorded with fusion on, and run as few kernels as their accesses allow.

Tracing each array operation as a kernel call costs it a binding, a trace entry and its share of the fuser's
analysis: tens of microseconds, where NumPy takes one. With fusion on, an element-wise operation on plain Views
is recorded here instead (a ``Step``: its workunit, its result View and its operands) and returns its result at
once. The steps recorded form one open group (kfuse/ops/group.py; its analysis looked up per sequence of steps,
kfuse/ops/recorded.py), which one generated kernel computes
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

from .. import context, counters, escape, guard, views
from ..calls import bind, policy_of, runs_off_gpu
from ..fuser import explain
from ..tracer.failures import is_fault
from ..dispatch import parallel_for, parallel_reduce, run_bound, run_now
from ..future import Future
from ..policies import MDRangePolicy
from ..types import DType
from ..views import View, escaped_any
from . import _common, expressions, kernels, on_host, overlap, plans, stores  # _common imports this module: its names are read at call time
from .group import Group, elements
from .recorded import Recorded, Step, Summary, summary_of

_MAX_STEPS = 256  # recorded steps that run without waiting for anything else
_INT64 = (-2 ** 63, 2 ** 63 - 1)  # a larger Python int is refused by the kernel call: at the operation, not later
_GRIDS: dict = {}  # shape -> the MDRangePolicy of a 2-D group's kernel


class Batch(Recorded):
    """The open group (the runtime calls ``run`` before anything else, kfuse/engine.py)."""

    def run(self, now: bool = False) -> None:
        """Run the group as one kernel call; ``now``: at once (the caller knows nothing else is pending)."""
        start = time.perf_counter()
        summary = self.summary()
        stored = stores.stored(self.steps, summary)
        unstored = len(stored) - stored.count(True)
        counters.bump("unstored_arrays", unstored)
        seconds = time.perf_counter() - start
        mode = _Mode(now)
        _launch(self.steps, summary, stored, mode, self.analysed)
        if mode.now:  # (else the pipeline counts and records the flushes)
            counters.bump("flushes")
            explain.record_operations(context.current(), summary.names, summary.groups,
                                      {0: unstored} if unstored else {}, seconds)


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
    array reaches. Small and exact in NumPy: computed now on the host (kfuse/ops/on_host.py); else recorded with
    fusion on, or run as one kernel call."""
    if on_host.ran(wu, target, operands):
        return target
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


def rows_sum(lines: View, target: View, divisor: float) -> bool:
    """Record ``target[i] = sum(lines[i, :]) / divisor`` (``kernels.rows_sum_k``) as the last step of the open group
    when ``lines`` (2-D, float64) is a result that group computes and ``target`` new memory: the group's kernel
    then sums each row as it computes it, and the 2-D result is stored only if something else keeps it. False
    when it cannot join: the caller runs the row kernel itself."""
    rt = context.current()
    if type(lines) is not View or lines.dtype is not DType.float64 or target.dtype is not DType.float64 \
            or not lines.size:
        return False
    with guard.lock:
        batch = rt.batch
        if batch is None:
            return False
        source = None
        for step in batch.steps:  # the group's own View of that memory (its analysis is kept per sequence of steps)
            if step.target is not None and step.target.bounds == lines.bounds and step.target.storage == "right":
                source = step.target
        if source is None or lines.storage != "right" or source.size != lines.size:
            return False
        step = Step(expressions.ROW_SUM, target, (source, float(divisor)), True)
        if not batch.join(step, [source], False):
            return False
        rt.counts["array_ops_recorded"] += 1
        if len(batch.steps) >= _MAX_STEPS:
            rt.run_batch(host_waits=True)
    return True


def _append(rt, step: Step, views: list, grid: bool) -> None:
    """Record ``step`` (the caller holds ``guard.lock``), after running the open group if the step cannot join
    it; a full group runs without waiting."""
    batch = rt.batch
    if batch is not None and not batch.join(step, views, grid):
        rt.run_batch(host_waits=True)  # at once unless something else is pending
        batch = None
    if batch is None:
        batch = rt.batch = Batch()
        batch.join(step, views, grid)
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


def _launch(steps: list, summary: Summary, stored: list, mode: _Mode, analysed) -> None:
    """The kernel calls for a group of ``steps`` (kfuse/ops/plans.py; ``analysed()`` gives its Group where a plan
    must be made): its generated kernel, or steps as calls of their own."""
    plan = plans.plan_for(summary.form, summary.grid, stored, analysed)
    grid = summary.grid
    for k in plan.alone:
        _alone(steps[k], grid, mode)
    if plan.wu is None:
        return
    flat, inputs, scalars = _common.flat, summary.inputs, summary.scalars
    values = [steps[k].target if grid else flat(steps[k].target) for k in plan.outputs]
    for n in plan.inputs:
        k, position = inputs[n]
        values.append(steps[k].operands[position] if grid else flat(steps[k].operands[position]))
    for n in plan.scalars:
        k, position = scalars[n]
        values.append(steps[k].operands[position])
    last = steps[plan.last]
    if plan.rows is not None:
        rows = steps[plan.rows]
        values.append(rows.operands[0].size // rows.target.size)
        _kernel("for", rows.target.size, plan.wu, dict(zip(plan.names, values)), mode, plan)
        if mode.now and plan.fused:
            counters.bump("fused_kernels_launched")
        return
    args = dict(zip(plan.names, values))
    if last.target is None:
        _deliver(last.future, _kernel("reduce", last.operands[0].size, plan.wu, args, mode, plan))
    else:
        _kernel("for", _grid(last.target.shape) if grid else last.target.size, plan.wu, args, mode, plan)
    if mode.now and plan.fused:
        counters.bump("fused_kernels_launched")


def _alone(step: Step, grid: bool, mode: _Mode) -> None:
    """A step as a kernel call of its own: its operation's kernel over flat Views, or in a 2-D group the kernel
    generated for it; a row sum over its 2-D rows."""
    if step.wu is expressions.ROW_SUM:
        source, divisor = step.operands
        lines = View.wrap(source._array.reshape(step.target.size, -1))
        _kernel("for", step.target.size, step.wu, {"out": step.target, "a": lines, "divisor": divisor}, mode)
        return
    if not grid:
        _call_one(step, mode)
        return
    single = Group()
    single.add(step, [x for x in step.operands if type(x) is View], True)
    _launch(single.steps, summary_of(single), [True], mode, lambda: single)


def _grid(shape: tuple) -> MDRangePolicy:
    policy = _GRIDS.get(shape)
    if policy is None:
        if len(_GRIDS) >= 1024:  # a program of many shapes: keep the recent ones
            _GRIDS.clear()
        policy = _GRIDS[shape] = MDRangePolicy([0, 0], list(shape))
    return policy


def _call_one(step: Step, mode: _Mode) -> None:
    """A step as its operation's own kernel call, over flat Views."""
    plan, flat = plans.alone(step.wu, step.target is None), _common.flat
    values = [flat(x) if type(x) is View else x for x in step.operands]
    if step.target is not None:
        values.insert(0, flat(step.target))
        _kernel("for", step.target.size, step.wu, dict(zip(plan.names, values)), mode, plan)
    else:
        _deliver(step.future, _kernel("reduce", step.operands[0].size, step.wu, dict(zip(plan.names, values)), mode,
                                      plan))


def _at_once(plan: plans.Plan, op: str, policy, args: dict):
    """Run a plan's kernel now (``args`` in the order of ``plan.names``). While the backend, the default space and
    the arguments' signatures are those of its last call, through that call's binding: ``calls.bind`` would find
    the same one, looking each up again (microseconds per group, and loops run thousands); what else ``bind``
    does is done here too (a kernel that runs off the GPU drops known contents of its Views, ``views.constant``)."""
    rt, known = context.current(), plan.binding
    if known is not None and known[0] is rt.backend and known[1] is rt.default_space and \
            not guard.forked_after_start:
        values = list(args.values())
        if known[2].sigs == [v.sig if type(v) is View else type(v) for v in values]:
            if known[3] and views.constant:
                views.touched(values)
            return run_bound(rt, known[2], policy_of(policy), values, queued=True)
    binding, bound, given = bind(plan.wu, op, policy, (), args, rt.backend)
    if binding.direct and not binding.scratch and all(a is b for a, b in zip(given, args.values())):
        plan.binding = (rt.backend, rt.default_space, binding, runs_off_gpu(rt.backend, rt.default_space.value))
    return run_bound(rt, binding, bound, given, queued=True)


def _kernel(op: str, policy, wu, args: dict, mode: _Mode, plan: plans.Plan | None = None):
    """One kernel call (of ``plan``'s kernel if given): run at once while ``mode`` says so, else logged."""
    if mode.now:
        try:
            return run_now(op, policy, wu, args) if plan is None else _at_once(plan, op, policy, args)
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
    elif result.failure is not None:  # its call was refused at once: what it needs was lost to a failed call
        future.call = result.call
        future.set_error(result.failure)
    else:
        if result.call is None:  # a call a rerun matched (kfuse/rerun.py): the trace entry it becomes holds it
            context.current().trace  # (the property makes the matched calls entries)
        call = result.call
        call.result, future.call = future, call
