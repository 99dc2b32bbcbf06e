"""Redundant-access elimination at source level, so the speedup does not hinge on the C++ compiler.

Within each straight-line statement list of a fused body (every nested list gets a fresh state, and
any compound statement ends what is known):
- a repeated read of the same element (same array, same index expression) with no possibly-aliasing
  write in between reads once into a local ``ldN``;
- a store followed by a read of the same element forwards the stored value (kept in a local ``stN``
  typed as the element, so conversions happen exactly as the store would do them);
- a store overwritten before any read of that array's memory is removed (a read forwarded from a local
  reads no memory), only when nothing in between can observe it (no read of possibly-overlapping memory,
  no atomic, no helper call) and its value has no side effects.
Then the stores into *scratch* Views (memory nothing reads after the group: ``FusedKernel.scratch``, from
kfuse/tracer/liveness.py) go, when no read of that memory is left in the kernel (every read was forwarded
from a store), and a View no longer named stops being a parameter: a chain of array operations keeps its
intermediates in registers.
"Possibly aliasing" uses run-time knowledge: Views whose memory overlaps form one class. Only reads
in positions that are always evaluated are hoisted (never out of ``a if c else b``, the right side
of ``and``/``or``, or the third operand of a chained comparison), so a guarded out-of-bounds read is
never introduced. Reads inside an index are loaded first and the index names their locals, so an
element's key never depends on memory; an element whose index still reads memory or calls a function
is not tracked.
"""
from __future__ import annotations

import ast
import copy
import itertools
import re

from ..ir.pyast import assigned_names, flatten_subscript
from .ir import FusedKernel, PassResult, alias_classes


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
        base, idx = flatten_subscript(node)
        if not (isinstance(base, ast.Name) and base.id in self.classes):
            return None
        # The element is (this View, this index): two Views of one overlap class (e.g. subviews a[:16] and
        # a[16:]) at the same index are different elements; the class (key[0]) only drives invalidation.
        # (Fix from the fuser tests: lo[i] and hi[i] shared one load, and a store to one killed the other.)
        return (self.classes[base.id], base.id, ast.dump(ast.Tuple(elts=idx, ctx=ast.Load()))), base.id, \
            _names_in(idx)

    @staticmethod
    def _trackable(node) -> bool:
        """The index names only values that memory writes cannot change (see ``_load_indices``), and no
        classtype field (a call may change it without assigning a name)."""
        _, idx = flatten_subscript(node)
        return not any(isinstance(n, (ast.Subscript, ast.Call, ast.Attribute)) for i in idx for n in ast.walk(i))

    def _load_indices(self, node, avail: dict, pre: list, read_classes: set):
        """Replace the always-evaluated reads inside an element's indices by locals, innermost level first.

        Fix (tests): index reads were loaded but left in place, so ``x[i][idx[i]]`` stayed keyed on the
        text ``idx[i]`` and a later ``x[i][idx[i]]`` reused the old element after a store to ``idx``."""
        levels = []
        while isinstance(node, ast.Subscript):
            levels.append(node)
            node = node.value
        for sub in reversed(levels):
            if isinstance(sub.slice, ast.Tuple):
                sub.slice.elts = [self._loads(e, avail, pre, read_classes) for e in sub.slice.elts]
            else:
                sub.slice = self._loads(sub.slice, avail, pre, read_classes)

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
                self._load_indices(expr, avail, pre, read_classes)  # reads inside the indices come first
                if not self._trackable(expr):
                    read_classes.add(info[0][0])
                    return expr
                info = self._key(expr)
                key, view, _ = info
                if key in avail:  # forwarded from a local: memory is not read, a pending store stays unobserved
                    self.modified = True
                    return ast.copy_location(ast.Name(id=avail[key][0], ctx=ast.Load()), expr)
                read_classes.add(key[0])
                name, stmt = self._local("ld", view, expr, expr)
                pre.append(stmt)
                avail[key] = (name, info[2])
                return ast.copy_location(ast.Name(id=name, ctx=ast.Load()), expr)
        if isinstance(expr, ast.IfExp):
            expr.test = self._loads(expr.test, avail, pre, read_classes)
            self._note_reads(expr.body, read_classes)
            self._note_reads(expr.orelse, read_classes)
            return expr
        if isinstance(expr, ast.Compare):
            # Fix (tests): ``a < b < c`` evaluates c only when a < b holds (C++: &&), so only the first two
            # operands are always evaluated; ``0 < i < x[i - 1]`` had x[i - 1] hoisted out of its guard.
            expr.left = self._loads(expr.left, avail, pre, read_classes)
            expr.comparators[0] = self._loads(expr.comparators[0], avail, pre, read_classes)
            for c in expr.comparators[1:]:
                self._note_reads(c, read_classes)
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
        stores: dict = {}  # key -> (position in out of a store not yet read, names its index uses)
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
            if self._touches_memory(stmt):  # the call may read or write the Views handed to it in between
                avail.clear()               # any two reads of the statement: nothing is reused nor hoisted
                stores.clear()
                out.append(stmt)
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
                self._load_indices(target, avail, pre, read_classes)
                value = self._loads(stmt.value, avail, pre, read_classes)
                self._forget_reads(stores, read_classes)
                key, view, idx_names = self._key(target)
                tracked = self._trackable(target)
                if tracked and key in stores and not side_effects:
                    out[stores.pop(key)[0]] = None  # overwritten before any read: dead
                    self.modified = True
                name, local = self._local("st", view, value, stmt)
                stmt.value = ast.copy_location(ast.Name(id=name, ctx=ast.Load()), stmt)
                pre.append(local)
                for k in [k for k in avail if k[0] == key[0]]:
                    del avail[k]
                for k in [k for k in stores if k[0] == key[0]]:
                    del stores[k]
                out.extend(pre)
                if tracked:
                    avail[key] = (name, idx_names)
                    stores[key] = (len(out), idx_names)
                out.append(stmt)
                continue
            for field, value in ast.iter_fields(stmt):
                if isinstance(value, ast.expr) and field != "target" and field != "targets":
                    setattr(stmt, field, self._loads(value, avail, pre, read_classes))
            written = self._other_writes(stmt, read_classes)
            self._forget_reads(stores, read_classes)
            for k in [k for k in avail if k[0] in written]:
                del avail[k]
            for k in [k for k in stores if k[0] in written]:
                del stores[k]
            changed = assigned_names([stmt])
            for k in [k for k, (_, names) in avail.items() if names & changed]:
                del avail[k]
            # Fix (tests): ``y[i][k] = a; k = k + 1; y[i][k] = b`` removed the first store as dead.
            for k in [k for k, (_, names) in stores.items() if names & changed]:
                del stores[k]
            out.extend(pre)
            out.append(stmt)
        return [s for s in out if s is not None]

    def _other_writes(self, stmt, read_classes: set) -> set:
        """Classes of the elements a statement the store path does not handle writes (a chained
        ``x[i] = y[i] = v``); reads in their indices count as reads. Fix (tests): such stores were
        ignored, so x[i] and y[i] kept their old loaded values."""
        targets = stmt.targets if isinstance(stmt, ast.Assign) else \
            [stmt.target] if isinstance(stmt, (ast.AugAssign, ast.AnnAssign)) else []
        written = set()
        for target in targets:
            for node in ast.walk(target):
                if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store) and self._key(node):
                    written.add(self._key(node)[0][0])
                    for i in flatten_subscript(node)[1]:
                        self._note_reads(i, read_classes)
        return written

    @staticmethod
    def _forget_reads(stores: dict, read_classes: set):
        for k in [k for k in stores if k[0] in read_classes]:
            del stores[k]

    def _touches_memory(self, stmt) -> bool:
        """Atomics, and helpers (classtype constructors and methods too), may write any array handed to them."""
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call):
                func = node.func
                if isinstance(func, ast.Attribute) and func.attr.startswith("atomic_"):
                    return True
                if any(isinstance(a, ast.Name) and a.id in self.classes for a in node.args):
                    return True
        return False


