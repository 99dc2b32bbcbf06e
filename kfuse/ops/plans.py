"""What a group of recorded operations launches, decided once per form and store pattern.

A group's form (kfuse/ops/group.py) and which of its results are stored (kfuse/ops/stores.py), with whether it
is 2-D, fix everything about its kernel call but the Views and scalars passed: which steps are computed, the
generated workunit (kfuse/ops/expressions.py), which steps' results it stores and which inputs and scalars it
reads. A loop body that repeats one group looks its plan up instead of making it again.
"""
from __future__ import annotations

from . import expressions, stores

_PLANS: dict = {}  # (form, 2-D?, stored pattern) -> Plan
_MAX_PLANS = 4096  # past that, the table starts anew (a long program of many group forms keeps its recent ones)
_ALONE: dict = {}  # an operation's workunit -> its Plan run alone (the operations' kernels: a fixed set)
counts = {"hits": 0, "made": 0}  # plans looked up, plans made (tests read them)


class Plan:
    """``wu`` None: the steps ``alone`` run each as a call of its own. Else one call of ``wu`` whose parameters
    ``names`` take the targets of steps ``outputs``, the group's inputs ``inputs`` and scalars ``scalars`` (by
    their numbers in the group), in that order; ``last`` is the step whose target (or reduction) sizes it. ``rows``:
    the group's row sum step (kfuse/ops/expressions.py ``ROW_SUM``) when the kernel sums rows, a thread per row; it
    then takes the row length last, and that step's target sizes it."""

    __slots__ = ("wu", "alone", "names", "outputs", "inputs", "scalars", "last", "fused", "rows", "binding")

    def __init__(self, alone=(), wu=None, outputs=(), inputs=(), scalars=(), last=None, fused=False, names=None,
                 rows=None):
        self.wu, self.alone, self.outputs, self.inputs, self.scalars = wu, alone, outputs, inputs, scalars
        self.last, self.fused, self.rows = last, fused, rows
        self.binding = None  # (backend, default space, calls._Binding, runs off the GPU) of its last call run at once
        # (kfuse/ops/lazy.py)
        self.names = names or (*(f"o{n}" for n in range(len(outputs))), *(f"v{n}" for n in range(len(inputs))),
                               *(f"s{n}" for n in range(len(scalars))), *(("rows__n",) if rows is not None else ()))


def alone(wu, reduction: bool) -> Plan:
    """The plan of one operation's own kernel ``wu`` (a ``reduction`` or not) run by itself: its parameters after
    the index and the target or accumulator, after ``out`` for a target, so that its calls keep their binding
    as a group's do."""
    plan = _ALONE.get(wu)
    if plan is None:
        operands = tuple(wu.parsed.param_names[2:])
        plan = _ALONE[wu] = Plan(wu=wu, names=operands if reduction else ("out", *operands))
    return plan


def plan_for(form, grid: bool, stored: list, analysed) -> Plan:
    """The plan of a group of ``form`` (its steps numbered, kfuse/ops/group.py), 2-D or not, whose results
    ``stored`` says are stored; ``analysed()`` gives the group when a plan must be made."""
    key = (form, grid, tuple(stored))
    plan = _PLANS.get(key)
    if plan is not None:
        counts["hits"] += 1
        return plan
    counts["made"] += 1
    plan = _plan(analysed(), stored)
    if len(_PLANS) >= _MAX_PLANS:
        _PLANS.clear()
    _PLANS[key] = plan
    return plan


def _plan(group, stored: list) -> Plan:
    needed = stores.needed(group, stored)
    keep = [k for k, need in enumerate(needed) if need]
    steps = group.steps
    if len(keep) < 2 and not (keep and group.grid) or \
            expressions.namespace(tuple((steps[k].wu,) for k in keep)) is None:
        return Plan(alone=tuple(keep))
    renumber = len(keep) < len(steps)  # inputs, scalars and step values only the dropped steps had go
    numbers, inputs, scalars = {}, [], []
    key, outputs = [], []
    for k in keep:
        operands = group.codes[k]
        if renumber:
            operands = tuple(_renumbered(code, numbers, inputs, scalars) for code in operands)
        target = steps[k].target
        if target is None:
            key.append((steps[k].wu, operands, None, None))
            continue
        out = None
        if stored[k] is True and group.writer[group.elements[k]] == k:  # earlier values of it are only forwarded
            out = len(outputs)
            outputs.append(k)
        numbers["t", k] = len(key)
        key.append((steps[k].wu, operands, target.dtype, out))
    if not renumber:
        inputs, scalars = range(len(group.inputs)), range(len(group.scalars))
    return Plan(wu=expressions.kernel_for(tuple(key), group.grid), outputs=tuple(outputs), inputs=tuple(inputs),
                scalars=tuple(scalars), last=keep[-1], fused=len(keep) > 1,
                rows=group.rows if group.rows in keep else None)


def _renumbered(code: tuple, numbers: dict, inputs: list, scalars: list) -> tuple:
    """A step's operand code in the kernel of the kept steps: inputs and scalars numbered by first use."""
    kind, n = code
    if kind == "t":
        return "t", numbers["t", n]
    new = numbers.get(code)
    if new is None:
        listed = inputs if kind == "v" else scalars
        new = numbers[code] = len(listed)
        listed.append(n)
    return kind, new
