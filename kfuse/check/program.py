"""Programs: steps over a fixed set of named arrays, and cases (one program, or one per thread).

A program is plain data, so it can be generated, printed as Python, sent to a worker process as JSON,
and shrunk step by step. Arrays are referred to by name (see :mod:`kfuse.check.arrays`); reduction and
scan results by their ordinal ``k`` among the program's result-producing calls.
"""
from __future__ import annotations

import json
from dataclasses import MISSING, astuple, dataclass, fields

from .arrays import COLUMNS, EXPORTABLE, GROUPS, HOST_NAMES, ONE_D, REALLOCATABLE, RESIZABLE, TWO_D
from .host import READS, USES, WRITES
from .kernels import F64, KERNELS, NEIGHBOUR_READERS

#: A team size the backend refuses at launch (Kokkos' maximum is far smaller): a run-time failure.
HUGE_TEAM = 100000
AUTO_TEAM = -1  # pk.AUTO


@dataclass(frozen=True)
class Call:
    """A kernel call. ``arrays`` maps the kernel's View parameters to array names; ``alpha`` feeds its
    scalar parameter: a number, or ``("r", k)`` for the k-th result; ``team`` is the TeamPolicy team size."""

    kernel: str
    arrays: tuple
    alpha: object = None
    team: int = 1


@dataclass(frozen=True)
class Read:
    """A host read of an array (a View, a NumPy array, or a kept alias ``@name``) in one of ``READS``."""

    name: str
    how: str


@dataclass(frozen=True)
class Write:
    name: str
    how: str  # see WRITES
    value: float
    at: int = 0


@dataclass(frozen=True)
class UseResult:
    """A host use of the k-th reduction/scan result (see USES)."""

    k: int
    how: str


@dataclass(frozen=True)
class Realloc:
    """Drop an array and make a fresh one under the same name (its old pending work must not leak)."""

    name: str


@dataclass(frozen=True)
class Export:
    """``@name = np.asarray(view)``: the host keeps a NumPy alias of the View and may use it at any time."""

    name: str


@dataclass(frozen=True)
class Fence:
    """``pk.fence()``: everything pending runs (a failure not reported yet is raised here); a time-step loop that
    ends its repetitions so runs each one as a whole flush."""


STEPS = {cls.__name__: cls for cls in (Call, Read, Write, UseResult, Realloc, Export, Fence)}


@dataclass(frozen=True)
class Case:
    """What one check runs: one program, or several run at once in threads (each on its own arrays).
    ``max_trace``: also run with ``KFUSE_MAX_TRACE`` set this small (None: the default only)."""

    threads: tuple
    max_trace: int | None = None

    @classmethod
    def of(cls, steps, max_trace: int | None = None) -> "Case":
        return cls((tuple(steps),), max_trace)


def produces_result(step) -> bool:
    return isinstance(step, Call) and KERNELS[step.kernel].op != "for"


def validate(steps) -> None:
    """Raise ValueError naming the first step that refers to something that does not exist at that point."""
    n_results, aliases = 0, set()
    for i, step in enumerate(steps):
        problem = _problem(step, n_results, aliases)
        if problem:
            raise ValueError(f"step {i} {step!r}: {problem}")
        n_results += produces_result(step)
        if isinstance(step, Export):
            aliases.add("@" + step.name)


