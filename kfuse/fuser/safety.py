"""Is it safe to run two kernel calls as one kernel? Proved from their ASTs, or refused with a reason.

Fusing calls a then b into one kernel runs, for each thread index, a's body then b's body, with
threads in any order. That gives the unfused result if no thread reads or writes an element that
another thread of the other kernel writes. We prove it per shared array (memory touched by both
calls, written by at least one): every access of both kernels must index some dimension by the same
one-to-one expression of each thread index (``tid`` or ``tid + c``, with ``c`` a constant or an
unchanged scalar argument, compared by value at run time), so each thread stays inside its own slice.
Other dimensions may use anything (loop variables, constants, even indirect reads). Anything else
(neighbour reads ``A[i-1]`` against ``A[i]``, indirect ``A[idx[i]]``, atomics, Views handed to
helpers, different views of overlapping memory) is refused.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass


@dataclass(frozen=True)
class ParamPattern:
    """How one View parameter is accessed, reduced to what safety needs."""

    read: bool
    write: bool
    opaque: str | None  # why the accesses cannot be analysed (atomic, helper), or None
    # one entry per access: for each thread-index position k, the set of (dim, offset) where the
    # index is ``thread_k + offset``; offset is ("c", int) or ("p", scalar parameter name)
    accesses: tuple


@dataclass(frozen=True)
class KernelPattern:
    params: dict  # View parameter name -> ParamPattern
    refuse: str | None  # a reason the kernel cannot be fused with anything, or None
    offset_params: frozenset  # scalar parameters whose values matter to the analysis


def _assigned(tree) -> set:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


def _has_return(body) -> bool:
    """A return reachable from the body itself (returns inside nested defs belong to those defs)."""
    stack = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Return):
            return True
        if not isinstance(node, ast.FunctionDef):
            stack.extend(ast.iter_child_nodes(node))
    return False


def _offset(node, scalars: set, assigned: set):
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return ("c", node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _offset(node.operand, scalars, assigned)
        return ("c", -inner[1]) if inner and inner[0] == "c" else None
    if isinstance(node, ast.Name) and node.id in scalars and node.id not in assigned:
        return ("p", node.id)
    return None


def _match(expr, thread: str, scalars: set, assigned: set):
    """(offset) if ``expr`` is ``thread + offset`` (one-to-one in the thread index), else None."""
    if isinstance(expr, ast.Name) and expr.id == thread:
        return ("c", 0)
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Add, ast.Sub)):
        left, right = expr.left, expr.right
        if isinstance(left, ast.Name) and left.id == thread:
            off = _offset(right, scalars, assigned)
            if off is None:
                return None
            if isinstance(expr.op, ast.Sub):
                return ("c", -off[1]) if off[0] == "c" else None  # tid - param: keep it simple, refuse
            return off
        if isinstance(expr.op, ast.Add) and isinstance(right, ast.Name) and right.id == thread:
            return _offset(left, scalars, assigned)
    return None


def pattern_of(prepared) -> KernelPattern:
    """Analyse a specialised kernel once (cached on the Prepared object)."""
    cached = prepared.__dict__.get("_fusion_pattern")
    if cached is None:
        cached = _analyse(prepared)
        prepared.__dict__["_fusion_pattern"] = cached
    return cached


def _analyse(prepared) -> KernelPattern:
    spec, src = prepared.spec, prepared.source
    names = [a.arg for a in src.tree.args.args]
    if spec.op == "scan":
        return KernelPattern({}, "a scan (parallel_scan) has a cross-thread dependence", frozenset())
    if spec.policy == "team":
        return KernelPattern({}, "a TeamPolicy kernel (team threads share data)", frozenset())
    if spec.space == "Debug":
        return KernelPattern({}, "runs in the Debug space", frozenset())
    threads = names[:spec.rank]
    assigned = _assigned(src.tree)
    if set(threads) & assigned:
        return KernelPattern({}, "the kernel reassigns its thread index", frozenset())
    if _has_return(src.tree.body):
        return KernelPattern({}, "the kernel body returns early (a return would skip the fused kernels after it)",
                             frozenset())
    scalars = {n for n, t in spec.params if not t.is_view}
    offsets = set()
    params = {}
    for name, pa in prepared.access.items():
        opaque = None
        rows = []
        for acc in pa.accesses:
            if acc.kind == "atomic":
                opaque = f"atomic update of '{name}'"
                continue
            if acc.kind == "opaque":
                opaque = f"'{name}' is passed to a helper function"
                continue
            row = []
            for thread in threads:
                found = set()
                for dim, idx in enumerate(acc.indices):
                    off = _match(idx, thread, scalars, assigned)
                    if off is not None:
                        found.add((dim, off))
                        if off[0] == "p":
                            offsets.add(off[1])
                row.append(frozenset(found))
            rows.append((tuple(row), ast.unparse(acc.node)))
        params[name] = ParamPattern(pa.read, pa.write, opaque, tuple(rows))
    return KernelPattern(params, None, frozenset(offsets))


def _resolve(off, call):
    """An offset's value in this call; a scalar still pending (a Future) matches nothing."""
    kind, value = off
    if kind == "c":
        return value
    for (name, _), arg in zip(call.prepared.spec.params, call.args):
        if name == value:
            return object() if arg is None else int(arg)
    raise KeyError(value)  # pragma: no cover - offsets only name scalar parameters


def _view_key(view) -> tuple:
    return (view.ptr, view.shape, view.strides, view.dtype)


def pair_conflict(a, b) -> str | None:
    """None if calls a then b may run as one kernel; otherwise a readable reason."""
    pa, pb = pattern_of(a.prepared), pattern_of(b.prepared)
    for call, pat in ((a, pa), (b, pb)):
        if pat.refuse:
            return f"{call.prepared.name}: {pat.refuse}"
    views_a = [(n, v) for (n, t), v in zip(a.prepared.spec.params, a.args) if t.is_view]
    views_b = [(n, v) for (n, t), v in zip(b.prepared.spec.params, b.args) if t.is_view]
    rank = a.prepared.spec.rank
    for na, va in views_a:
        ma = pa.params[na]
        for nb, vb in views_b:
            mb = pb.params[nb]
            if not (ma.write or mb.write):
                continue
            lo, hi = va.bounds
            lo2, hi2 = vb.bounds
            if not (lo < hi2 and lo2 < hi):
                continue
            label = na if na == nb else f"{na}/{nb}"
            if _view_key(va) != _view_key(vb):
                return f"'{label}' share memory through different views (e.g. a subview), cannot align elements"
            for m in (ma, mb):
                if m.opaque:
                    return f"unsafe access to '{label}': {m.opaque}"
            for k in range(rank):
                common, seen = None, []
                for call, m in ((a, ma), (b, mb)):
                    for row, text in m.accesses:
                        here = {(d, _resolve(off, call)) for d, off in row[k]}
                        common = here if common is None else common & here
                        if not common:
                            return _unsafe_reason(label, call, text, seen, k)
                        seen.append((call.prepared.name, text))
    return None


def _unsafe_reason(label, call, text, seen, k) -> str:
    """Name the access that breaks thread-locality, against the accesses it was compared with."""
    earlier = ", ".join(f"{t} ({n})" for n, t in list(dict.fromkeys(seen))[:3])
    what = f"{call.prepared.name} uses {text}"
    if seen:
        return (f"unsafe access to '{label}': {what}, not the same one-to-one function of thread index {k} as "
                f"{earlier}")
    return f"unsafe access to '{label}': {what}, which is not a one-to-one function of thread index {k}"
