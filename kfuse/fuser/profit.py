"""Profitability: whether a fused group runs as one kernel or as its members apart (KFUSE_PROFIT).

The fuser proves a group safe to fuse; this decides whether fusing pays, per group *signature* (its fused
key, which names the member kernels, aliasing, equal scalars, transforms and unstored Views, plus its size
class: powers of two of its thread indices and bytes). Either choice computes the same values, so a decision
never changes a result, only the time.

- ``off``: every group runs fused.
- ``model``: the cost model (fuser/cost.py) declines a compile that the runs seen so far have not repaid.
- ``measure``: the model first; then, for a group the model lets fuse, its occurrences run fused and apart in the order
  fused, apart, apart, fused, apart, fused, ... (``first_side_next``; each occurrence runs once, on the program's own
  data, so kernels like ``A += B`` are safe) until each side has ``KFUSE_PROFIT_TRIALS`` timings (more while the two are
  close or their medians disagree with their best: ``timings_wanted``); the best of each side decides, for this process
  and, through the cache folder (compiler/decisions.py), for later ones, which time one more occurrence each way before
  deciding again (``recall``). Occurrences the model runs apart count as timings of that side. Two times per side: the
  wall time of its launches, which counts the launches fusion saves, and the kernels' own time (timed in C++ around each
  launch and its fence, where the backend does). Fused wins when it is no slower by the first and at most
  ``KERNEL_SLACK`` slower by the second: the launches saved cost the same at every size, while a slower kernel loses
  more the more data the group sweeps, so a group whose kernel is slower must not be fused on the strength of launch
  savings at one size.

A ``Book`` (one per runtime) holds the state; the pipeline asks ``choose`` before a group runs and reports a
timed run with ``timed``. Timings come from ``Book.clock`` around the launches alone (kernels are built
before the clock starts; every launch ends with a fence), so tests can inject a clock.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field

from . import cost

_KEPT = 4096  # signatures remembered in a process; a program whose sizes change every step must not grow forever
CLOSE = 1.05  # a measurement's two best times this close: more timings (timings_wanted)
MORE = 3
RECHECK = 2  # timings each way of a group whose first ones an earlier process kept (``recall``)
KERNEL_SLACK = 1.05  # the fused kernel may take this much longer than its members' (the timer's spread between
#                      best-of-trials runs; issue 16 allows a group no lower than 0.95x)


@dataclass(frozen=True)
class Choice:
    """How one occurrence of a group runs. ``rule``: what decided ("off", "model", "trial", "measured",
    "rechecked": measured, starting from an earlier process's best times); ``text``: explain()'s words, starting
    "fused:" or "unfused:" (empty for "off"); ``timed``: time this run and report it with ``timed``; ``entry``: the
    signature's state the timing goes to."""

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
    fused_k: list = field(default_factory=list)  # kernel seconds of each timing (None: the backend has no timer)
    apart_k: list = field(default_factory=list)
    decision: Choice | None = None
    looked_up: bool = False  # the cache folder was asked for a decision already
    stored_as: str = ""  # the decision's key in the cache folder (compiler/decisions.py)
    estimate: cost.Estimate | None = None  # once the fused kernel is built, its compile costs nothing more
    fused_ready: bool | None = None  # whether the backend's cache held the fused kernel when first asked
    recalled: bool = False  # its first timing each way is an earlier process's best (``recall``)


class Book:
    """A runtime's profitability state: an ``Entry`` per group signature, the clock trials are timed with, and
    ``kernel_time(kernels)``: the kernel seconds of the last launch of each of ``kernels``, summed (None where a
    kernel has no timer of its own)."""

    def __init__(self):
        self.entries: dict = {}
        self.clock = time.perf_counter
        self.kernel_time = kernel_time

    def entry(self, signature) -> Entry:
        found = self.entries.get(signature)
        if found is None:
            if len(self.entries) >= _KEPT:
                self.entries.clear()
            found = self.entries[signature] = Entry()
        return found


def kernel_time(kernels) -> float | None:
    """The C++-timed seconds of the kernels' last launches (kfuse/runtime/launch.py ``last_seconds``), summed."""
    total = 0.0
    for kernel in kernels:
        seconds = getattr(kernel, "last_seconds", None)
        if seconds is None:
            return None
        total += seconds
    return total


def recall(entry: Entry, fused_s: float, apart_s: float, fused_k: float | None, apart_k: float | None) -> None:
    """Start ``entry`` from a decision an earlier process kept (its best times each way, compiler/decisions.py): they
    count as one timing each way, and this process times ``RECHECK`` - 1 more of each before deciding again, each
    side keeping its best. A decision measured while the machine was disturbed (a demo run just after the test
    suite on this 2-core machine measured the paper's add+mul "2.73x slower fused", 1.4-1.5x faster fused
    otherwise) would otherwise keep its group apart in every later process; timed again, the inflated side's next
    timing replaces it."""
    entry.fused_s.append(fused_s)
    entry.apart_s.append(apart_s)
    entry.fused_k.append(fused_k)
    entry.apart_k.append(apart_k)
    entry.recalled = True


def _trials(entry: Entry, trials: int) -> int:
    """Timings each way ``entry``'s measurement takes at least: ``trials``, or ``RECHECK`` for one ``recall``ed."""
    return RECHECK if entry.recalled else max(1, trials)


def choose(entry: Entry, mode: str, trials: int, judge) -> Choice:
    """The choice for the next occurrence of ``entry``'s group (counted here). ``judge(runs)``: the cost
    model's (fuse?, reason) after ``runs`` occurrences."""
    entry.seen += 1
    if entry.decision is not None:
        return entry.decision
    trials = _trials(entry, trials)
    fuse, reason = judge(entry.seen)
    if mode == "model" or not fuse:  # measured: a run apart is a timing of that side, while one is missing
        return Choice(fuse, "model", reason, timed=mode == "measure" and len(entry.apart_s) < trials, entry=entry)
    wanted = timings_wanted(entry.fused_s, entry.apart_s, trials)
    fused = first_side_next(len(entry.fused_s), len(entry.apart_s), wanted)
    side = len(entry.fused_s if fused else entry.apart_s) + 1
    return Choice(fused, "trial", f"{'fused' if fused else 'unfused'}: timing trial {side} of {wanted} "
                  f"{'fused' if fused else 'apart'}", timed=True, entry=entry)


def timings_wanted(first: list, second: list, trials: int) -> int:
    """Timings each side of a measurement needs: ``trials``, and while the two sides' best times are within
    ``CLOSE`` of each other, or their medians rank them the other way round, up to ``MORE`` times as many (deciding
    as soon as one pulls clear). A group's or a flush's time moves by 10-20% from one occurrence to the next
    (jacobi_1d's repeated flush, 2 threads: 13.8-20.4 ms; on a lent host's 16 cores a tiny subject's runs spread
    0.3-0.5 ms around the same median), so three each cannot reliably tell differences of a few percent, and one
    lucky timing can make a side's best; a close or split call costs a few more occurrences, each run one of the
    two right ways."""
    trials = max(1, trials)
    if min(len(first), len(second)) < trials:
        return trials
    a, b = min(first), min(second)
    clear = max(a, b) > CLOSE * min(a, b) and (a < b) == (statistics.median(first) < statistics.median(second))
    return trials if clear else MORE * trials


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
    made (or made again from an earlier process's times), fusion without a profitability setting, or the model's yes
    (its runs only add up)."""
    return not choice.timed and (choice.rule in ("off", "measured", "rechecked") or choice.rule == "model"
                                 and choice.fused)


def first_side_next(first: int, second: int, trials: int) -> bool:
    """Whether a measurement with ``first`` and ``second`` timings of its two sides times the first side next: in the
    Thue-Morse order first, second, second, first, second, first, first, second, ...; once one side has its ``trials``,
    the other catches up. Not plain alternation: a group that occurs twice per step of a loop at steps of different cost
    (ExaMiniMD's thermo steps; kernel times change from step to step) would give each side one kind of step only, and
    the best of each side would compare the cheap step on one side with the dear one on the other; in this order each
    side meets both. And with three trials each (the default) the first side has both the first and the last timing: a
    process's runs get faster as it warms up (jacobi_1d_statements' repeated flush: 548, 554, 505, 492, 488, 468 us in
    order), so the side timed last had the best time by the trend alone, and the earlier order (first, second, second,
    first, first, second) ran that flush untraced, 1.04x eager, where rerun runs it at 1.0x. A trend now favours the
    first side (fused for a group, as a tie does; untraced for a repeated flush, kfuse/untraced.py), by at most the
    trend between two timings. (Comparing each second-side timing with the first side's interpolated around it would
    cancel a trend but not an alternation: with steps of two costs, the median compared a dear step with cheap ones.)"""
    if second >= trials:
        return True
    if first >= trials:
        return False
    return bin(first + second).count("1") % 2 == 0


def timed(entry: Entry, fused: bool, seconds: float, trials: int, kernel_seconds: float | None = None) -> Choice | None:
    """Record one timed occurrence (``kernel_seconds``: its kernels' own time, if known); the decision when this
    completed the measurement (else None)."""
    (entry.fused_s if fused else entry.apart_s).append(seconds)
    (entry.fused_k if fused else entry.apart_k).append(kernel_seconds)
    wanted = timings_wanted(entry.fused_s, entry.apart_s, _trials(entry, trials))
    if entry.decision is None and len(entry.fused_s) >= wanted and len(entry.apart_s) >= wanted:
        entry.decision = decided(min(entry.fused_s), min(entry.apart_s), min(len(entry.fused_s), len(entry.apart_s)),
                                 "rechecked" if entry.recalled else "measured", *best_kernel_times(entry))
        return entry.decision
    return None


def best_kernel_times(entry: Entry) -> tuple:
    """(fused, apart): the least kernel seconds of each side's timings, None where one of them was not timed."""
    if None in entry.fused_k or None in entry.apart_k or not entry.fused_k or not entry.apart_k:
        return None, None
    return min(entry.fused_k), min(entry.apart_k)


def decided(fused_s: float, apart_s: float, trials: int, rule: str, fused_k: float | None = None,
            apart_k: float | None = None) -> Choice:
    """Fused when no slower in wall time (a tie fuses: fewer launches, less memory) and, where kernel times are
    known, at most ``KERNEL_SLACK`` slower in them; in explain()'s words."""
    fuse = fused_s <= apart_s
    if fuse:
        how = f"{apart_s / fused_s:.2f}x faster fused" if fused_s > 0 else "no slower fused"
    else:
        how = f"{fused_s / apart_s:.2f}x slower fused" if apart_s > 0 else "slower fused"
    kernel_slower = fused_k is not None and apart_k is not None and fused_k > KERNEL_SLACK * apart_k
    if fuse and kernel_slower:
        fuse = False
        how = (f"{fused_k / apart_k:.2f}x slower fused in kernel time, though {how} with the launches (the "
               f"launches saved do not grow with the data)" if apart_k > 0 else "slower fused in kernel time")
    where = "; one each way remembered from an earlier process" if rule == "rechecked" else ""
    return Choice(fuse, rule, f"{'fused' if fuse else 'unfused'}: measured {how} (best of {trials} trial(s) each "
                  f"way{where})")
