"""Random cases, drawn through a chooser so that the same code serves seeded runs and Hypothesis.

A chooser has ``choice(sequence)`` and ``integer(low, high)`` (inclusive). :class:`SeededChooser`
wraps :class:`random.Random` (``python -m kfuse.check``); the tests wrap Hypothesis' ``data.draw`` so
Hypothesis shrinks failing programs itself.
"""
from __future__ import annotations

import random

from .arrays import COLUMNS, EXPORTABLE, GROUPS, HOST_NAMES, ONE_D, REALLOCATABLE, RESIZABLE, TWO_D
from .kernels import F64, KERNELS, NEIGHBOUR_READERS
from .program import AUTO_TEAM, HUGE_TEAM, Call, Case, Export, Fence, Read, Realloc, UseResult, Write
from .host import READS, USES, WRITES

SCALARS = (0.0, 0.5, -1.25, 3.0)
WRITE_VALUES = (0.0, 0.5, -1.25, 3.0, 7.0)
MAX_TRACES = (1, 2, 3, 5)
FAILING_KERNELS = frozenset({"broken"})  # always fails; "debug"/"divide" fail with flag 3 or 0, "divide_by" with 0
#: step kinds, repeated to weigh them
KINDS = ("call",) * 6 + ("read",) * 2 + ("write", "use", "realloc", "export")
FLAGS = (-1, -1, 3, 0)  # "debug"/"divide" with -1 never fail; with 3 or 0 they divide by zero at i == flag;
# "divide_by" divides by the flag: by 0 it fails, by -1 a GPU launch waits (a divisor that could fault), by 3 not


class SeededChooser:
    def __init__(self, seed):
        self._random = random.Random(seed)

    def choice(self, options):
        return self._random.choice(options)

    def integer(self, low: int, high: int) -> int:
        return self._random.randint(low, high)


def case_for(seed: int, index: int) -> Case:
    """The ``index``-th case of a seeded run (each case independent of the others)."""
    return case(SeededChooser(f"{seed}:{index}"))


def case(ch) -> Case:
    """One case in eight runs 2-3 programs in threads (without failing calls: a failure in one thread may
    surface in another thread's flush, which the oracle does not model); one in three of the others may
    call failing kernels."""
    max_trace = ch.choice((None, None, *MAX_TRACES))
    if ch.integer(0, 7) == 0:
        return Case(tuple(program(ch, failures=False) for _ in range(ch.integer(2, 3))), max_trace)
    return Case((program(ch, failures=ch.integer(0, 2) == 0),), max_trace)


def program(ch, failures: bool = True, max_steps: int = 16) -> tuple:
    """One program: one in five a time-step loop (``loop``), the others random steps."""
    if ch.integer(0, 4) == 0:
        return loop(ch)
    steps: list = []
    n_results = 0
    exported: set = set()
    for _ in range(ch.integer(1, max_steps)):
        kind = ch.choice(KINDS)
        if kind == "call":
            step = call(ch, n_results, failures)
            n_results += KERNELS[step.kernel].op != "for"
        elif kind == "read":
            step = Read(ch.choice(HOST_NAMES + tuple(sorted(exported))), ch.choice(sorted(READS)))
        elif kind == "write":
            name = ch.choice(HOST_NAMES + tuple(sorted(exported)))
            hows = sorted(WRITES) if name in RESIZABLE else sorted(set(WRITES) - {"resized"})
            step = Write(name, ch.choice(hows), ch.choice(WRITE_VALUES), ch.integer(0, 40))
        elif kind == "use" and n_results:
            step = UseResult(ch.integer(0, n_results - 1), ch.choice(sorted(USES)))
        elif kind == "realloc":
            step = Realloc(ch.choice(REALLOCATABLE))
        elif kind == "export":
            step = Export(ch.choice(EXPORTABLE))
            exported.add("@" + step.name)
        else:
            continue
        steps.append(step)
    if len(steps) >= 2 and ch.integer(0, 3) == 0:
        start = ch.integer(0, len(steps) - 1)
        end = ch.integer(start + 1, len(steps))
        return _repeated(ch, steps, start, end, ch.integer(2, 5), ch.integer(0, 1))
    return tuple(steps)


