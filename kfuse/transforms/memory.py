"""Redundant-access elimination at source level, so the speedup does not hinge on the C++ compiler.

Within each straight-line statement list of a fused body (every nested list gets a fresh state, and
any compound statement ends what is known):
- a repeated read of the same element (same array, same index expression) with no possibly-aliasing
  write in between reads once into a local ``ldN``;
- a store followed by a read of the same element forwards the stored value (kept in a local ``stN``
  typed as the element, so conversions happen exactly as the store would do them);
- a store overwritten before any read of that array is removed, only when nothing in between can
  observe it (no read of possibly-overlapping memory, no atomic, no helper call) and its value has no
  side effects.
"Possibly aliasing" uses run-time knowledge: Views whose memory overlaps form one class. Only reads
in positions that are always evaluated are hoisted (never out of ``a if c else b`` or the right side
of ``and``/``or``), so a guarded out-of-bounds read is never introduced.
"""
from __future__ import annotations

import ast
import copy
import itertools
import re

from .ir import FusedKernel, PassResult, alias_classes


def _flatten(node):
    indices = []
    while isinstance(node, ast.Subscript):
        idx = node.slice
        indices = list(idx.elts if isinstance(idx, ast.Tuple) else [idx]) + indices
        node = node.value
    return node, indices


def _names_in(nodes) -> set:
    return {n.id for node in nodes for n in ast.walk(node) if isinstance(n, ast.Name)}


def _has_call(node) -> bool:
    return any(isinstance(n, ast.Call) for n in ast.walk(node))


