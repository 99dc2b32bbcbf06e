"""Subviews inside kernels: ``row = A[j, :]`` then ``row[i]`` reads ``A[j, i]``.

A subview local is an alias of part of a View, so it is resolved here, on the AST, by writing each of its
element accesses as an access of the View it slices; the IR and the access analysis then see the real View
and index, and fusion stays exact. Accepted: a local assigned once, from a View (or another subview) with
``:`` or ``lo:hi`` slices and fixed indices, the names in those expressions never reassigned in the kernel (so
the alias means the same elements wherever it is used), used only indexed or as ``row.extent(d)``.
"""
from __future__ import annotations

import ast
import copy

from ..ir.pyast import flatten_subscript


class _Slice:
    """One sliced dimension of the parent: element k of the subview is parent index ``lo + k``."""

    def __init__(self, dim: int, lo: ast.expr | None, hi: ast.expr | None):
        self.dim, self.lo, self.hi = dim, lo, hi


class _Alias:
    def __init__(self, view: str, indices: list):
        self.view = view
        self.indices = indices  # per parent dimension: an index expression, or a _Slice


def inline_subviews(tree: ast.FunctionDef, error) -> ast.FunctionDef:
    """``tree`` with its subview locals resolved (see the module docstring); ``error(message, node)`` makes the
    exception for a subview kfuse cannot resolve."""
    definitions = sorted((s for s in ast.walk(tree) if _slices(s)), key=lambda s: (s.lineno, s.col_offset))
    if not definitions:
        return tree
    stores = _store_counts(tree)
    aliases: dict = {}
    for stmt in definitions:
        name, subscript = _target(stmt, error), stmt.value
        if stores.get(name, 0) != 1:
            raise error(f"subview '{name}' is assigned more than once; a subview local must be assigned once", stmt)
        base, indices = flatten_subscript(subscript)
        if not isinstance(base, ast.Name):
            raise error("only a View or a subview local can be sliced in a kernel", subscript)
        for expr in indices:
            for node in ast.walk(expr):
                if isinstance(node, ast.Name) and stores.get(node.id, 0) and node.id != name:
                    raise error(f"subview '{name}' is indexed by '{node.id}', which the kernel reassigns; index its "
                                f"View directly instead", stmt)
        aliases[name] = _compose(aliases.get(base.id), base.id, indices, stmt, error)
    rewriter = _Rewriter(aliases, error)
    tree = rewriter.visit(tree)
    return ast.fix_missing_locations(tree)


def _slices(stmt) -> bool:
    if not isinstance(stmt, (ast.Assign, ast.AnnAssign)) or not isinstance(stmt.value, ast.Subscript):
        return False
    _, indices = flatten_subscript(stmt.value)
    return any(isinstance(i, ast.Slice) for i in indices)


def _target(stmt, error) -> str:
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
    if len(targets) != 1 or not isinstance(targets[0], ast.Name):
        raise error("a subview must be assigned to one local name", stmt)
    return targets[0].id


def _store_counts(tree) -> dict:
    counts: dict = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            counts[node.id] = counts.get(node.id, 0) + 1
        elif isinstance(node, ast.arg):
            counts[node.arg] = counts.get(node.arg, 0)  # parameters: bound once, by the call
    return counts


def _compose(parent: _Alias | None, view: str, indices: list, stmt, error) -> _Alias:
    """The alias ``view[indices]``, resolved through ``parent`` when ``view`` is itself a subview."""
    own = []
    for dim, index in enumerate(indices):
        if isinstance(index, ast.Slice):
            if index.step is not None:
                raise error("a subview slice cannot have a step", index)
            own.append(_Slice(dim, index.lower, index.upper))
        else:
            own.append(index)
    if parent is None:
        return _Alias(view, own)
    free = [i for i, p in enumerate(parent.indices) if isinstance(p, _Slice)]
    if len(own) > len(free):
        raise error(f"subview '{view}' has {len(free)} dimensions, indexed with {len(own)}", stmt)
    resolved = list(parent.indices)
    for position, index in zip(free, own):
        outer = parent.indices[position]
        if isinstance(index, _Slice):
            lo = _plus(outer.lo, index.lo)
            hi = _plus(outer.lo, index.hi) if index.hi is not None else outer.hi
            resolved[position] = _Slice(outer.dim, lo, hi)
        else:
            resolved[position] = _plus(outer.lo, index)
    return _Alias(parent.view, resolved)


def _plus(a: ast.expr | None, b: ast.expr | None) -> ast.expr | None:
    if a is None:
        return b
    if b is None:
        return a
    return ast.BinOp(left=copy.deepcopy(a), op=ast.Add(), right=copy.deepcopy(b))


class _Rewriter(ast.NodeTransformer):
    def __init__(self, aliases: dict, error):
        self.aliases = aliases
        self.error = error

    def visit_Assign(self, node):
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and node.targets[0].id in self.aliases:
            return None  # the definition: nothing to compute at run time
        return self.generic_visit(node)

    def visit_AnnAssign(self, node):
        if isinstance(node.target, ast.Name) and node.target.id in self.aliases:
            return None
        return self.generic_visit(node)

    def visit_Subscript(self, node):
        base, indices = flatten_subscript(node)
        if not (isinstance(base, ast.Name) and base.id in self.aliases):
            return self.generic_visit(node)
        alias = self.aliases[base.id]
        indices = [self.visit(i) for i in indices]
        free = [p for p in alias.indices if isinstance(p, _Slice)]
        if len(indices) > len(free):
            raise self.error(f"subview '{base.id}' has {len(free)} dimensions, indexed with {len(indices)}", node)
        given = iter(indices)
        full = []
        for part in alias.indices:
            if isinstance(part, _Slice):
                index = next(given, None)
                if index is None:
                    raise self.error(f"subview '{base.id}' must be indexed in all its {len(free)} dimensions", node)
                full.append(_plus(part.lo, index))
            else:
                full.append(copy.deepcopy(part))
        return ast.copy_location(ast.Subscript(value=ast.Name(id=alias.view, ctx=ast.Load()),
                                               slice=ast.Tuple(elts=full, ctx=ast.Load()), ctx=node.ctx), node)

    def visit_Call(self, node):
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "extent" and isinstance(func.value, ast.Name) \
                and func.value.id in self.aliases:
            return ast.copy_location(self._extent(func.value.id, node), node)
        return self.generic_visit(node)

    def _extent(self, name: str, node: ast.Call) -> ast.expr:
        alias = self.aliases[name]
        free = [p for p in alias.indices if isinstance(p, _Slice)]
        if len(node.args) != 1 or not isinstance(node.args[0], ast.Constant) or \
                not isinstance(node.args[0].value, int) or not 0 <= node.args[0].value < len(free):
            raise self.error(f"{name}.extent(d) needs a constant d in 0..{len(free) - 1}", node)
        part = free[node.args[0].value]
        hi = part.hi if part.hi is not None else ast.Call(
            func=ast.Attribute(value=ast.Name(id=alias.view, ctx=ast.Load()), attr="extent", ctx=ast.Load()),
            args=[ast.Constant(value=part.dim)], keywords=[])
        if part.lo is None:
            return copy.deepcopy(hi)
        return ast.BinOp(left=copy.deepcopy(hi), op=ast.Sub(), right=copy.deepcopy(part.lo))

    def visit_Name(self, node):
        if node.id in self.aliases:
            raise self.error(f"subview '{node.id}' can only be indexed or asked its extent in a kernel", node)
        return node
