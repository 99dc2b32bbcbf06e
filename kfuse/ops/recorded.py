"""The steps of array operations recorded since the runtime last ran anything (kfuse/ops/lazy.py), and the
look-up of their group's analysis.

A loop body records the same steps over the same Views (``view[1:-1]`` is one View, views.py), or over new
arrays laid out alike, each time. Which steps one kernel can run and what that kernel takes (kfuse/ops/group.py)
depend only on each step's workunit and on how its Views lie against the others', so that analysis is kept per
sequence of steps (``_State``) and looked up by each next step's pattern (``Recorded._pattern``); it runs only
the first time a sequence is seen.
"""
from __future__ import annotations

from ..future import Future
from ..views import View, place
from .group import Group


class Step:
    """One recorded operation; a whole-array reduction has no target and delivers ``future`` instead."""

    __slots__ = ("wu", "target", "operands", "fresh", "future")

    def __init__(self, wu, target: View | None, operands: tuple, fresh: bool = False, future: Future | None = None):
        self.wu, self.target, self.operands, self.fresh, self.future = wu, target, operands, fresh, future


class Recorded:
    """The steps of the open group, with what looking their analysis up needs."""

    def __init__(self):
        self.steps: list = []
        self.grids: list = []  # per step, whether it is 2-D: to replay the analysis (no Views kept: stores.py counts)
        self.made: dict = {}  # id(View) -> the step whose new result it is
        self.seen: dict = {}  # id(View) -> its number among the group's other Views (``_pattern``)
        self.owners: dict = {}  # id(array owning memory) -> its number among those of the group's Views
        self.new_seen, self.new_owners = {}, {}  # the Views and owners the last pattern numbered first (kept if
        # its step joins)
        self.first_new = None  # uid of the group's first new result
        self.state = _start  # None: a step was not one ``_State`` can stand for
        self.group = None  # the analysis (Group), while one is kept

    def join(self, step: Step, views: list, grid: bool) -> bool:
        """Append ``step`` if one kernel can run it after the steps so far (else False, and nothing changes)."""
        state, pattern = self.state, None
        if state is not None:
            pattern = self._pattern(step)
            found = state.next.get(pattern) if pattern is not None else None
            if found is _APART:
                return False
            if found is not None:
                if self.group is not None:
                    self.group.add(step, views, grid)
                self._push(step, grid, found)
                return True
        group = self.analysed()
        if self.steps and not group.takes(step, views, grid):
            if pattern is not None and _State.room():
                state.next[pattern] = _APART
            return False
        group.add(step, views, grid)
        found = None
        if pattern is not None and _State.room():
            found = state.next[pattern] = _State()
        self._push(step, grid, found)
        return True

    def _push(self, step: Step, grid: bool, state) -> None:
        if step.fresh:
            self.made[id(step.target)] = len(self.steps)
            if self.first_new is None:
                self.first_new = step.target.uid
        if state is not None:
            if self.new_seen:
                self.seen.update(self.new_seen)
            if self.new_owners:
                self.owners.update(self.new_owners)
        self.steps.append(step)
        self.grids.append(grid)
        self.state = state

    def _pattern(self, step: Step):
        """What the analysis of ``step`` depends on, given the steps so far: its workunit, and per operand and
        target a result of this group by its step, a View seen in the group by its number, a new one by where
        it lies (``_where``), or a scalar; a new target by its dtype. None where a View over memory newer than the
        group's first result takes part (``View.born``: it may lie in that result's memory, which a later run of
        the same steps does not share) or one whose memory's owner does not own it."""
        if self.new_seen:
            self.new_seen.clear()
        if self.new_owners:
            self.new_owners.clear()
        target = step.target
        if target is None:
            code = None
        elif id(target) in self.made:
            code = -1 - self.made[id(target)]
        elif step.fresh:
            code = target.dtype
        else:
            code = self._where(target)
            if code is _UNKNOWN:
                return None
        codes = [step.wu, code]
        for x in step.operands:
            if type(x) is View:
                code = self._where(x)
                if code is _UNKNOWN:
                    return None
                codes.append(code)
            else:
                codes.append(None)
        return tuple(codes)

    def _where(self, view: View):
        """``view``'s part of a pattern: -1 - k for step k's new result; its number if the group has it already;
        else (its owner's number in the group, (its offset there, shape, strides, dtype)), which fix how it
        overlaps every other View of the group (Views of different owners share no byte), the group's new
        results excepted (none reaches a View older than the first of them). The Views and owners a step numbers
        first are kept apart (``new_seen``, ``new_owners``) until it joins."""
        k = self.made.get(id(view))
        if k is not None:
            return -1 - k
        newest = self.first_new
        if newest is not None and view.born >= newest:  # (a slice or broadcast of a View lies in that View's memory:
            return _UNKNOWN                              # one made before the group's results lies in none of theirs)
        n = self.seen.get(id(view))
        if n is None:
            n = self.new_seen.get(id(view))
        if n is not None:
            return n
        where = place(view)
        if where is False:
            return _UNKNOWN
        owner, lies = where
        owners, new_owners = self.owners, self.new_owners
        r = owners.get(owner)
        if r is None:
            r = new_owners.get(owner)
            if r is None:
                r = new_owners[owner] = len(owners) + len(new_owners)
        self.new_seen[id(view)] = len(self.seen) + len(self.new_seen)
        return r, lies

    def analysed(self) -> Group:
        """The group's analysis, made by replaying the steps if none is kept."""
        if self.group is None:
            self.group = Group()
            for step, grid in zip(self.steps, self.grids):
                self.group.add(step, [x for x in step.operands if type(x) is View], grid)
        return self.group

    def summary(self) -> "Summary":
        """What running the group needs of its analysis: kept with its sequence, made once per sequence."""
        state = self.state
        if state is None:
            return summary_of(self.group)
        if state.summary is None:
            state.summary = summary_of(self.analysed())
        return state.summary


