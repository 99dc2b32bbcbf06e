"""``pk.explain()``: a readable account of the last flushes — partitions, groups, and why groups split."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class FlushRecord:
    number: int
    call_names: list
    groups: list
    boundaries: list
    analysis_seconds: float
    how: str  # "replayed" (fuser/replay.py), "cached" (plan found by graph) or "" (planned)
    fused: bool
    kernels: dict = field(default_factory=dict)  # first call of a group -> the fused kernel it ran as
    notes: list = field(default_factory=list)  # failures and fall-backs met while running the groups
    unstored: dict = field(default_factory=dict)  # first call of a group -> its arrays never stored (scratch)
    choices: dict = field(default_factory=dict)  # first call of a group -> what decided fused or apart (profit.py)
    parts: dict = field(default_factory=dict)  # first call of a horizontal group -> its calls per part
    provisional: set = field(default_factory=set)  # first calls of groups whose run decides nothing yet (a timing
    # trial, or apart only until the fused kernel's compile is repaid)
    positions: list | None = None  # each call's place among the program's kernel calls (Runtime.calls_made; None
    # where unknown): a partition's calls need not be the program's next ones in a row, since a flush runs only what
    # the host access depends on (kfuse/bench/measure.py pairs them with the same calls eager)

    @property
    def fused_names(self) -> list:
        """The fused kernels launched, in order."""
        return list(self.kernels.values())

    def apart(self, members: list) -> bool:
        """Whether a group ran as its members apart by a profitability decision (fuser/profit.py)."""
        return len(members) > 1 and self.choices.get(members[0], "").startswith("unfused")

    def launches(self) -> int:
        return sum(len(g) if self.apart(g) else 1 for g in self.groups)

    def text(self) -> str:
        head = (f"flush #{self.number}: {len(self.call_names)} call(s) -> {self.launches()} kernel launch(es)"
                f"{'' if self.fused else ' (fusion off: traced only)'}; analysis "
                f"{self.analysis_seconds * 1e3:.3f} ms{_HOW[self.how]}")
        lines = [head]
        reasons = dict(self.boundaries)
        for g, members in enumerate(self.groups):
            if g and members[0] in reasons:
                lines.append(f"  | split before call {members[0]} ({self.call_names[members[0]]}): "
                             f"{reasons[members[0]]}")
            names = " + ".join(self.call_names[i] for i in members)
            choice = self.choices.get(members[0], "")
            parts = self.parts.get(members[0])
            across = f" horizontally, {len(parts)} ranges" if parts else ""
            kind = ("single call" if len(members) == 1 else f"{len(members)} calls run apart" if self.apart(members)
                    else f"fused {len(members)} calls{across}")
            unstored = self.unstored.get(members[0])
            scratch = f"; {unstored} array(s) nothing reads afterwards never stored" if unstored else ""
            because = f"; {choice}" if choice else ""
            lines.append(f"  group {g + 1}: {names}  [{kind}; calls {calls_text(members)}{scratch}{because}]")
        lines += [f"  ! {note}" for note in self.notes]
        return "\n".join(lines)


def calls_text(members) -> str:
    """"3..7" for a run of calls, "3, 4, 6" where a group took later calls ahead of others (fuser/planner.py)."""
    if members[-1] - members[0] == len(members) - 1:
        return f"{members[0]}..{members[-1]}"
    return ", ".join(map(str, members))


_HOW = {"replayed": " (replayed)", "cached": " (plan cached)", "": "",
        "rerun": " (rerun: its calls matched a kept flush's, so they were not traced)",
        "untraced": " (run untraced: each call ran as it was made, a repetition of a kept flush)"}


def record(rt, calls, plan, seconds: float, how: str, fused: bool) -> FlushRecord:
    """Keep the account of one flush in ``rt`` (its last few; all of them in ``rt.record_sink`` if set)."""
    rt.flush_count += 1
    rec = FlushRecord(rt.flush_count, [c.prepared.name for c in calls], [list(g) for g in plan.groups],
                      list(plan.boundaries), seconds, how, fused,
                      parts={plan.groups[n][0]: sizes for n, sizes in plan.parts.items()},
                      positions=[c.position for c in calls])
    rt.records.append(rec)
    if rt.record_sink is not None:
        rt.record_sink.append(rec)
    return rec


def rerun(rt, kept: FlushRecord, positions: list) -> FlushRecord:
    """The account of a flush rerun from ``kept``, the record of the flush it repeats (kfuse/rerun.py), whose calls
    were the program's ``positions``. It shares ``kept``'s tables: a record is complete once its flush ran, and
    nothing changes them after (a rerun's own notes are its own)."""
    rt.flush_count += 1
    rec = FlushRecord(rt.flush_count, kept.call_names, kept.groups, kept.boundaries, 0.0, "rerun", kept.fused,
                      kept.kernels, [], kept.unstored, kept.choices, kept.parts, positions=positions)
    rt.records.append(rec)
    if rt.record_sink is not None:
        rt.record_sink.append(rec)
    return rec


def record_operations(rt, names: list, groups: list, unstored: dict, seconds: float) -> None:
    """The account of array operations run at once as kernels of their own (kfuse/ops/lazy.py): nothing else was
    pending, so no partition was analysed."""
    rt.flush_count += 1
    rec = FlushRecord(rt.flush_count, names, groups, [], seconds, "", True, unstored=unstored,
                      notes=["array operations run at once: nothing else was pending"])
    rt.records.append(rec)
    if rt.record_sink is not None:
        rt.record_sink.append(rec)


def report(rt, last: int | None = None) -> str:
    recs = list(rt.records)[-last:] if last else list(rt.records)
    if not recs:
        return "kfuse: no flushes yet (is fusion enabled? pk.enable_fusion())"
    return "\n".join(r.text() for r in recs)


def summary(records: list) -> str:
    """What a whole run's flushes did: each group formed (by its calls' names) and each split reason, counted;
    ``python -m kfuse run --explain`` prints it at the end of a program."""
    groups, apart, splits = Counter(), Counter(), Counter()
    calls = launches = 0
    for rec in records:
        calls += len(rec.call_names)
        launches += rec.launches()
        for members in rec.groups:
            (apart if rec.apart(members) else groups)[" + ".join(rec.call_names[i] for i in members)] += 1
        splits.update(reason.kind.value for _, reason in rec.boundaries)
    lines = [f"kfuse: {len(records)} flushes, {calls} calls -> {launches} kernel launches"]
    fused = [(n, g) for g, n in groups.most_common() if " + " in g]
    lines.append("  fused groups (times formed):" if fused else "  no fused groups")
    lines += [f"    {n:6d}x  {g}" for n, g in fused]
    if apart:
        lines.append("  groups run apart, not worth fusing (times):")
        lines += [f"    {n:6d}x  {g}" for g, n in apart.most_common()]
    alone = [(n, g) for g, n in groups.most_common() if " + " not in g]
    if alone:
        lines.append("  calls run alone: " + ", ".join(f"{g} ({n}x)" for n, g in alone))
    if splits:
        lines.append("  splits (times): " + "; ".join(f"{r} ({n}x)" for r, n in splits.most_common()))
    return "\n".join(lines)
