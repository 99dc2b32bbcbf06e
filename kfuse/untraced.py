"""Calls not worth tracing: a kernel whose calls keep running alone pays for tracing and gets nothing back.

After each flush with fusion on, every specialisation in it learns whether its calls ran fused with others. One whose
last ``STREAK`` calls, over ``FLUSHES`` flushes at least, ran alone -- each a group of one call, or in a group whose
members ran apart by a settled profitability decision -- with none fused since, runs untraced for its next ``backoff``
calls, or ``EVIDENCE`` times the calls that ran alone in that flush if more (up to ``MAX_BACKOFF``): at once, as with
fusion off, whenever nothing is pending (no trace entry, no recorded array operation, no call matched by a rerun), which
is all an eager call needs to compute what the trace would. Then it is traced again, to see whether it fuses now.
Each streak doubles the backoff; a fused call resets it. So a kernel that never fuses costs about its eager call,
and one that starts fusing later misses fusion for at most ``MAX_BACKOFF`` of its calls. The evidence counts
because a check is dear: once one call is traced, every later call waits in the trace too, so a loop of 1,000
lone calls read once is traced whole (about 2.5 times its eager time); untraced for 64 times as many calls, such
checks cost about 2% of its time.
An untraced reduction or scan returns a Future whose value is known, as a traced one would (once run).
Two flushes, because the second of a repeated partition is kept as a template (kfuse/rerun.py) and judged whole
(below), which is cheaper than these streaks: its repetitions are compared with the template call by call, with no
binding; a flush so judged counts for no streak (``judged``).

A repeated flush (kfuse/rerun.py) is judged whole, by measurement (``KFUSE_PROFIT=measure``): its repetitions are rerun
(calls counted, the kept fused kernels launched at the host access) or run untraced (each call launched at once, as it
is made), in the order untraced, rerun, rerun, untraced, ... (``runs_untraced``), each timed from the first call to the
end of its launches, until each side has ``KFUSE_PROFIT_TRIALS`` timings, more when the two are close (``Trial``,
fuser/profit.py ``timings_wanted``). A flush that runs no kernel fused is decided untraced at once (``lone``). For the
others the best of each side decides, rerun only by a clear lead (``timed``): a loop of tiny kernels, where counting
calls and checking Views costs more than fusing saves, then runs as with fusion off, each repetition the way its
untraced timings ran (each call compared with the template's step and launched at once with the kept arguments, no
binding), for ``MAX_BACKOFF`` calls, after which the flush is timed again (``Trial.left``). Not by the streaks above: a
streak's call is bound as an eager one is, which the trial did not time (jacobi_1d_statements, 40 lone stencil calls a
run, 2 threads: 1.08x eager that way, where the trial had measured the template's way faster than rerun).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .fuser.profit import CLOSE, MORE, first_side_next, timings_wanted

STREAK = 3
FLUSHES = 2
FIRST_BACKOFF = 16
EVIDENCE = 64
MAX_BACKOFF = 1 << 16


@dataclass
class Streak:
    alone: int = 0  # calls of this specialisation that ran alone since one last ran fused
    flushes: int = 0  # the flushes they ran in
    backoff: int = FIRST_BACKOFF
    left: int = 0  # calls still to run untraced (kfuse/dispatch.py counts them down)


def after_flush(streaks: dict, calls: list, record, judged: bool = False) -> None:
    """Tell each specialisation of a flush (``record``: its explain record) whether its calls ran fused;
    ``streaks``: the runtime's, per specialisation (for the transform set in force, engine.Runtime.transforms).
    ``judged``: the flush was kept as a template timed against running untraced (kfuse/rerun.py), whose trial
    decides for its lone calls instead."""
    fused_ones, alone = set(), {}  # alone: specialisation -> its calls that ran alone
    for members in record.groups:
        if members[0] in record.provisional:
            continue  # a timing trial, or apart only until a compile is repaid: no evidence either way
        fused = len(members) > 1 and not record.apart(members) and members[0] in record.kernels
        for i in members:
            prepared = calls[i].prepared
            if fused:
                fused_ones.add(prepared)
            alone[prepared] = alone.get(prepared, 0) + (not fused)
    for prepared, count in alone.items():
        streak = _streak(streaks, prepared)
        if prepared in fused_ones:
            streak.alone, streak.flushes, streak.backoff = 0, 0, FIRST_BACKOFF
            continue
        if judged:
            continue
        streak.alone += count
        streak.flushes += 1
        if streak.alone >= STREAK and streak.flushes >= FLUSHES:
            streak.left = min(MAX_BACKOFF, max(streak.backoff, EVIDENCE * streak.alone))
            streak.alone, streak.flushes, streak.backoff = 0, 0, min(2 * streak.backoff, MAX_BACKOFF)


@dataclass
class Trial:
    """A repeated flush's timings rerun (``traced_s``) and untraced (``untraced_s``), the decision once made
    (``untraced``: True, False; None while timing), and decided untraced, the repetitions left before it is timed
    again (``left``)."""

    traced_s: list = field(default_factory=list)
    untraced_s: list = field(default_factory=list)
    untraced: bool | None = None
    left: int = 0
    settled: bool = False  # decided untraced without timings, for good (``lone``)


def lone(trial: Trial) -> str:
    """Decide a flush none of whose kernels runs fused untraced, for good; explain()'s words. Its rerun would launch
    the same kernels one by one, only later, after counting the calls: all it can save is binding, which an untraced
    repetition skips too (jacobi_1d_statements, 40 stencil calls a run, forced each way, 1 thread here: the same
    median, 240-241 us). Timing the two costs their timings and lets noise pick either, for 65,536 calls."""
    trial.untraced, trial.settled = True, True
    return "run untraced: none of its kernels runs fused, so tracing its calls could only cost"


def ran_untraced(trial: Trial) -> None:
    """One repetition of a flush decided untraced ran; after the last of ``left``, the flush is timed again (one
    ``settled`` never is)."""
    trial.left -= 1
    if trial.left <= 0 and not trial.settled:
        trial.traced_s.clear()
        trial.untraced_s.clear()
        trial.untraced = None


def _streak(streaks: dict, prepared) -> Streak:
    found = streaks.get(prepared)
    if found is None:
        found = streaks[prepared] = Streak()
    return found


def runs_untraced(trial: Trial, trials: int) -> bool:
    """Whether the next repetition runs untraced: decided so, or an untraced timing in the order untraced, rerun,
    rerun, untraced, rerun, untraced (fuser/profit.py ``first_side_next``, untraced the first side). Untraced first,
    so that a trend while timing favours it: it costs what eager calls cost, while a rerun of lone kernels gains
    little and in the bench's runs cost more (jacobi_1d_statements, 2 threads: 0.87-0.88 of eager end to end where
    the trial chose rerun, 0.93-0.98 untraced); a flush that gains by its fused kernels gains more than a trend."""
    if trial.untraced is not None:
        return trial.untraced
    wanted = timings_wanted(trial.untraced_s, trial.traced_s, trials)
    return len(trial.untraced_s) < wanted and first_side_next(len(trial.untraced_s), len(trial.traced_s), wanted)


def timed(trial: Trial, untraced: bool, seconds: float, trials: int, steps: int = 1) -> str | None:
    """Record one timed repetition of a flush of ``steps`` calls; explain()'s words for the decision when this one
    completed the timings. Rerun only when its best time beats the untraced one's by more than ``CLOSE``: within
    that the timings cannot tell the two apart (a repetition's time moves by 10-20%), and the sides are not alike
    when wrong: untraced costs what eager calls cost, while a rerun picked by noise can cost far more (mvt_statements
    on a lent host's 16 cores: rerun 0.865 of eager end to end, untraced 0.94-0.98; a rerun over new Views checks
    each for escapes), so a near tie goes untraced."""
    side = trial.untraced_s if untraced else trial.traced_s
    if trial.untraced is None and len(side) < max(1, trials) * MORE:
        side.append(seconds)
    wanted = timings_wanted(trial.untraced_s, trial.traced_s, trials)
    if trial.untraced is not None or min(len(trial.traced_s), len(trial.untraced_s)) < wanted:
        return None
    traced, alone = min(trial.traced_s), min(trial.untraced_s)
    trial.untraced = alone <= CLOSE * traced
    if trial.untraced:
        trial.left = max(1, MAX_BACKOFF // max(1, steps))
        how = (f"{traced / alone:.2f}x faster than" if alone < traced else
               f"within {100 * (CLOSE - 1):.0f}% of")
        return (f"unfused: run untraced, measured {how} tracing and fusing (best of {len(trial.untraced_s)} "
                f"repetition(s) each way)")
    return None
