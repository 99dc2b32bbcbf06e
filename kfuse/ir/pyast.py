"""Small questions about kernel Python ASTs that several stages ask (front end, codegen, transforms)."""
from __future__ import annotations

import ast


def flatten_subscript(node) -> tuple:
    """``A[i][j]`` and ``A[i, j]`` -> (``A``, [i, j]): the indexed base and one index per dimension."""
    indices: list = []
    while isinstance(node, ast.Subscript):
        idx = node.slice
        indices = list(idx.elts if isinstance(idx, ast.Tuple) else [idx]) + indices
        node = node.value
    return node, indices


def assigned_names(nodes) -> set:
    """Every name some statement or expression under ``nodes`` stores to (assignment, loop target)."""
    return {sub.id for node in nodes for sub in ast.walk(node)
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store)}