class Summary:
    """What running a group needs of its analysis (kfuse/ops/group.py): its form and whether it is 2-D (which
    with the store pattern pick the plan, kfuse/ops/plans.py), where its inputs and scalars are among the steps'
    operands ((step, position) per number), and per step the references to its target among the steps'
    operands and the steps writing that target (kfuse/ops/stores.py); for explain(), the steps' names and their
    one group (lists shared by the records of every run of these steps: records are read, never changed)."""

    __slots__ = ("form", "grid", "inputs", "scalars", "held", "written", "names", "groups")

    def __init__(self, form, grid: bool, inputs: tuple, scalars: tuple, held: tuple, written: tuple, names: list):
        self.form, self.grid, self.inputs, self.scalars, self.held, self.written = \
            form, grid, inputs, scalars, held, written
        self.names, self.groups = names, [list(range(len(names)))]


def summary_of(group: Group) -> Summary:
    """``group``'s Summary."""
    targets = [step.target for step in group.steps]
    scalars = [None] * len(group.scalars)
    for k, codes in enumerate(group.codes):
        for position, (kind, n) in enumerate(codes):
            if kind == "s":
                scalars[n] = (k, position)
    return Summary(group.form, group.grid, tuple(group.inputs), tuple(scalars),
                   tuple(0 if t is None else group.held.get(id(t), 0) for t in targets),
                   tuple(0 if t is None else group.targets[id(t)] for t in targets),
                   [step.wu.__name__ for step in group.steps])


class _State:
    """A sequence of steps seen before: its ``Summary`` (once a group of these steps has run), and per next
    step's pattern (``Recorded._pattern``) the state it leads to, or ``_APART`` where that step cannot join."""

    __slots__ = ("summary", "next")
    count = 0  # states made since the table was last started anew
    LIMIT = 1 << 12  # Views' uids never recur, so patterns of dropped Views pile up: start anew past this

    def __init__(self):
        self.summary, self.next = None, {}
        _State.count += 1

    @staticmethod
    def room() -> bool:
        global _start
        if _State.count >= _State.LIMIT:
            _State.count = 0
            _start = _State()
            return False
        return True


_APART = object()
_UNKNOWN = object()  # a View no pattern can stand for
_start = _State()
