"""Is a run (fused, traced, threads, small trace) what eager execution of the same case allows?

Every kernel runs the same operations per element in every mode, so every value the host sees must be
bit-identical to eager's. Failing calls add the one allowed difference: eager raises at the failing
call and goes on; a delayed call fails later. Following the runtime's contract:

- a value the host gets is always eager's value (never stale, never partial);
- an error is allowed only where it reports a failure: at a call, a ``DeferredError`` naming (workunit
  and call site) a failing call made so far, or the failing call's own error at once; at a host access
  (read, write, export, result use, the final values), a ``DeferredError`` naming a failing call that
  the accessed data depends on; at the end-of-run flush, one naming any failing call;
- every failing call is reported at least once (unless it read data an earlier failure lost: then it
  may never run, and that earlier failure is the one to report).

"Depends on" (taint) is computed here from the program alone: a failing call taints what it writes
(and its result); a call reading tainted data or a tainted result taints what it writes. Reads and
tainted writes are taken as whole Views (kfuse tracks memory per View, not per element a kernel touches);
values a call computes are compared over the rows its range covers. A call that raised in this run where
eager's did not (it depended on a failure) was not made, as the program was told: what it would have
written, and what later calls compute from that, may then hold any value (it is *excused*); so may a
failed host write's target.
"""
from __future__ import annotations

import re

import numpy as np

from .arrays import Memory
from .kernels import KERNELS
from .program import Call, Export, Fence, Read, Realloc, UseResult, Write
from .runner import ERROR, LAUNCH_SITE, OK, Run

DEFERRED = "DeferredError"
UNAVAILABLE = "Unavailable"


def compare(expected: Run, got: Run) -> list:
    """Every way ``got`` departs from what eager's ``expected`` allows (empty: it agrees)."""
    out: list = []
    walks = []
    for t, steps in enumerate(expected.case.threads):
        where = f"[{got.mode.name}]" + (f" thread {t}" if len(expected.case.threads) > 1 else "")
        walk = _Walk(steps, expected.steps[t], got.steps[t], where, out)
        walk.steps_walk()
        walks.append(walk)
    all_failing = {(w.where, i): name for w in walks for i, name in w.failing.items()}
    flush = got.flush
    if flush[1] == ERROR:
        named = False
        for walk in walks:
            found = walk.named(flush, set(walk.failing))
            walk.reported |= found
            named = named or bool(found)
        if flush[2][0] != DEFERRED or not named:
            out.append(f"[{got.mode.name}] end-of-run flush raised {_show_error(flush)}; only a DeferredError "
                       f"naming a failing call is allowed there (failing calls: {sorted(all_failing.values())})")
    if expected.flush[1] != OK:
        out.append(f"[eager] end-of-run fence raised {_show_error(expected.flush)}")
    for t, walk in enumerate(walks):
        walk.finals_walk(expected.finals[t], got.finals[t])
        for i in sorted(walk.independent - walk.reported):
            out.append(f"{walk.where} step {i} {walk.steps[i]!r}: failed in eager ({_show_error(walk.expected[i])}) "
                       f"but no error of this run named {walk.failing[i]} at {LAUNCH_SITE}")
    return out


