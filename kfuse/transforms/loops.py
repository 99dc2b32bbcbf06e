"""Loop fusion: adjacent ``for`` loops over the same range inside a fused body become one loop.

Arrays are compared by storage (parameters whose memory overlaps count as one array). Legal only when
iteration j of the merged loop can run the second body right after the first: every array that one
body writes and the other touches is accessed, in both bodies and through one storage, with one same
dimension indexed by ``j + c`` (one same c), so iteration j touches only its own slice of it; no scalar
written by one body is used by the other; the loop bounds read nothing either body writes; and neither
body leaves the loop early (break/continue/return). When unsure, loops stay apart. Applied to a
fixpoint, including loops nested inside merged ones.

The facts come from the kernel's IR and its access analysis (``kfuse.ir.access``); merging rewrites the
Python AST, which is lowered again after each merge, so every decision reads the tree as it stands.
"""
from __future__ import annotations

import ast
import copy

from ..errors import SourceError
from ..ir import nodes as ir
from ..ir.access import analyse, assigned_names, leaves_early, names_read, referenced
from ..ir.lower import lower, lowered
from .ir import FusedKernel, PassResult, alias_classes, storage_classes


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

    def fuse(self, stmts: list) -> bool:
        """Merge adjacent loops of ``stmts`` in place, nested lists first; True when anything merged."""
        modified = False
        k = 0
        while k < len(stmts):
            stmt = stmts[k]
            for field in ("body", "orelse"):
                inner = getattr(stmt, field, None)
                if isinstance(inner, list) and inner and not isinstance(stmt, ast.FunctionDef):
                    modified |= self.fuse(inner)
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


def run(kernel: FusedKernel) -> PassResult:
    tree = copy.deepcopy(kernel.source.tree)
    if not _Fuser(kernel, tree).fuse(tree.body):
        return PassResult(kernel, False)
    return PassResult(kernel.with_tree(tree), True)