def _stored_only(tree, name: str) -> list:
    """The statements storing into View ``name`` (``name[...] = value``, nothing called) if that is all the
    kernel does with it besides asking its extents; None if it reads it or hands it on."""
    allowed, stores = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Subscript) \
                and not _has_call(node):
            base, _ = flatten_subscript(node.targets[0])
            if isinstance(base, ast.Name) and base.id == name:
                allowed.add(id(base))
                stores.append(node)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == name \
                and node.attr == "extent":
            allowed.add(id(node.value))
    uses = [n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == name]
    return stores if all(id(n) in allowed for n in uses) else None


def _without(stmts: list, dropped: set) -> list:
    """``stmts`` less the statements in ``dropped`` (by id), at every depth; an emptied block keeps a ``pass``."""
    kept = []
    for stmt in stmts:
        if id(stmt) in dropped:
            continue
        for field in ("body", "orelse", "finalbody"):
            inner = getattr(stmt, field, None)
            if isinstance(inner, list) and inner:
                setattr(stmt, field, _without(inner, dropped) or [ast.Pass()])
        kept.append(stmt)
    return kept


def _drop_scratch(kernel: FusedKernel, tree: ast.FunctionDef) -> set | None:
    """Remove from ``tree`` the stores into Views whose memory nothing reads after the group (``kernel.scratch``,
    found by kfuse/tracer/liveness.py) once no read of them is left: their values live in the locals the
    elimination made. Returns the scratch parameters no longer named at all (they stop being parameters, so they
    are not even passed, or copied to a GPU), or None if no store went."""
    spec, arg_index = kernel.spec, kernel.arg_index
    scratch = [n for p, (n, t) in enumerate(spec.params) if t.is_view and arg_index[p] in kernel.scratch]
    classes: dict = {}  # Views over the same memory go together: a read through one sees the others' stores
    for name, cls in alias_classes(kernel).items():
        if name in scratch:
            classes.setdefault(cls, []).append(name)
    dropped = set()
    for names in classes.values():
        stores = [_stored_only(tree, name) for name in names]
        if all(s is not None for s in stores):
            dropped.update(id(s) for found in stores for s in found)
    if not dropped:
        return None
    tree.body = _without(tree.body, dropped) or [ast.Pass()]
    named = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    return {n for n in scratch if n not in named}


def run(kernel: FusedKernel) -> PassResult:
    tree = copy.deepcopy(kernel.source.tree)
    dtypes = {n: t.dtype for n, t in kernel.spec.params if t.is_view}
    used = [int(m.group(1)) for n in ast.walk(tree) if isinstance(n, ast.Name)
            for m in [re.fullmatch(r"(?:ld|st)(\d+)", n.id)] if m]
    elim = _Eliminator(alias_classes(kernel), dtypes, start=max(used, default=-1) + 1)
    tree.body = elim.block(tree.body)
    gone = _drop_scratch(kernel, tree)
    if not elim.modified and gone is None:
        return PassResult(kernel, False)
    return PassResult(kernel.without_params(tree, gone or ()), True)
