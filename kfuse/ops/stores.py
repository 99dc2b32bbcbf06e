"""Which results of a group of recorded operations reach memory, and which are computed at all.

Decided when the group runs, by reference counts as in kfuse/tracer/liveness.py: a result nothing but the group
refers to (the program dropped it: ``pk.log(pk.multiply(v, 2))``'s inner array) stays a local of the kernel and
its memory is never written; any other reference (a name, a container, another View or array over its memory,
the operation being recorded) keeps the store. A result nobody reads is not computed.
"""
from __future__ import annotations

from .. import buffers, refcount


def stored(steps: list, summary) -> list:
    """Per step (of a group, kfuse/ops/group.py, with its ``summary``, kfuse/ops/recorded.py), whether its result must
    reach memory: something besides the group refers to its View or the View's memory, or another step writes
    that View too (an ``out=`` accumulator). Of the others, False for those a step reads, None for those nobody
    reads. Reductions: True."""
    held, written = summary.held, summary.written
    targets = [step.target for step in steps]
    result = []
    for k in range(len(targets)):  # (no local names the targets: the counts would see it)
        if targets[k] is None or written[k] > 1:
            result.append(True)
        elif refcount.others(targets, k) != 1 + held[k] or not _only_its_view(targets[k]):
            result.append(True)
        else:
            result.append(False if held[k] else None)
    return result


def needed(batch, stored_: list) -> list:
    """Which steps to compute: the stored ones and those whose value a computed step reads; a group's row sum too
    when a step after it is computed (that step runs in the row's thread, kfuse/ops/group.py)."""
    result = [s is True for s in stored_]
    codes = batch.codes
    rows = batch.rows
    for k in range(len(result) - 1, -1, -1):
        if k == rows and not result[k]:
            result[k] = any(result[k + 1:])
        if result[k]:
            for kind, j in codes[k]:
                if kind == "t":
                    result[j] = True
    return result


def _only_its_view(view) -> bool:
    """Whether the View's memory is referenced only through it (its array by it alone, and by the pool if pooled;
    an array over other memory: that memory pooled, and referenced by the pool and this array alone)."""
    arrays = [view._array]
    pooled = buffers.holds(arrays[0])
    if refcount.others(arrays, 0) != 1 + pooled:
        return False
    base = arrays[0].base
    if base is None:
        return True
    arrays = [base]
    del base
    return buffers.holds(arrays[0]) and refcount.others(arrays, 0) == 2