class _Eliminator:
    def __init__(self, classes: dict, dtypes: dict, start: int):
        self.classes = classes  # view param -> alias class
        self.dtypes = dtypes  # view param -> element DType
        self.counter = itertools.count(start)  # locals of an earlier run keep their names
        self.modified = False

    # --- helpers ------------------------------------------------------------------------
    def _key(self, node):
        base, idx = _flatten(node)
        if not (isinstance(base, ast.Name) and base.id in self.classes):
            return None
        return (self.classes[base.id], ast.dump(ast.Tuple(elts=idx, ctx=ast.Load()))), base.id, _names_in(idx)

    def _local(self, prefix: str, view: str, value, node) -> tuple[str, ast.stmt]:
        name = f"{prefix}{next(self.counter)}"
        stmt = ast.AnnAssign(target=ast.Name(id=name, ctx=ast.Store()),
                             annotation=ast.Constant(value=self.dtypes[view]), value=value, simple=1)
        return name, ast.copy_location(stmt, node)

    # --- loads ----------------------------------------------------------------------------
    def _loads(self, expr, avail: dict, pre: list, read_classes: set):
        """Replace always-evaluated element reads in ``expr`` by locals; returns the new expression."""
        if isinstance(expr, ast.Subscript):
            info = self._key(expr)
            if info is not None:
                key, view, _ = info
                read_classes.add(key[0])
                _, idx = _flatten(expr)
                for i in idx:  # reads inside the index expressions come first
                    self._loads(i, avail, pre, read_classes)
                if key in avail:
                    self.modified = True
                    return ast.copy_location(ast.Name(id=avail[key][0], ctx=ast.Load()), expr)
                name, stmt = self._local("ld", view, expr, expr)
                pre.append(stmt)
                avail[key] = (name, info[2])
                return ast.copy_location(ast.Name(id=name, ctx=ast.Load()), expr)
        if isinstance(expr, ast.IfExp):
            expr.test = self._loads(expr.test, avail, pre, read_classes)
            self._note_reads(expr.body, read_classes)
            self._note_reads(expr.orelse, read_classes)
            return expr
        if isinstance(expr, ast.BoolOp):
            expr.values[0] = self._loads(expr.values[0], avail, pre, read_classes)
            for v in expr.values[1:]:
                self._note_reads(v, read_classes)
            return expr
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) \
                and expr.func.attr.startswith("atomic_"):
            self._note_reads(expr, read_classes)
            return expr
        for field, value in ast.iter_fields(expr):
            if isinstance(value, ast.expr):
                setattr(expr, field, self._loads(value, avail, pre, read_classes))
            elif isinstance(value, list):
                setattr(expr, field, [self._loads(v, avail, pre, read_classes) if isinstance(v, ast.expr) else v
                                      for v in value])
        return expr

    def _note_reads(self, expr, read_classes: set):
        for node in ast.walk(expr):
            if isinstance(node, ast.Subscript):
                info = self._key(node)
                if info is not None:
                    read_classes.add(info[0][0])
            elif isinstance(node, ast.Name) and node.id in self.classes:
                read_classes.add(self.classes[node.id])

    # --- statements -----------------------------------------------------------------------
    def block(self, stmts: list) -> list:
        out: list = []
        avail: dict = {}  # key -> (local name, names its index uses)
        stores: dict = {}  # key -> position in out of a store not yet read
        for stmt in stmts:
            if isinstance(stmt, (ast.If, ast.For, ast.While, ast.FunctionDef)):
                for field in ("body", "orelse"):
                    inner = getattr(stmt, field, None)
                    if isinstance(inner, list) and inner:
                        setattr(stmt, field, self.block(inner))
                out.append(stmt)
                avail.clear()
                stores.clear()
                continue
            if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Subscript) \
                    and self._key(stmt.target) is not None:
                load = copy.deepcopy(stmt.target)
                load.ctx = ast.Load()
                stmt = ast.copy_location(ast.Assign(targets=[stmt.target],
                                                    value=ast.BinOp(left=load, op=stmt.op, right=stmt.value)), stmt)
            pre: list = []
            read_classes: set = set()
            side_effects = _has_call(stmt)
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Subscript) \
                    and self._key(stmt.targets[0]) is not None:
                target = stmt.targets[0]
                _, idx = _flatten(target)
                for i in idx:
                    self._loads(i, avail, pre, read_classes)
                value = self._loads(stmt.value, avail, pre, read_classes)
                self._forget_reads(stores, read_classes)
                key, view, idx_names = self._key(target)
                if key in stores and not side_effects:
                    out[stores.pop(key)] = None  # overwritten before any read: dead
                    self.modified = True
                name, local = self._local("st", view, value, stmt)
                stmt.value = ast.copy_location(ast.Name(id=name, ctx=ast.Load()), stmt)
                pre.append(local)
                for k in [k for k in avail if k[0] == key[0]]:
                    del avail[k]
                for k in [k for k in stores if k[0] == key[0]]:
                    del stores[k]
                avail[key] = (name, idx_names)
                out.extend(pre)
                stores[key] = len(out)
                out.append(stmt)
                continue
            for field, value in ast.iter_fields(stmt):
                if isinstance(value, ast.expr) and field != "target" and field != "targets":
                    setattr(stmt, field, self._loads(value, avail, pre, read_classes))
            self._forget_reads(stores, read_classes)
            if side_effects and self._touches_memory(stmt):
                avail.clear()
                stores.clear()
            changed = {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
            for k in [k for k, (_, names) in avail.items() if names & changed]:
                del avail[k]
            out.extend(pre)
            out.append(stmt)
        return [s for s in out if s is not None]

    @staticmethod
    def _forget_reads(stores: dict, read_classes: set):
        for k in [k for k in stores if k[0] in read_classes]:
            del stores[k]

    def _touches_memory(self, stmt) -> bool:
        """Atomics and helper calls may write any array handed to them."""
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call):
                func = node.func
                if isinstance(func, ast.Attribute) and func.attr.startswith("atomic_"):
                    return True
                if isinstance(func, ast.Name) and any(isinstance(a, ast.Name) and a.id in self.classes
                                                      for a in node.args):
                    return True
        return False


def run(kernel: FusedKernel) -> PassResult:
    tree = copy.deepcopy(kernel.source.tree)
    dtypes = {n: t.dtype for n, t in kernel.spec.params if t.is_view}
    used = [int(m.group(1)) for n in ast.walk(tree) if isinstance(n, ast.Name)
            for m in [re.fullmatch(r"(?:ld|st)(\d+)", n.id)] if m]
    elim = _Eliminator(alias_classes(kernel), dtypes, start=max(used, default=-1) + 1)
    body = elim.block(tree.body)
    if not elim.modified:
        return PassResult(kernel, False)
    tree.body = body
    return PassResult(kernel.with_tree(tree), True)
