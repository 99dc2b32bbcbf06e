"""Differential fuzzer: random programs must observe the same values with fusion on as eagerly.

A case (:mod:`~kfuse.check.program`) is a random program of kernel calls, host reads and writes
through every access path (Views, NumPy arrays passed straight to kernels, kept ``np.asarray``
aliases, ``pk.array`` bases), reduction results fed back or printed, reallocations and failing calls,
or several programs run at once in threads. :func:`check` runs it eagerly, then traced, fused and
fused with a small ``KFUSE_MAX_TRACE``, then fused with each program run twice in a row (repeated
partitions are replayed, and groups are timed fused and apart, fuser/profit.py), then four times in a row with its
runs of calls captured (``pk.capture``: later runs replay them, kfuse/capturing.py), and lists every
departure from eager's observations that the runtime's contract does not allow (:mod:`~kfuse.check.oracle`).
``python -m kfuse.check --programs N`` runs N random cases in worker processes and reports mismatches,
crashes and hangs.
"""
from __future__ import annotations

from .generate import case_for
from .minimize import shrink
from .oracle import compare
from .program import Call, Case, Export, Fence, Read, Realloc, UseResult, Write, as_python
from .runner import CAPTURED, EAGER, FUSED, TRACED, TWICE, Mode, modes_for, run

__all__ = ["CAPTURED", "Call", "Case", "EAGER", "Export", "FUSED", "Fence", "Mode", "Read", "Realloc", "TRACED",
           "UseResult", "Write", "as_python", "case_for", "check", "compare", "modes_for", "run", "shrink"]


def check(case: Case) -> list:
    """Run ``case`` eagerly and in every other mode, then each program twice in a row on the same arrays, eagerly
    and fused (the second pass repeats the first one's partitions over the same memory: they are replayed,
    fuser/replay.py), then four times with its runs of calls captured; the mismatches found (empty: all agree)."""
    expected = run(case, EAGER)
    mismatches = []
    for mode in modes_for(case):
        mismatches += compare(expected, run(case, mode))
    twice = Case(tuple(steps + steps for steps in case.threads), case.max_trace)
    mismatches += compare(run(twice, EAGER), run(twice, TWICE))
    four = Case(tuple(steps * CAPTURED.captured for steps in case.threads), case.max_trace)
    return mismatches + compare(run(four, EAGER), run(four, CAPTURED))