def _problem(step, n_results: int, aliases: set) -> str | None:
    if isinstance(step, Call):
        kernel = KERNELS.get(step.kernel)
        if kernel is None:
            return f"no kernel '{step.kernel}' (kernels: {', '.join(sorted(KERNELS))})"
        if len(step.arrays) != len(kernel.params):
            return f"'{step.kernel}' takes {len(kernel.params)} arrays ({', '.join(kernel.params)})"
        for param, kind, name in zip(kernel.params, kernel.kinds, step.arrays):
            takes = {F64: ONE_D, "M": TWO_D}.get(kind, (kind,))
            if name != kind and name not in takes:
                return f"parameter '{param}' takes {' or '.join(takes)}, not '{name}'"
        if step.kernel in NEIGHBOUR_READERS and GROUPS[step.arrays[0]] == GROUPS[step.arrays[1]]:
            return f"'{step.kernel}' reads neighbours: its arrays must not share memory (even eager runs would race)"
        if "M" in kernel.kinds and set(step.arrays) & set(COLUMNS):
            return f"'{step.kernel}' takes M or Mc: a column of M ({', '.join(COLUMNS)}) must not be another of its arrays"
        if kernel.scalar and isinstance(step.alpha, tuple) and not (step.alpha[0] == "r" and
                                                                     0 <= step.alpha[1] < n_results):
            return f"alpha {step.alpha!r} refers to no earlier result (there are {n_results})"
        if kernel.scalar and not isinstance(step.alpha, (tuple, int, float)):
            return f"'{step.kernel}' needs alpha: a number or ('r', k)"
        if step.team != 1 and kernel.policy != "team":
            return f"a team size for '{step.kernel}', which is not a TeamPolicy kernel"
        return None
    if isinstance(step, (Read, Write)):
        if step.name not in HOST_NAMES and step.name not in aliases:
            return f"no array '{step.name}' here (arrays: {', '.join(HOST_NAMES)}; aliases: {sorted(aliases)})"
        paths = READS if isinstance(step, Read) else WRITES
        if step.how not in paths:
            return f"no access path '{step.how}' (paths: {', '.join(paths)})"
        if step.how == "resized" and step.name not in RESIZABLE:
            return f"cannot resize '{step.name}' ({', '.join(RESIZABLE)}: no other name shares their memory)"
        return None
    if isinstance(step, UseResult):
        if not 0 <= step.k < n_results:
            return f"no result {step.k} yet (there are {n_results})"
        return None if step.how in USES else f"no use '{step.how}' (uses: {', '.join(USES)})"
    if isinstance(step, Realloc):
        return None if step.name in REALLOCATABLE else f"cannot reallocate '{step.name}' ({', '.join(REALLOCATABLE)})"
    if isinstance(step, Export):
        return None if step.name in EXPORTABLE else f"cannot export '{step.name}' ({', '.join(EXPORTABLE)})"
    if isinstance(step, Fence):
        return None
    return f"not a step: {type(step).__name__}"


# --- JSON (to and from worker processes) ---------------------------------------------------------
def _tuples(value):
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def to_json(case: Case) -> str:
    return json.dumps({"threads": [[[type(s).__name__, *astuple(s)] for s in steps] for steps in case.threads],
                       "max_trace": case.max_trace})


def from_json(text: str) -> Case:
    data = json.loads(text)
    threads = tuple(tuple(STEPS[s[0]](*(_tuples(v) for v in s[1:])) for s in steps) for steps in data["threads"])
    return Case(threads, data["max_trace"])


def as_python(case: Case) -> str:
    """The case as a Python expression (paste it into a test)."""
    def step(s):
        args = ", ".join(repr(getattr(s, f.name)) if f.default is MISSING else f"{f.name}={getattr(s, f.name)!r}"
                         for f in fields(s) if f.default is MISSING or getattr(s, f.name) != f.default)
        return f"{type(s).__name__}({args})"
    programs = ",\n    ".join("(" + ", ".join(step(s) for s in steps) + ",)" for steps in case.threads)
    return f"Case((\n    {programs},\n), max_trace={case.max_trace})"


# --- removing steps (for shrinking) while keeping references valid ------------------------------
def without(steps: tuple, index: int) -> tuple:
    """``steps`` less step ``index``; uses of a removed result or alias go too, later result numbers shift."""
    removed = steps[index]
    out = []
    gone_k = sum(produces_result(s) for s in steps[:index]) if produces_result(removed) else None
    for i, step in enumerate(steps):
        if i == index:
            continue
        if isinstance(removed, Export) and i > index and isinstance(step, (Read, Write)) \
                and step.name == "@" + removed.name and not _exported_between(steps, index, i, removed.name):
            continue
        if gone_k is not None:
            if isinstance(step, UseResult):
                if step.k == gone_k:
                    continue
                step = UseResult(step.k - (step.k > gone_k), step.how)
            elif isinstance(step, Call) and isinstance(step.alpha, tuple):
                k = step.alpha[1]
                step = Call(step.kernel, step.arrays, 0.5 if k == gone_k else ("r", k - (k > gone_k)), step.team)
        out.append(step)
    return tuple(out)


def _exported_between(steps, start: int, stop: int, name: str) -> bool:
    return any(isinstance(s, Export) and s.name == name for s in steps[start + 1:stop])
