"""Loop fusion: adjacent ``for`` loops over the same range inside a fused body become one loop.

Arrays are compared by storage (parameters whose memory overlaps count as one array). Legal only when
iteration j of the merged loop can run the second body right after the first: every array that one
body writes and the other touches is accessed, in both bodies and through one storage, with one same
dimension indexed by the same ``j`` (or ``j + c``) expression, so iteration j touches only its own
slice of it; no scalar written by one body is used by the other; the loop bounds read nothing either
body writes; and neither body leaves the loop early (break/continue/return). When unsure, loops stay
apart. Applied to a fixpoint, including loops nested inside merged ones.
"""
from __future__ import annotations

import ast
import copy

from ..ir.pyast import flatten_subscript
from .ir import FusedKernel, PassResult, alias_classes, storage_classes


def _rename(nodes, old: str, new: str):
    for node in nodes:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and sub.id == old:
                sub.id = new
    return nodes


def _is_loop_offset(node, loop: str) -> bool:
    """``loop``, ``loop + c``, ``c + loop`` or ``loop - c`` with c an integer constant (one-to-one in loop)."""
    if isinstance(node, ast.Name):
        return node.id == loop
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub))):
        return False
    pairs = [(node.left, node.right)] + ([(node.right, node.left)] if isinstance(node.op, ast.Add) else [])
    return any(isinstance(v, ast.Name) and v.id == loop and isinstance(c, ast.Constant) and type(c.value) is int
               for v, c in pairs)


def _footprint(body, views: dict, storage: dict, loop: str):
    """Array accesses {class: set((storage, loop dimensions))}, written arrays, scalars written/read, and
    early exits. An access's loop dimensions: the (dimension, index) pairs indexed by ``loop`` (+ c)."""
    accesses, written, scal_w, scal_r, exits = {}, set(), set(), set(), False
    inner = set()  # A[i] inside A[i][j]: part of one access, not an access of its own
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, (ast.Break, ast.Continue, ast.Return)):
                exits = True
            elif isinstance(node, (ast.Assign, ast.AugAssign)):
                for t in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                    base, _ = flatten_subscript(t)
                    if isinstance(t, ast.Subscript) and isinstance(base, ast.Name) and base.id in views:
                        written.add(views[base.id])
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr.startswith("atomic_") and node.args and isinstance(node.args[0], ast.Name):
                written.add(views.get(node.args[0].id, node.args[0].id))
                accesses.setdefault(views.get(node.args[0].id, node.args[0].id), set()).add("<atomic>")
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                for a in node.args:  # a View handed to a helper: unknown accesses
                    if isinstance(a, ast.Name) and a.id in views:
                        written.add(views[a.id])
                        accesses.setdefault(views[a.id], set()).add("<opaque>")
            if isinstance(node, ast.Subscript) and id(node) not in inner:
                base, idx = flatten_subscript(node)
                sub = node.value
                while isinstance(sub, ast.Subscript):
                    inner.add(id(sub))
                    sub = sub.value
                if isinstance(base, ast.Name) and base.id in views:
                    dims = frozenset((d, ast.dump(e)) for d, e in enumerate(idx) if _is_loop_offset(e, loop))
                    accesses.setdefault(views[base.id], set()).add((storage[base.id], dims))
            elif isinstance(node, ast.Name) and node.id not in views:
                (scal_w if isinstance(node.ctx, ast.Store) else scal_r).add(node.id)
    return accesses, written, scal_w, scal_r, exits


def _own_slices(accesses: set) -> bool:
    """All accesses go through one storage and share a dimension indexed by the same loop expression.

    Fix (tests): identical index expressions used to be enough, so ``s[t] += M[t][i]`` then
    ``M[t][i] / s[t]`` merged and divided by partial sums, and two overlapping Views (a shifted subview)
    indexed alike counted as one element; and inner loops over differently named variables never merged.
    """
    if any(isinstance(a, str) for a in accesses) or len({s for s, _ in accesses}) != 1:
        return False
    common = None
    for _, dims in accesses:
        common = dims if common is None else common & dims
    return bool(common)


def _can_merge(a: ast.For, b: ast.For, views: dict, storage: dict) -> bool:
    if a.orelse or b.orelse or not isinstance(a.target, ast.Name) or not isinstance(b.target, ast.Name):
        return False
    if ast.dump(a.iter) != ast.dump(b.iter):
        return False
    loop = a.target.id
    body_b = _rename(copy.deepcopy(b.body), b.target.id, loop)
    acc_a, wr_a, sw_a, sr_a, exit_a = _footprint(a.body, views, storage, loop)
    acc_b, wr_b, sw_b, sr_b, exit_b = _footprint(body_b, views, storage, loop)
    if exit_a or exit_b:
        return False
    if loop in sw_a | sw_b:  # fix (tests): a body reassigning the loop variable leaves its slice
        return False
    if sw_a & (sw_b | sr_b) or sw_b & (sw_a | sr_a):
        return False
    iter_names = {n.id for n in ast.walk(a.iter) if isinstance(n, ast.Name)}
    if iter_names & (sw_a | sw_b):
        return False
    # Fix (tests): bounds read from an array a body writes, e.g. range(cnt[t]) twice with the first loop
    # updating cnt[t]: merged, the second range would be taken before the first loop ran.
    if {views[n] for n in iter_names if n in views} & (wr_a | wr_b):
        return False
    for name in (wr_a | wr_b) & set(acc_a) & set(acc_b):
        if not _own_slices(acc_a[name] | acc_b[name]):
            return False
    return True


def _fuse_list(stmts: list, views: dict, storage: dict) -> tuple[list, bool]:
    out: list = []
    modified = False
    for stmt in stmts:
        for field in ("body", "orelse"):
            inner = getattr(stmt, field, None)
            if isinstance(inner, list) and inner and not isinstance(stmt, ast.FunctionDef):
                new, changed = _fuse_list(inner, views, storage)
                if changed:
                    setattr(stmt, field, new)
                    modified = True
        prev = out[-1] if out else None
        if isinstance(prev, ast.For) and isinstance(stmt, ast.For) and _can_merge(prev, stmt, views, storage):
            prev.body = prev.body + _rename(stmt.body, stmt.target.id, prev.target.id)
            merged, _ = _fuse_list(prev.body, views, storage)
            prev.body = merged
            modified = True
            continue
        out.append(stmt)
    return out, modified


def run(kernel: FusedKernel) -> PassResult:
    tree = copy.deepcopy(kernel.source.tree)
    body, modified = _fuse_list(tree.body, alias_classes(kernel), storage_classes(kernel))
    if not modified:
        return PassResult(kernel, False)
    tree.body = body
    return PassResult(kernel.with_tree(tree), True)
