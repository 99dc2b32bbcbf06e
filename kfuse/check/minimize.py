"""Shrink a failing case to a small one that still fails, for a readable report.

Greedy: drop threads, then single steps (repeating while anything goes), then the small-trace variant.
``still_fails(case)`` decides; removing a step also drops the steps that referred to it
(:func:`~kfuse.check.program.without`).
"""
from __future__ import annotations

from .program import Case, without


def shrink(case: Case, still_fails, budget: int = 400) -> Case:
    """A smaller case for which ``still_fails`` holds (at most ``budget`` tries)."""
    tries = 0

    def attempt(candidate: Case) -> bool:
        nonlocal tries
        if tries >= budget or not any(candidate.threads):
            return False
        tries += 1
        return still_fails(candidate)

    changed = True
    while changed:
        changed = False
        for t in range(len(case.threads)):
            if len(case.threads) > 1:
                candidate = Case(case.threads[:t] + case.threads[t + 1:], case.max_trace)
                if attempt(candidate):
                    case, changed = candidate, True
                    break
        for t in range(len(case.threads)):
            i = len(case.threads[t]) - 1
            while i >= 0:  # from the end: later steps depend on earlier ones, not the other way
                shorter = without(case.threads[t], i)
                candidate = Case(case.threads[:t] + (shorter,) + case.threads[t + 1:], case.max_trace)
                if attempt(candidate):
                    case, changed = candidate, True
                i = min(i, len(case.threads[t])) - 1
        if case.max_trace is not None and attempt(Case(case.threads, None)):
            case, changed = Case(case.threads, None), True
    return case
