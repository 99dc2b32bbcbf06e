"""Profitability: whether a fused group runs as one kernel or as its members apart (KFUSE_PROFIT).

The fuser proves a group safe to fuse; this decides whether fusing pays, per group *signature* (its fused
key, which names the member kernels, aliasing, equal scalars, transforms and unstored Views, plus its size
class: powers of two of its thread indices and bytes). Either choice computes the same values, so a decision
never changes a result, only the time.

- ``off``: every group runs fused.
- ``model``: the cost model (fuser/cost.py) declines a compile that the runs seen so far have not repaid.
- ``measure``: the model first; then, for a group the model lets fuse, its occurrences alternate fused and
  apart (each occurrence runs once, on the program's own data, so kernels like ``A += B`` are safe) until
  each side has ``KFUSE_PROFIT_TRIALS`` timings; the best of each side decides, for this process and, through
  the cache folder (compiler/decisions.py), for later ones. Occurrences the model runs apart count as timings
  of that side.

A ``Book`` (one per runtime) holds the state; the pipeline asks ``choose`` before a group runs and reports a
timed run with ``timed``. Timings come from ``Book.clock`` around the launches alone (kernels are built
before the clock starts; every launch ends with a fence), so tests can inject a clock.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from . import cost

_KEPT = 4096  # signatures remembered in a process; a program whose sizes change every step must not grow forever


@dataclass(frozen=True)
class Choice:
    """How one occurrence of a group runs. ``rule``: what decided ("off", "model", "trial", "measured",
    "remembered"); ``text``: explain()'s words, starting "fused:" or "unfused:" (empty for "off"); ``timed``:
    time this run and report it with ``timed``; ``entry``: the signature's state the timing goes to."""

    fused: bool
    rule: str
    text: str = ""
    timed: bool = False
    entry: object = field(default=None, compare=False, repr=False)


FUSED = Choice(True, "off")


@dataclass
class Entry:
    """One signature's state in this process."""

    seen: int = 0
    fused_s: list = field(default_factory=list)
    apart_s: list = field(default_factory=list)
    decision: Choice | None = None
    looked_up: bool = False  # the cache folder was asked for a decision already
    stored_as: str = ""  # the decision's key in the cache folder (compiler/decisions.py)
    estimate: cost.Estimate | None = None  # once the fused kernel is built, its compile costs nothing more
    fused_ready: bool | None = None  # whether the backend's cache held the fused kernel when first asked


class Book:
    """A runtime's profitability state: an ``Entry`` per group signature, and the clock trials are timed with."""

    def __init__(self):
        self.entries: dict = {}
        self.clock = time.perf_counter

    def entry(self, signature) -> Entry:
        found = self.entries.get(signature)
        if found is None:
            if len(self.entries) >= _KEPT:
                self.entries.clear()
            found = self.entries[signature] = Entry()
        return found


def choose(entry: Entry, mode: str, trials: int, judge) -> Choice:
    """The choice for the next occurrence of ``entry``'s group (counted here). ``judge(runs)``: the cost
    model's (fuse?, reason) after ``runs`` occurrences."""
    entry.seen += 1
    if entry.decision is not None:
        return entry.decision
    trials = max(1, trials)
    fuse, reason = judge(entry.seen)
    if mode == "model" or not fuse:  # measured: a run apart is a timing of that side, while one is missing
        return Choice(fuse, "model", reason, timed=mode == "measure" and len(entry.apart_s) < trials, entry=entry)
    fused = _next_side(entry, trials)
    side = len(entry.fused_s if fused else entry.apart_s) + 1
    return Choice(fused, "trial", f"{'fused' if fused else 'unfused'}: timing trial {side} of {trials} "
                  f"{'fused' if fused else 'apart'}", timed=True, entry=entry)


def waits_for_repayment(choice: Choice) -> bool:
    """Whether ``choice`` is the model keeping a group apart until its compile is repaid (untimed): later occurrences
    run apart too until ``repaid``, so a rerun (kfuse/rerun.py) may repeat it while counting them."""
    return choice.rule == "model" and not choice.fused and not choice.timed and choice.entry is not None \
        and choice.entry.estimate is not None


def repaid(entry: Entry) -> bool:
    """Count one more occurrence of a group the model keeps apart (``waits_for_repayment``); whether the model would
    fuse it at this one (then it is not counted: the ordinary path asks ``choose``, which counts it)."""
    if cost.judge(entry.estimate, entry.seen + 1)[0]:
        return True
    entry.seen += 1
    return False


def settled(choice: Choice) -> bool:
    """Whether every later occurrence gets this choice too (kfuse/rerun.py reuses it without asking): a decision
    made or remembered, fusion without a profitability setting, or the model's yes (its runs only add up)."""
    return not choice.timed and (choice.rule in ("off", "measured", "remembered") or choice.rule == "model"
                                 and choice.fused)


def _next_side(entry: Entry, trials: int) -> bool:
    """Alternate, fused first; once one side has its timings, the other catches up."""
    if len(entry.apart_s) >= trials:
        return True
    if len(entry.fused_s) >= trials:
        return False
    return len(entry.fused_s) <= len(entry.apart_s)


def timed(entry: Entry, fused: bool, seconds: float, trials: int) -> Choice | None:
    """Record one timed occurrence; the decision when this completed the measurement (else None)."""
    (entry.fused_s if fused else entry.apart_s).append(seconds)
    trials = max(1, trials)
    if entry.decision is None and len(entry.fused_s) >= trials and len(entry.apart_s) >= trials:
        entry.decision = decided(min(entry.fused_s), min(entry.apart_s), trials, "measured")
        return entry.decision
    return None


def decided(fused_s: float, apart_s: float, trials: int, rule: str) -> Choice:
    """The faster side (fused on a tie: fewer launches, less memory), in explain()'s words."""
    fuse = fused_s <= apart_s
    if fuse:
        how = f"{apart_s / fused_s:.2f}x faster fused" if fused_s > 0 else "no slower fused"
    else:
        how = f"{fused_s / apart_s:.2f}x slower fused" if apart_s > 0 else "slower fused"
    where = "" if rule == "measured" else "; remembered from an earlier process"
    return Choice(fuse, rule, f"{'fused' if fuse else 'unfused'}: measured {how} (best of {trials} trial(s) each "
                  f"way{where})")
