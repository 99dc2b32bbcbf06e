"""Argument fusion: parameters that receive the same array (same storage) or equal scalars become one.

Only at run time is it known that ``A0`` and ``A1`` are the same object; merging them lets the C++
compiler see one array, and lets loop fusion and redundant-access elimination match accesses.
A scalar parameter that a body reassigns is never merged.
"""
from __future__ import annotations

import ast
import copy

from ..ir.pyast import assigned_names
from ..views import storage_key
from .ir import FusedKernel, PassResult, scalar_key


def run(kernel: FusedKernel) -> PassResult:
    tree = kernel.source.tree
    reassigned = assigned_names(tree.body)
    representative: dict = {}
    rename: dict = {}
    for name, t in kernel.spec.params:
        value = kernel.value(name)
        if t.is_view:
            key = ("view", storage_key(value))
        elif name in reassigned:
            continue
        else:
            key = ("scalar", t.dtype, scalar_key(value))
        first = representative.setdefault(key, name)
        if first != name:
            rename[name] = first
    if not rename:
        return PassResult(kernel, False)
    tree = copy.deepcopy(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in rename:
            node.id = rename[node.id]
    return PassResult(kernel.without_params(tree, rename), True)
