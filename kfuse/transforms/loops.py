"""Loop fusion: adjacent ``for`` loops over the same range inside a fused body become one loop.

Arrays are compared by storage (parameters whose memory overlaps count as one array). Legal only when
iteration j of the merged loop can run the second body right after the first: every array that one
body writes and the other touches is accessed, in both bodies and through one storage, with one same
dimension indexed by ``j + c`` (one same c), so iteration j touches only its own slice of it; no scalar
written by one body is used by the other; the loop bounds read nothing either body writes; and neither
body leaves the loop early (break/continue/return). When unsure, loops stay apart. Applied to a
fixpoint, including loops nested inside merged ones. A loop separated from the one before it by plain
assignments (a fused member's stores after its loop, the next member's sums started) is moved up to it where no
statement then reads anything else than it did: its sums' starts before the first loop, the rest after the second
(GaussianNB's per-class passes over a row of X then read the row once).

The facts come from the kernel's IR and its access analysis (``kfuse.ir.access``); merging rewrites the
Python AST, which is lowered again after each merge, so every decision reads the tree as it stands.
"""
from __future__ import annotations

import ast
import copy
from dataclasses import dataclass

from ..errors import SourceError
from ..ir import nodes as ir
from ..ir.access import analyse, assigned_names, leaves_early, names_read, referenced
from ..ir.lower import lower, lowered
from ..ir.pyast import flatten_subscript
from ..ir.typing import BINARY_FLOAT_MATH, UNARY_FLOAT_MATH
from .ir import FusedKernel, PassResult, alias_classes, storage_classes


#: Calls a plain assignment may make and still move: math functions and conversions (no memory touched).
PURE_CALLS = UNARY_FLOAT_MATH | BINARY_FLOAT_MATH | {"abs", "fabs", "min", "max", "float", "int", "bool", "round",
                                                    "isnan", "isinf", "isfinite", "fma"}


def _rename(nodes, old: str, new: str):
    for node in nodes:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and sub.id == old:
                sub.id = new
    return nodes


def _pair(stmts: list, lowered_stmts: tuple, found: dict) -> None:
    """Map each AST ``for`` under ``stmts`` to the IR For it lowers to: the lowering keeps the order of
    compound statements, each giving exactly one IR statement of its kind (a nested def: a Lambda)."""
    for kind, ir_kind in ((ast.For, ir.For), (ast.If, ir.If), (ast.While, ir.While), (ast.FunctionDef, ir.Lambda)):
        mine = [s for s in stmts if isinstance(s, kind)]
        theirs = [s for s in lowered_stmts if isinstance(s, ir_kind)]
        if len(mine) != len(theirs) or any(s.lineno != t.loc.line for s, t in zip(mine, theirs)):
            raise AssertionError(f"the IR's {ir_kind.__name__} statements do not match the source's")
        for s, t in zip(mine, theirs):
            if kind is ast.For:
                found[id(s)] = t
            _pair(s.body, t.body, found)
            if kind is ast.If:
                _pair(s.orelse, t.orelse, found)


def _loop_dims(access, rename: dict, var: str) -> frozenset:
    """The (dimension, c) pairs of an access indexed by ``var + c``, loop variables renamed as the merge does."""
    dims = set()
    for d, index in enumerate(access.indices):
        if index is None or index.symbols:
            continue
        terms: dict = {}
        for name, c in index.terms:
            terms[rename.get(name, name)] = terms.get(rename.get(name, name), 0) + c
        if {n: c for n, c in terms.items() if c} == {var: 1}:
            dims.add((d, index.const))
    return frozenset(dims)


def _own_slices(accesses: set) -> bool:
    """All accesses go through one storage and share a dimension indexed by the same ``j + c``."""
    if any(isinstance(a, str) for a in accesses) or len({s for s, _ in accesses}) != 1:
        return False
    common = None
    for _, dims in accesses:
        common = dims if common is None else common & dims
    return bool(common)


