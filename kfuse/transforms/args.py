"""Argument fusion: parameters that receive the same array (same storage) or equal scalars become one.

Only at run time is it known that ``A0`` and ``A1`` are the same object; merging them lets the C++
compiler see one array, and lets loop fusion and redundant-access elimination match accesses.
A scalar parameter that a body reassigns is never merged.
"""
from __future__ import annotations

import ast
import copy
from dataclasses import replace

from ..ir.pyast import assigned_names
from ..views import storage_key
from .ir import FusedKernel, PassResult, scalar_key


def run(kernel: FusedKernel) -> PassResult:
    tree = kernel.source.tree
    reassigned = assigned_names(tree.body)
    names = [n for n, _ in kernel.spec.params]
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
    tree.args.args = [a for a in tree.args.args if a.arg not in rename]
    keep = [i for i, n in enumerate(names) if n not in rename]
    spec = replace(kernel.spec, params=tuple(kernel.spec.params[i] for i in keep))
    return PassResult(kernel.with_tree(tree, spec=spec, arg_index=tuple(kernel.arg_index[i] for i in keep)), True)