def loop(ch) -> tuple:
    """A time-step loop: 2-4 calls and a read of an array they take, repeated 3-6 times (the runtime reruns such
    flushes, kfuse/rerun.py)."""
    body = [call(ch, 0, failures=False) for _ in range(ch.integer(2, 4))]
    return _repeated(ch, body, 0, len(body), ch.integer(3, 6), True)


def _repeated(ch, steps: list, start: int, end: int, times: int, read: bool) -> tuple:
    """``steps`` with ``steps[start:end]`` done ``times`` times, as a time-step loop repeats its body; one
    repetition may call with another number. With ``read``, a read of an array the body's calls take ends each
    repetition (each one a flush; half of the time after a ``pk.fence()``, so the flush is the whole repetition,
    which the runtime may also time untraced, untraced.Trial); half of the time each repetition after the first
    makes some of those arrays anew (new Views of the same shape, as a program that allocates its arrays for each
    run); one time in three a repetition first gives one of them new memory under the same View (``View.resize``:
    the kept launches took the old memory)."""
    body = steps[start:end]
    arrays = sorted({name for s in body if isinstance(s, Call) for name in s.arrays})
    if arrays and read:
        body = body + [Fence()] * ch.integer(0, 1) + [Read(ch.choice(arrays), ch.choice(sorted(READS)))]
    used = [name for name in arrays if name in REALLOCATABLE]
    if used and ch.integer(0, 1):
        anew = [Realloc(name) for name in used if ch.integer(0, 2)]
        body = anew + [s for s in body if not (isinstance(s, Realloc) and s in anew)]
    copies = [list(body) for _ in range(times - 1)]
    resizable = [name for name in arrays if name in RESIZABLE]
    if resizable and copies and ch.integer(0, 2) == 0:
        k = ch.integer(0, len(copies) - 1)
        copies[k] = [Write(ch.choice(resizable), "resized", ch.choice(WRITE_VALUES), ch.integer(0, 40))] + copies[k]
    changed = ch.integer(0, 2 * len(copies) - 1)  # half of the time: no copy changes
    if changed < len(copies):
        for k, step in enumerate(copies[changed]):
            if isinstance(step, Call) and isinstance(step.alpha, (int, float)) and KERNELS[step.kernel].scalar == "alpha":
                copies[changed][k] = Call(step.kernel, step.arrays, ch.choice(SCALARS), step.team)
                break
    return tuple(steps[:end] + [s for copy in copies for s in copy] + steps[end:])


def call(ch, n_results: int, failures: bool = True) -> Call:
    names = sorted(k for k in KERNELS if failures or k not in FAILING_KERNELS)
    name = ch.choice(names)
    kernel = KERNELS[name]
    one_d = [n for n in ONE_D if n not in COLUMNS] if "M" in kernel.kinds else ONE_D
    arrays = [ch.choice(one_d) if kind == F64 else ch.choice(TWO_D) if kind == "M" else kind for kind in kernel.kinds]
    if name in NEIGHBOUR_READERS and GROUPS[arrays[0]] == GROUPS[arrays[1]]:
        arrays[1] = ch.choice([n for n in one_d if GROUPS[n] != GROUPS[arrays[0]]])
    alpha = None
    if kernel.scalar == "alpha":
        alpha = ("r", ch.integer(0, n_results - 1)) if n_results and ch.integer(0, 1) else ch.choice(SCALARS)
    elif kernel.scalar == "flag":
        alpha = ch.choice(FLAGS if failures else (-1,))
    team = 1
    if kernel.policy == "team":
        team = ch.choice((1, AUTO_TEAM, HUGE_TEAM) if failures else (1, AUTO_TEAM))
    return Call(name, tuple(arrays), alpha, team)