class _Fuser:
    """Merges the loops of ``tree`` (a copy of the kernel's) in place, keeping the tree whole so that it
    can be lowered again after each merge."""

    def __init__(self, kernel: FusedKernel, tree: ast.FunctionDef):
        self.kernel, self.tree = kernel, tree
        self.views, self.storage = alias_classes(kernel), storage_classes(kernel)
        self.merged = False
        self.facts = None  # (analysis, {id(ast.For): ir.For}) of the tree as it stands; False: not lowerable

    def _lowered(self):
        if self.facts is None:
            try:
                kernel = lower(self.kernel.with_tree(self.tree).source, self.kernel.spec) if self.merged \
                    else lowered(self.kernel.source, self.kernel.spec)
            except SourceError:  # codegen reports it; nothing here can be proved
                self.facts = False
                return self.facts
            found: dict = {}
            _pair(self.tree.body, kernel.body, found)
            self.facts = (analyse(kernel), found)
        return self.facts

    def _footprint(self, analysis, loop: ir.For, rename: dict):
        """Array accesses {class: set((storage, loop dimensions)) or kind for atomics and helpers}, written
        arrays, scalars written/read, and early exits of ``loop``'s body."""
        var = rename.get(loop.var, loop.var)
        accesses: dict = {}
        written = set()
        for access in analysis.in_loop(loop):
            cls = self.views[access.view]
            if access.writes:
                written.add(cls)
            accesses.setdefault(cls, set()).add(access.kind if access.kind in ("atomic", "opaque") else
                                                (self.storage[access.view], _loop_dims(access, rename, var)))

        def scalars(names):
            return {rename.get(n, n) for n in names if n not in self.views}

        return (accesses, written, scalars(assigned_names(loop.body)), scalars(names_read(loop.body)),
                leaves_early(loop.body))

    def can_merge(self, a: ast.For, b: ast.For) -> bool:
        if ast.dump(a.iter) != ast.dump(b.iter) or not self._lowered():
            return False
        analysis, loops = self.facts
        first, second = loops[id(a)], loops[id(b)]
        acc_a, wr_a, sw_a, sr_a, exit_a = self._footprint(analysis, first, {})
        acc_b, wr_b, sw_b, sr_b, exit_b = self._footprint(analysis, second, {second.var: first.var})
        if exit_a or exit_b or first.var in sw_a | sw_b:  # a reassigned loop variable leaves its slice
            return False
        if sw_a & (sw_b | sr_b) or sw_b & (sw_a | sr_a):
            return False
        bounds = set().union(*(referenced(e) for e in (first.start, first.stop, first.step)))
        if bounds & (sw_a | sw_b) or {self.views[n] for n in bounds if n in self.views} & (wr_a | wr_b):
            return False  # merged, the second range would be taken before the first body ran
        return all(_own_slices(acc_a[name] | acc_b[name]) for name in (wr_a | wr_b) & set(acc_a) & set(acc_b))

    def _loop_effects(self, loop: ast.For):
        """``loop``'s _Effects, its bounds' reads included."""
        analysis, loops = self.facts
        found = loops[id(loop)]
        accesses, written, scalars_written, scalars_read, exits = self._footprint(analysis, found, {})
        scalars_read |= set().union(*(referenced(e, views=False) for e in (found.start, found.stop, found.step)))
        opaque = any(isinstance(a, str) for kinds in accesses.values() for a in kinds)
        return _Effects(scalars_read, scalars_written, set(accesses), written, exits or opaque)

    def _plain_effects(self, stmts: list):
        """The _Effects of plain assignments, or None for statements this cannot read."""
        names = _simple_names(stmts, self.kernel.source.helpers)
        if names is None:
            return None
        read, written = names
        views = set(self.views)
        return _Effects(read - views, written - views, {self.views[n] for n in read & views},
                        {self.views[n] for n in written & views}, False)

    def move_to_merge(self, stmts: list, p: int, k: int) -> bool:
        """Reorder ``stmts[p:k + 1]``, a loop, plain assignments, a loop, so that the second loop can merge with
        the first: the assignments that only start the second loop's sums (``s = 0.0``) go before the first
        loop, the rest after the second, where neither move changes what any statement reads. Fused members'
        bodies put each member's stores and its next sums' starts between their loops. False, and ``stmts``
        as it was, where that cannot be proved or the loops still cannot merge."""
        if not self._lowered():
            return False
        first, between, second = stmts[p], stmts[p + 1:k], stmts[k]
        moved, helpers = self._loop_effects(second), self.kernel.source.helpers

        def starts_a_sum(s) -> bool:
            names = _simple_names([s], helpers) if isinstance(s, (ast.Assign, ast.AnnAssign)) else None
            return names is not None and names[1] <= moved.scalars_written
        starts = [s for s in between if starts_a_sum(s)]
        rest = [s for s in between if s not in starts]
        effects = [self._plain_effects(starts), self._plain_effects(rest)]
        if None in effects or not _apart(effects[0], effects[1]) or \
                not _apart(effects[0], self._loop_effects(first)) or not _apart(moved, effects[1]):
            return False
        original = stmts[p:k + 1]
        stmts[p:k + 1] = [*starts, first, second, *rest]
        self.merged, self.facts = True, None
        if self.can_merge(first, second):
            return True
        stmts[p:p + len(original)] = original
        self.facts = None
        return False

    def fuse(self, stmts: list) -> bool:
        """Merge adjacent loops of ``stmts`` in place, nested lists first; True when anything merged. A loop
        after plain assignments that follow a loop moves up to merge with it where it may run before them
        (fused members' bodies put each member's stores between their loops)."""
        modified = False
        k = 0
        while k < len(stmts):
            stmt = stmts[k]
            for field in ("body", "orelse"):
                inner = getattr(stmt, field, None)
                if isinstance(inner, list) and inner and not isinstance(stmt, ast.FunctionDef):
                    modified |= self.fuse(inner)
            if isinstance(stmt, ast.For):
                p = _loop_before(stmts, k)
                if p is not None and p < k - 1 and self.move_to_merge(stmts, p, k):
                    k = stmts.index(stmt)
            prev = stmts[k - 1] if k else None
            if isinstance(prev, ast.For) and isinstance(stmt, ast.For) and self.can_merge(prev, stmt):
                prev.body.extend(_rename(stmt.body, stmt.target.id, prev.target.id))
                del stmts[k]
                self.merged, self.facts = True, None
                self.fuse(prev.body)
                modified = True
                continue
            k += 1
        return modified


