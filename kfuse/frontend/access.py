"""Which Views a kernel reads and writes, and with which index expressions (from its AST).

The tracer needs the read and write sets of each call; the fuser needs every access's index
expressions to prove that fused kernels never touch another thread's elements. Anything the analysis
cannot see through (atomics, a View handed to a helper) is marked so that the fuser refuses it.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field

from .normalize import KernelSource
from .spec import KernelSpec

_ATOMIC_PREFIX = "atomic_"


@dataclass(frozen=True)
class Access:
    kind: str  # "read" | "write" | "update" (read-modify-write) | "atomic" | "opaque"
    indices: tuple  # ast expressions, one per dimension (empty for atomic/opaque without a visible index)
    node: ast.AST


@dataclass
class ParamAccess:
    read: bool = False
    write: bool = False
    accesses: list = field(default_factory=list)

    @property
    def opaque(self) -> bool:
        return any(a.kind in ("atomic", "opaque") for a in self.accesses)


def _flatten(node):
    indices = []
    while isinstance(node, ast.Subscript):
        idx = node.slice
        indices = list(idx.elts if isinstance(idx, ast.Tuple) else [idx]) + indices
        node = node.value
    return node, tuple(indices)


def summarize(src: KernelSource, spec: KernelSpec) -> dict:
    """Map each View parameter name to its ParamAccess."""
    views = {n for n, t in spec.params if t.is_view}
    result = {n: ParamAccess() for n in views}

    def record(name, kind, indices, node):
        pa = result[name]
        pa.accesses.append(Access(kind, indices, node))
        if kind != "write":
            pa.read = True
        if kind != "read":
            pa.write = True

    store_targets: dict = {}
    for node in ast.walk(src.tree):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                store_targets[id(t)] = "write"
        elif isinstance(node, ast.AugAssign):
            store_targets[id(node.target)] = "update"
    seen_inner = set()
    for node in ast.walk(src.tree):
        if isinstance(node, ast.Subscript) and id(node) not in seen_inner:
            base, indices = _flatten(node)
            inner = node
            while isinstance(inner, ast.Subscript):
                seen_inner.add(id(inner))
                inner = inner.value
            if isinstance(base, ast.Name) and base.id in views:
                record(base.id, store_targets.get(id(node), "read"), indices, node)
        elif isinstance(node, ast.Call):
            func = node.func
            is_pk = isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "pk"
            if is_pk and func.attr.startswith(_ATOMIC_PREFIX) and node.args:
                target = node.args[0]
                if isinstance(target, ast.Name) and target.id in views:
                    idx = node.args[1] if len(node.args) > 1 else None
                    parts = tuple(idx.elts) if isinstance(idx, (ast.List, ast.Tuple)) else (idx,)
                    record(target.id, "atomic", parts, node)
            elif isinstance(func, ast.Name) and func.id in src.helpers:
                for arg in node.args:
                    if isinstance(arg, ast.Name) and arg.id in views:
                        record(arg.id, "opaque", (), node)
    return result
