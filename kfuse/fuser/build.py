"""Build one kernel from a group of calls: rename each body's names apart, concatenate, merge params.

The result is an ordinary ``KernelSource`` + ``KernelSpec``, so it goes through the same translator,
compiler and cache as any workunit. Thread indices of all bodies become the fused kernel's indices;
every other name of call k gets the prefix ``k<k>_``; each reduction keeps its own accumulator, so one
launch delivers several results.
"""
from __future__ import annotations

import ast
import copy
import hashlib

from ..frontend.normalize import BUILTIN_CALLS, KernelSource
from ..frontend.spec import KernelSpec
from ..ir.lower import mark_origin

_MAX_NAME = 48


def fused_name(calls) -> str:
    """``add__mul``; long chains keep the first names (each cut to 24 characters) plus a hash of all."""
    name = "__".join(c.prepared.name for c in calls)
    if len(name) <= _MAX_NAME:
        return name
    digest = hashlib.sha1(name.encode()).hexdigest()[:8]
    return f"{'__'.join(c.prepared.name[:24] for c in calls[:3])}__{len(calls)}k_{digest}"


def same_helper(a: KernelSource, b: KernelSource) -> bool:
    """Whether two kernels' copies of a helper are interchangeable. Each kernel normalises its helpers
    itself, so a helper shared by two workunits arrives as two objects: compare the resolved code
    (fix, tests: identity refused fusing any two kernels that call the same helper)."""
    if a is b:
        return True
    return ast.dump(a.tree) == ast.dump(b.tree) and \
        {k: repr(v) for k, v in a.annotations.items()} == {k: repr(v) for k, v in b.annotations.items()}


class _Renamer(ast.NodeTransformer):
    def __init__(self, mapping: dict, prefix: str, keep: set):
        self.mapping = mapping
        self.prefix = prefix
        self.keep = keep

    def _new(self, name: str) -> str:
        if name in self.keep:
            return name
        return self.mapping.setdefault(name, self.prefix + name)

    def visit_Name(self, node):
        node.id = self._new(node.id)
        return node

    def visit_arg(self, node):
        node.arg = self._new(node.arg)
        return node

    def visit_FunctionDef(self, node):
        node.name = self._new(node.name)
        self.generic_visit(node)
        return node

    def visit_Call(self, node):
        func = node.func
        if isinstance(func, ast.Name) and func.id in self.keep:
            node.args = [self.visit(a) for a in node.args]
            return node
        self.generic_visit(node)
        return node

    def visit_Attribute(self, node):
        if isinstance(node.value, ast.Name) and node.value.id == "pk":
            return node
        self.generic_visit(node)
        return node


def build(calls, parts: tuple = ()) -> tuple[KernelSource, KernelSpec, str]:
    """The fused kernel for ``calls`` (all with the same policy, already proven safe to fuse). ``parts``: a
    horizontal group's (calls, begin, end) per part (pipeline.group_key): thread t < the first part's length runs
    the first part's calls at index begin + t, the next lengths the next part's, and so on."""
    first = calls[0].prepared
    rank = first.spec.rank
    index_names = [f"i{d}" for d in range(rank)]
    helpers: dict = {}
    acc_args, user_args, body, params, accs = [], [], [], [], []
    owners = [p for p, (count, _, _) in enumerate(parts) for _ in range(count)] if parts else [None] * len(calls)
    for k, (call, part) in enumerate(zip(calls, owners)):
        src, spec = call.prepared.source, call.prepared.spec
        for name, helper in src.helpers.items():
            if not same_helper(helpers.setdefault(name, helper), helper):
                raise ValueError(f"two helpers named '{name}' in one fused kernel")  # planner keeps them apart
        tree = copy.deepcopy(src.tree)
        mark_origin(tree, src.name, src.filename, k)
        names = [a.arg for a in tree.args.args]
        mapping = dict(zip(names[:rank], index_names if part is None else [_part_index(part)]))
        # Thread indices are renamed through ``mapping``, not kept: a local that happens to be called
        # 'i0' must get the k<k>_ prefix, or it would become the fused kernel's thread index (fix, tests).
        keep = set(src.helpers) | set(BUILTIN_CALLS)
        renamer = _Renamer(mapping, f"k{k}_", keep)
        statements = [renamer.visit(stmt) for stmt in tree.body
                      if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant))]  # docstrings
        body.append((part, statements))
        if spec.op == "reduce":
            acc_args.append(renamer._new(names[rank]))
            accs.extend(spec.accs)
        for name, t in spec.params:
            params.append((renamer._new(name), t))
            user_args.append(renamer._new(name))
    statements = _split_threads(body, parts) if parts else [s for _, part in body for s in part]
    args = [ast.arg(arg=n) for n in index_names + acc_args + user_args]
    tree = ast.FunctionDef(name=fused_name(calls), args=ast.arguments(posonlyargs=[], args=args, vararg=None,
                                                                      kwonlyargs=[], kw_defaults=[], kwarg=None,
                                                                      defaults=[]),
                           body=statements or [ast.Pass()], decorator_list=[], returns=None, type_comment=None,
                           lineno=first.source.tree.lineno, col_offset=0)
    ast.fix_missing_locations(tree)
    source = KernelSource(name=tree.name, tree=tree, filename=first.source.filename, helpers=helpers)
    spec = KernelSpec(op="reduce" if accs else "for", policy=first.spec.policy, rank=rank, params=tuple(params),
                      accs=tuple(accs), space=first.spec.space)
    return source, spec, tree.name


def _part_index(part: int) -> str:
    return f"h{part}_i"


def _split_threads(body: list, parts: tuple) -> list:
    """``if i0 < n0: <part 0> elif i0 < n0 + n1: <part 1> ... else: <last part>``, each part first setting its
    calls' index, ``h<p>_i: int = i0 + begin - (threads before the part)``."""
    by_part: dict = {}
    for part, statements in body:
        by_part.setdefault(part, []).extend(statements)
    before = 0
    branches = []
    for p, (_, begin, end) in enumerate(parts):
        shift = begin - before
        index = ast.AnnAssign(target=ast.Name(id=_part_index(p), ctx=ast.Store()),
                              annotation=ast.Constant(value=int),
                              value=ast.BinOp(left=ast.Name(id="i0", ctx=ast.Load()), op=ast.Add() if shift >= 0
                                              else ast.Sub(), right=ast.Constant(value=abs(shift))), simple=1)
        before += end - begin
        branches.append((before, [index] + by_part.get(p, [])))
    chain = branches[-1][1]
    for limit, statements in reversed(branches[:-1]):
        test = ast.Compare(left=ast.Name(id="i0", ctx=ast.Load()), ops=[ast.Lt()], comparators=[ast.Constant(value=limit)])
        chain = [ast.If(test=test, body=statements, orelse=chain)]
    return chain