class _Walk:
    """One thread's program, walked with both runs' events side by side while following taint."""

    def __init__(self, steps, expected: list, got: list, where: str, out: list):
        self.steps, self.expected, self.got, self.where, self.out = steps, expected, got, where, out
        self.memory = Memory()
        self.cells: dict = {}  # (storage, element) -> frozenset of failing step indices it depends on
        self.excused: set = set()  # (storage, element) whose value this run may not know
        self.result_sources: list = []  # per result ordinal: failing steps it depends on
        self.result_excused: list = []  # per result ordinal: may hold any value
        self.failing: dict = {}  # step index -> workunit name, for calls that failed in eager
        self.independent: set = set()  # failing calls whose inputs depend on no failure: they must be reported
        self.reported: set = set()
        self.index = 0

    # --- taint -----------------------------------------------------------------------------------
    def _sources(self, place, rows=None) -> frozenset:
        found = frozenset()
        for element in place.elements(rows):
            found |= self.cells.get((place.storage, element), frozenset())
        return found

    def _taint(self, place, sources: frozenset, rows=None) -> None:
        if sources:
            for element in place.elements(rows):
                key = (place.storage, element)
                self.cells[key] = self.cells.get(key, frozenset()) | sources

    def _is_excused(self, place) -> bool:
        return any((place.storage, element) in self.excused for element in place.elements())

    def _excuse(self, place, rows=None) -> None:
        self.excused.update((place.storage, element) for element in place.elements(rows))

    # --- errors ----------------------------------------------------------------------------------
    def named(self, event, candidates) -> set:
        """The failing calls among ``candidates`` that a DeferredError ``event`` names (workunit + site)."""
        kind, message = event[2]
        if kind != DEFERRED or LAUNCH_SITE not in message:
            return set()
        return {j for j in candidates if re.search(rf"\b{re.escape(self.failing[j])}\b", message)}

    def _mismatch(self, text: str) -> None:
        i = self.index
        step = self.steps[i] if isinstance(i, int) else i
        self.out.append(f"{self.where} step {i} {step!r}: {text}")

    def _error(self, e, g, allowed: frozenset, what: str) -> set:
        """Check an error event ``g`` (eager had ``e``); returns the failing calls it names."""
        kind, message = g[2]
        if e[1] == ERROR and e[2][0] == kind and kind != DEFERRED:  # raised at once, as eager did
            if isinstance(self.index, int) and self.index in self.failing:
                self.reported.add(self.index)
            return set()
        if kind == UNAVAILABLE:  # an earlier step of this run raised, so its value or alias is missing
            producer = int(message)
            if self.got[producer][1] != ERROR:
                self._mismatch(f"{what}: needs step {producer}, which did not raise, yet it is unavailable")
            return set()
        named = self.named(g, allowed)
        self.reported |= named
        if not named and allowed:
            self._mismatch(f"{what} raised {_show_error(g)} where eager gave {_show(e)}; only a DeferredError naming "
                           f"one of {sorted(self.failing[j] for j in allowed)} at {LAUNCH_SITE} may be raised here")
        elif not named:
            self._mismatch(f"{what} raised {_show_error(g)} where eager gave {_show(e)}; this depends on no failing "
                           "call, so nothing may be raised here")
        return named

    def _observe(self, e, g, allowed: frozenset, what: str, excused: bool = False) -> set:
        """A host observation: eager's value (any value if ``excused``), or an allowed error. Returns the
        failing calls an error names."""
        if g[1] == OK:
            if excused:
                return set()
            if e[1] != OK:
                self._mismatch(f"{what} gave {_show(g)} where eager raised {_show_error(e)}")
            elif not _same(e[2], g[2]):
                self._mismatch(f"{what} differs from eager:\n  eager: {_show(e)}\n  got:   {_show(g)}")
            return set()
        return self._error(e, g, allowed, what)

    # --- the walk --------------------------------------------------------------------------------
    def steps_walk(self) -> None:
        for i, step in enumerate(self.steps):
            self.index = i
            e, g = self.expected[i], self.got[i]
            if e[0] != g[0]:
                self._mismatch(f"event labels differ: {e[0]} vs {g[0]}")
                return
            getattr(self, "_" + type(step).__name__)(i, step, e, g)

    def _Call(self, i: int, step: Call, e, g) -> None:
        kernel = KERNELS[step.kernel]
        places = [self.memory[name] for name in step.arrays]
        rows = min(p.rows for p in places)
        sources = frozenset().union(*(self._sources(p) for p in places))
        excused = any(self._is_excused(p) for p in places)
        if isinstance(step.alpha, tuple):
            sources |= self.result_sources[step.alpha[1]]
            excused |= self.result_excused[step.alpha[1]]
        if e[1] == ERROR and e[2][0] != UNAVAILABLE:
            self.failing[i] = kernel.workunit.__name__
            if not sources:
                self.independent.add(i)
            sources |= {i}
        if g[1] == ERROR:  # unless it failed as in eager, the call was not made (what it writes is excused)
            sources |= self._error(e, g, frozenset(j for j in self.failing if j <= i), "the call")
            excused |= e[1] != ERROR or e[2][0] != g[2][0]
        for param, place in zip(kernel.params, places):
            if param in kernel.writes or param in kernel.opaque:
                self._taint(place, sources)  # kfuse poisons every byte of a View a failing call may write
            if param in kernel.writes and excused:
                self._excuse(place, rows)
        if kernel.op != "for":
            self.result_sources.append(sources)
            self.result_excused.append(excused)

    def _Read(self, i: int, step: Read, e, g) -> None:
        place = self.memory[step.name]
        self._observe(e, g, self._sources(place), f"read {step.name} ({step.how})", self._is_excused(place))

    def _Write(self, i: int, step: Write, e, g) -> None:
        place = self.memory[step.name]
        sources = self._sources(place)
        named = self._observe(e, g, sources, f"host write to {step.name}")
        if g[1] == ERROR:
            self._taint(place, sources | named)
            self._excuse(place)

    def _Export(self, i: int, step: Export, e, g) -> None:
        self._observe(e, g, self._sources(self.memory[step.name]), f"np.asarray({step.name})")
        self.memory.export(step.name)

    def _UseResult(self, i: int, step: UseResult, e, g) -> None:
        self._observe(e, g, self.result_sources[step.k], f"use of result {step.k} ({step.how})",
                      self.result_excused[step.k])

    def _Realloc(self, i: int, step: Realloc, e, g) -> None:
        self._observe(e, g, frozenset(), f"reallocating {step.name}")
        self.memory.realloc(step.name)

    def _Fence(self, i: int, step: Fence, e, g) -> None:
        self._observe(e, g, frozenset(self.failing), "pk.fence()")

    def finals_walk(self, expected: list, got: list) -> None:
        if [e[0] for e in expected] != [g[0] for g in got]:
            self.index = "end"
            self._mismatch(f"final values differ in kind: {[e[0] for e in expected]} vs {[g[0] for g in got]}")
            return
        for e, g in zip(expected, got):
            self.index = "end"
            kind, key = e[0]
            if kind == "result":
                self._observe(e, g, self.result_sources[key], f"final value of result {key}", self.result_excused[key])
            else:
                place = self.memory[key]
                self._observe(e, g, self._sources(place), f"final contents of {key}", self._is_excused(place))


def _same(e, g) -> bool:
    """Exact equality (NaN equal to NaN), with types, dtypes and shapes."""
    if isinstance(e, (list, tuple)):
        return isinstance(g, (list, tuple)) and len(e) == len(g) and all(_same(x, y) for x, y in zip(e, g))
    if isinstance(e, np.ndarray) or isinstance(g, np.ndarray):
        e_arr, g_arr = np.asarray(e), np.asarray(g)
        return e_arr.dtype == g_arr.dtype and e_arr.shape == g_arr.shape and \
            bool(np.array_equal(e_arr, g_arr, equal_nan=e_arr.dtype.kind == "f"))
    if type(e) is not type(g):
        return False
    return bool(e == g) or (e != e and g != g)


def _show(event) -> str:
    if event[1] != OK:
        return _show_error(event)
    text = " ".join(repr(event[2]).split())
    return text if len(text) < 240 else text[:240] + "..."


def _show_error(event) -> str:
    kind, message = event[2]
    return f"{kind}({' | '.join(message.strip().splitlines()[:2])!r})"