@dataclass(frozen=True)
class _Effects:
    """What a piece of a body reads and writes: scalars by name, arrays by alias class; ``blocked``: it leaves
    early or touches memory this cannot see (an atomic, a helper's)."""

    scalars_read: set
    scalars_written: set
    arrays_read: set
    arrays_written: set
    blocked: bool


def _apart(a: _Effects, b: _Effects) -> bool:
    """Whether ``a`` and ``b`` may run in either order: neither writes what the other reads or writes."""
    return not (a.blocked or b.blocked or a.scalars_written & (b.scalars_read | b.scalars_written)
                or b.scalars_written & a.scalars_read or a.arrays_written & (b.arrays_read | b.arrays_written)
                or b.arrays_written & a.arrays_read)


def _loop_before(stmts: list, k: int) -> int | None:
    """The index of the nearest ``for`` before ``stmts[k]`` with only plain assignments between, or None."""
    for p in range(k - 1, -1, -1):
        if isinstance(stmts[p], ast.For):
            return p
        if not isinstance(stmts[p], (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            return None
    return None


def _pure_call(call: ast.Call, helpers) -> bool:
    """A math function or conversion, spelled as kernels spell them (``pk.log(x)``, ``abs(x)``, ``float(x)``), not
    one of the kernel's ``helpers`` (``@pk.function``s, which may write the Views they are given)."""
    func = call.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in ("pk", "math"):
        return func.attr in PURE_CALLS
    return isinstance(func, ast.Name) and func.id in PURE_CALLS and func.id not in helpers


def _simple_names(stmts: list, helpers) -> tuple | None:
    """(names read, names written) by plain assignments, or None where one is not plain (a call that may touch
    memory, a target other than a name or a subscripted name): a subscripted target writes its array and reads
    its indices; an augmented one reads its target too."""
    read, written = set(), set()
    for s in stmts:
        if not isinstance(s, (ast.Assign, ast.AnnAssign, ast.AugAssign)) or \
                any(isinstance(n, ast.Call) and not _pure_call(n, helpers) for n in ast.walk(s)):
            return None
        for t in s.targets if isinstance(s, ast.Assign) else [s.target]:
            base, indices = flatten_subscript(t)
            read |= {n.id for i in indices for n in ast.walk(i) if isinstance(n, ast.Name)}
            if not isinstance(base, ast.Name):
                return None
            written.add(base.id)
            if isinstance(s, ast.AugAssign):
                read.add(base.id)
        if s.value is not None:
            read |= {n.id for n in ast.walk(s.value) if isinstance(n, ast.Name)}
    return read, written


def run(kernel: FusedKernel) -> PassResult:
    tree = copy.deepcopy(kernel.source.tree)
    if not _Fuser(kernel, tree).fuse(tree.body):
        return PassResult(kernel, False)
    return PassResult(kernel.with_tree(tree), True)
