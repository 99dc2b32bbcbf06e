"""The open group of recorded operations (kfuse/ops/lazy.py): which steps may join it, and its kernel's operands.

A step joins where thread ``i`` of one kernel may run the group's steps in order: every pair of accesses to
overlapping memory is to the same elements (``elements``) as the same dtype. Contiguous Views are indexed flat,
whatever their rank; a strided 2-D View makes the group two-dimensional (``grid``: every View of one shape,
indexed ``[i][j]``). As a step joins, its operands are coded as the generated kernel takes them
(kfuse/ops/expressions.py: input View n, the value of step k, scalar n), the references the group holds are
counted, and the group's ``form`` (its steps' workunits, codes, dtypes and which earlier step wrote the same
elements) is interned as a number: running a group then asks only the reference counts that decide the stores
(kfuse/ops/stores.py), and looks up what to launch by form (kfuse/ops/plans.py).
"""
from __future__ import annotations

import itertools

from ..views import View
from . import expressions

_FORMS: dict = {}  # (form so far, step's part) -> form number
_MAX_FORMS = 1 << 16  # past that, the table starts anew; numbers are never given twice (plans are kept by number)
_numbers = itertools.count()


def elements(view: View) -> tuple:
    """Equal for two Views of one shape (or two contiguous ones of one size) exactly when element ``i`` of one is
    element ``i`` of the other: a contiguous View's bounds, a strided one's bounds and strides."""
    return view.bounds if view.storage == "right" else (view.bounds, view.strides)


class Group:
    """Steps one kernel computes, with their operands coded."""

    def __init__(self):
        self.steps: list = []
        self.size = self.shape = None  # every step's elements; the shape all its Views share (None: several)
        self.grid = False  # indexed [i][j]: one of its Views is strided 2-D
        self.open = True  # False after a reduction or a step no kernel inlines
        self.rows = None  # after a row sum, its step; then only steps on one element per row join (``_after_rows``)
        self.read, self.written, self.fresh = _Touched(), _Touched(), set()
        self.codes: list = []  # per step, its operands as ("v", input), ("t", step) or ("s", scalar)
        self.elements: list = []  # per step, its target's ``elements`` (None for a reduction)
        self.writer: dict = {}  # elements -> the last step writing them
        self.inputs: list = []  # (step, operand position) of each input View's first read
        self.input_of: dict = {}  # id(View) -> input number
        self.scalars: list = []
        self.held: dict = {}  # id(View) -> references to it among the steps' operands
        self.targets: dict = {}  # id(View) -> steps writing it
        self.form = -1  # the steps so far, numbered

    def takes(self, step, views: list, grid: bool) -> bool:
        """Whether ``step`` (its View operands ``views``; ``grid``: one of them or its target is strided 2-D) may
        join the group."""
        target = step.target
        if step.wu is expressions.ROW_SUM:
            return self._takes_rows(step, views[0])
        if self.rows is not None:
            return self._after_rows(step, views, grid)
        if not self.open or (target if target is not None else views[0]).size != self.size \
                or expressions.template(step.wu) is None:
            return False
        if (grid or self.grid) and (target is None or not _all_of_shape(self.shape, target, views)):
            return False
        written = self.written
        for v in views:
            if not written.aligned(v):
                return False
        return target is None or step.fresh or written.aligned(target) and self.read.aligned(target)

    def _takes_rows(self, step, source: View) -> bool:
        """A row sum joins to sum the rows of a contiguous result of the group (in C order, as the group's kernel
        writes it; in a 2-D group one of its shape) into new memory, one element per row."""
        rows = step.target.size
        return self.open and step.fresh and source.storage == "right" and source.size == self.size and rows and \
            source.size % rows == 0 and self.writer.get(source.bounds) is not None and \
            (not self.grid or source.shape == self.shape and rows == source.shape[0])

    def _after_rows(self, step, views: list, grid: bool) -> bool:
        """After a row sum, an element-wise step over one element per row (the sums, or other Views of that length,
        1-D) joins: the row's thread computes it after its loop. Its memory must not overlap what the loops touch
        but as the same elements (``_Touched``)."""
        target, rows = step.target, self.steps[self.rows].target.size
        if target is None or grid or target.ndim != 1 or target.size != rows or expressions.template(step.wu) is None:
            return False
        for v in views:
            if v.ndim != 1 or v.size != rows or not self.written.aligned(v):
                return False
        return step.fresh or self.written.aligned(target) and self.read.aligned(target)

    def add(self, step, views: list, grid: bool) -> None:
        """Append ``step`` (the caller asked ``takes``, or the group is empty). Runs per operation: loops and
        dict lookups written out."""
        k, target, steps = len(self.steps), step.target, self.steps
        if not k:
            first = target if target is not None else views[0]
            self.size, self.shape = first.size, first.shape
            self.open = expressions.template(step.wu) is not None
        shape, held, writer, read = self.shape, self.held, self.writer, self.read
        codes = []
        for position, x in enumerate(step.operands):
            if type(x) is not View:
                codes.append(("s", len(self.scalars)))
                self.scalars.append(x)
                continue
            if x.shape != shape and self.rows is None:
                self.shape = None
            key = x.bounds if x.storage == "right" else (x.bounds, x.strides)  # (``elements``)
            if key not in read.exact:
                read.add(x, key, id(x) in self.fresh)
            held[id(x)] = held.get(id(x), 0) + 1
            j = writer.get(key)
            if j is not None:
                codes.append(("t", j))
                continue
            j = self.input_of.get(id(x))
            if j is None:
                j = self.input_of[id(x)] = len(self.inputs)
                self.inputs.append((k, position))
            codes.append(("v", j))
        codes = tuple(codes)
        self.codes.append(codes)
        if target is None:
            self.open = False
            self.elements.append(None)
            part = step.wu, codes
        else:
            if step.wu is expressions.ROW_SUM:
                self.open, self.rows = False, k  # (one element per row: the group's shape stays its elements')
            elif target.shape != shape and self.rows is None:
                self.shape = None
            key = target.bounds if target.storage == "right" else (target.bounds, target.strides)
            if key not in self.written.exact:
                self.written.add(target, key, step.fresh)
            self.elements.append(key)
            part = step.wu, codes, target.dtype, writer.get(key)
            writer[key] = k
            self.targets[id(target)] = self.targets.get(id(target), 0) + 1
            if step.fresh:
                self.fresh.add(id(target))
        self.form = _number(self.form, part)
        self.grid = self.grid or grid
        steps.append(step)

    def input(self, n: int) -> View:
        k, position = self.inputs[n]
        return self.steps[k].operands[position]


