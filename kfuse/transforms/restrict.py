"""Restrict: View parameters proven not to overlap any other View parameter are passed to the fused
body as ``__restrict__`` raw pointers (with their strides), as in the PyFuser paper's Figure 6c.

The proof is at run time, on the actual arguments: a View qualifies only if its bytes overlap no other
View parameter's bytes. Two parameters that are the same array (argument fusion off) overlap, so
neither is marked — marking them would let the compiler reorder a store and a load of one element and
change results. Views handed to helper functions (classtype constructors and methods too) keep their View
type.
"""
from __future__ import annotations

import ast
from dataclasses import replace

from .. import spaces
from ..views import overlaps
from .ir import FusedKernel, PassResult


def run(kernel: FusedKernel) -> PassResult:
    views = [(n, kernel.value(n)) for n, t in kernel.spec.params if t.is_view]
    if spaces.on_device(kernel.spec.space) and any(overlaps(v, w) for i, (_, v) in enumerate(views)
                                                      for _, w in views[i + 1:]):
        # Measured on an H200 (nvcc 13): with __restrict__ pointers in the body, a store and a later load of one
        # element through two aliasing View parameters were reordered, so the load saw the old value. On GPUs
        # restrict is therefore applied only when no two View parameters overlap at all.
        return PassResult(kernel, False)
    helper_args = {a.id for node in ast.walk(kernel.source.tree) if isinstance(node, ast.Call)
                   and not _is_pk(node.func) for a in node.args if isinstance(a, ast.Name)}
    chosen = frozenset(n for i, (n, v) in enumerate(views)
                       if n not in helper_args and not any(overlaps(v, w) for j, (_, w) in enumerate(views) if j != i))
    if chosen == kernel.restrict:
        return PassResult(kernel, False)
    return PassResult(replace(kernel, restrict=chosen), True)


def _is_pk(func) -> bool:
    """``pk.<name>``: math, atomics and printf, which the printer spells for pointers too."""
    return isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "pk"