def _number(form: int, part) -> int:
    """The number of the steps numbered ``form`` followed by a step of ``part``: one per such sequence while the
    table keeps it, and never one given before (plans are kept by number, kfuse/ops/plans.py)."""
    number = _FORMS.get((form, part))
    if number is None:
        if len(_FORMS) >= _MAX_FORMS:
            _FORMS.clear()
        number = _FORMS[form, part] = next(_numbers)
    return number


def _all_of_shape(shape: tuple | None, target: View, views: list) -> bool:
    if shape is None or target.shape != shape:
        return False
    for v in views:
        if v.shape != shape:
            return False
    return True


class _Touched:
    """The memory a group reads (or writes): every View's elements with their dtype, and their spans apart: those
    of new results in the order they were made (a View made before a new result cannot overlap it: its memory was
    new then), the others' in a list."""

    def __init__(self):
        self.exact, self.others, self.fresh = {}, [], []

    def add(self, view: View, key, fresh: bool) -> None:
        """Note ``view`` (its ``elements`` ``key``, not noted yet)."""
        self.exact[key] = view.dtype
        if fresh:
            self.fresh.append((view.uid, *view.bounds, key))
        else:
            self.others.append((*view.bounds, key))

    def aligned(self, view: View) -> bool:
        """Whether ``view`` overlaps none of this memory except as exactly the same elements and dtype."""
        key = view.bounds if view.storage == "right" else (view.bounds, view.strides)  # (``elements``)
        dtype = self.exact.get(key)
        if dtype is not None and dtype is not view.dtype:
            return False
        lo, hi = view.bounds
        for a, b, k in self.others:
            if lo < b and a < hi and k != key:
                return False
        for uid, a, b, k in self.fresh:  # uids grow: stop at the first result made after the View
            if uid > view.uid:
                break
            if lo < b and a < hi and k != key:
                return False
        return True
