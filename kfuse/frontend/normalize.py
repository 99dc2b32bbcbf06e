"""Resolve a parsed workunit's free names once, so later stages need no Python namespace.

After this pass a kernel AST is self-contained: numeric globals are literals, math and kfuse calls are
spelled ``pk.<canonical>`` whatever the user imported (``math.sqrt``, ``np.exp``, ``from math import
sqrt``), helpers are plain names listed in ``KernelSource.helpers``, and annotations hold resolved
type objects. That is what lets the fuser paste bodies from different modules into one kernel.
"""
from __future__ import annotations

import ast
import builtins
import copy
import math
from dataclasses import dataclass, field

import numpy as np

from .. import types as kt
from ..errors import UnsupportedSyntaxError
from ..ir.typing import ATOMIC_CALLS
from .subviews import inline_subviews
from .workunit import Function, ParsedFunction, Workunit

# Canonical names of the math functions kernels may call, keyed by the Python objects users reach them by.
MATH_NAMES = ("sqrt", "cbrt", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan",
              "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "fabs", "pow",
              "floor", "ceil", "trunc", "round", "fmin", "fmax", "fmod", "hypot", "isnan", "isinf", "isfinite",
              "erf", "erfc", "copysign", "abs", "fma", "tgamma", "lgamma")
KFUSE_CALLS = (*sorted(ATOMIC_CALLS), "printf", "parallel_for", "parallel_reduce", "parallel_scan",
               "TeamThreadRange", "ThreadVectorRange", "TeamVectorRange", "team_barrier")
BUILTIN_CALLS = ("abs", "min", "max", "int", "float", "bool", "range", "len", "round")


def _canonical_table() -> dict:
    import kfuse

    table = {}
    for name in MATH_NAMES:
        for module in (math, np, kfuse):
            obj = getattr(module, name, None)
            if obj is not None and callable(obj):
                table.setdefault(id(obj), name)
    table[id(np.absolute)] = "abs"
    table[id(np.power)] = "pow"
    table[id(np.arctan2)] = "atan2"
    table[id(np.minimum)] = "fmin"
    table[id(np.maximum)] = "fmax"
    for name in KFUSE_CALLS:
        obj = getattr(kfuse, name, None)
        if obj is not None:
            table[id(obj)] = name
    return table


_TABLE: dict | None = None


def canonical_name(obj) -> str | None:
    global _TABLE
    if _TABLE is None:
        _TABLE = _canonical_table()
    return _TABLE.get(id(obj))


def shadowed_math(func, namespace) -> bool:
    """Whether ``func``, a call's callee, is a bare math name bound to a workunit: it means the math function
    (see ``_Resolver.visit_Call``)."""
    return isinstance(func, ast.Name) and func.id in MATH_NAMES and isinstance(namespace.get(func.id), Workunit)


def math_function(name: str):
    return getattr(math, name, None) or getattr(np, name)


@dataclass(eq=False)
class KernelSource:
    """A kernel body ready for typing and codegen: AST plus the helpers it calls, all names resolved."""

    name: str
    tree: ast.FunctionDef
    filename: str
    helpers: dict = field(default_factory=dict)  # name -> KernelSource of a @pk.function
    annotations: dict = field(default_factory=dict)  # param name -> resolved annotation object

    def error(self, message, node=None, hint=None, cls=UnsupportedSyntaxError):
        return cls(message, workunit=self.name, filename=self.filename, node=node or self.tree, hint=hint)


def _local_names(tree: ast.FunctionDef) -> set[str]:
    names = {a.arg for a in tree.args.args}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, ast.FunctionDef) and node is not tree:
            names.add(node.name)
            names.update(a.arg for a in node.args.args)
    return names


class _Resolver(ast.NodeTransformer):
    def __init__(self, parsed: ParsedFunction, local: set[str], helpers: dict):
        self.parsed = parsed
        self.local = local
        self.helpers = helpers

    def error(self, message, node, hint=None):
        return self.parsed.error(message, node, hint, cls=UnsupportedSyntaxError)

    def _evaluate(self, node):
        """The Python object an attribute chain or free name denotes, or raise."""
        if isinstance(node, ast.Name):
            if node.id in self.parsed.namespace:
                return self.parsed.resolve(node.id)
            if hasattr(builtins, node.id):
                return getattr(builtins, node.id)
            raise self.error(f"name '{node.id}' is not a parameter, local variable or global constant", node)
        if isinstance(node, ast.Attribute):
            base = self._evaluate(node.value)
            try:
                return getattr(base, node.attr)
            except AttributeError:
                raise self.error(f"'{ast.unparse(node.value)}' has no attribute '{node.attr}'", node) from None
        raise self.error(f"cannot resolve '{ast.unparse(node)}'", node)

    def _is_local_chain(self, node) -> bool:
        while isinstance(node, ast.Attribute):
            node = node.value
        return isinstance(node, ast.Name) and node.id in self.local

    def _literal(self, value, node):
        if isinstance(value, (bool, int, float, np.integer, np.floating, np.bool_)):
            return ast.copy_location(ast.Constant(value=value.item() if hasattr(value, "item") else value), node)
        return None

    def visit_Name(self, node):
        if node.id in self.local or not isinstance(node.ctx, ast.Load):
            return node
        value = self._evaluate(node)
        literal = self._literal(value, node)
        if literal is not None:
            return literal
        if isinstance(value, Function):
            return self._helper_name(value, node)
        raise self.error(f"global '{node.id}' of type {type(value).__name__} cannot be used in a kernel", node,
                         hint="pass arrays and scalars as kernel arguments")

    def visit_Attribute(self, node):
        if self._is_local_chain(node):
            node.value = self.visit(node.value)
            return node
        value = self._evaluate(node)
        literal = self._literal(value, node)
        if literal is not None:
            return literal
        raise self.error(f"'{ast.unparse(node)}' cannot be used here in a kernel", node)

    def _helper_name(self, fn: Function, node):
        known = self.helpers.get(fn.__name__)
        if known is not None and known is not fn:
            raise self.error(f"two different helpers are both named '{fn.__name__}'", node)
        self.helpers[fn.__name__] = fn
        return ast.copy_location(ast.Name(id=fn.__name__, ctx=ast.Load()), node)

    def visit_Call(self, node):
        """Calls resolve as Python would, except that a bare math name bound to a workunit (``def sin`` made a
        workunit after ``from math import sin``) means the math function: a workunit cannot be called from a
        kernel, and PyKokkos, which translates calls by name, reads it so."""
        node.args = [self.visit(a) for a in node.args]
        node.keywords = [ast.keyword(arg=k.arg, value=self.visit(k.value)) for k in node.keywords]
        func = node.func
        if self._is_local_chain(func):  # method call on a local (team_member.team_rank(), A.extent(0))
            return node
        if isinstance(func, ast.Name) and func.id in BUILTIN_CALLS and func.id not in self.parsed.namespace:
            return node
        target = self._evaluate(func)
        if shadowed_math(func, self.parsed.namespace):
            target = math_function(func.id)
        if isinstance(target, Function):
            node.func = self._helper_name(target, func)
            return node
        name = canonical_name(target)
        if name is None and target in (abs, min, max, int, float, bool, range, len, round):
            node.func = ast.copy_location(ast.Name(id=target.__name__, ctx=ast.Load()), func)
            return node
        if name is None:
            raise self.error(f"call to '{ast.unparse(func)}' is not supported in a kernel", node,
                             hint="kernels may call math functions, pk.* atomics/printf, and @pk.function helpers")
        node.func = ast.copy_location(ast.Attribute(value=ast.Name(id="pk", ctx=ast.Load()), attr=name,
                                                    ctx=ast.Load()), func)
        return node

    def _evaluate_type(self, node):
        """Like ``_evaluate``, but a bare dtype name the program never bound (``x: double``, as PyKokkos reads
        annotations by name) denotes that dtype."""
        if isinstance(node, ast.Name) and node.id not in self.parsed.namespace and not hasattr(builtins, node.id) \
                and isinstance(getattr(kt, node.id, None), kt.DType):
            return getattr(kt, node.id)
        return self._evaluate(node)

    def resolve_annotation(self, ann):
        if ann is None:
            return None
        if isinstance(ann, ast.Constant) and not isinstance(ann.value, str):
            return ann.value  # resolved already (a method kernel's field, frontend/methods.py)
        if isinstance(ann, ast.Constant):
            ann = ast.parse(ann.value, mode="eval").body
        try:
            if isinstance(ann, ast.Subscript):
                base = self._evaluate(ann.value)
                arg = self._evaluate_type(ann.slice)
                return base[arg]
            return self._evaluate_type(ann)
        except Exception as exc:  # noqa: BLE001 - any failure here is a bad annotation
            if isinstance(exc, UnsupportedSyntaxError):
                raise
            raise self.error(f"cannot understand the annotation '{ast.unparse(ann)}'", ann) from None


def resolve_annotation(parsed: ParsedFunction, ann):
    """The object annotation ``ann`` (an AST expression in ``parsed``'s source) names."""
    return _Resolver(parsed, set(), {}).resolve_annotation(ann)


# Python constructs no kernel can contain, named as a user knows them. Rejected before names are resolved,
# so the error names the construct rather than a symptom (e.g. a lambda's parameter looking undefined).
UNSUPPORTED_CONSTRUCTS = {
    ast.Try: "try statement", ast.With: "with statement", ast.Raise: "raise statement",
    ast.Assert: "assert statement", ast.Delete: "del statement", ast.Global: "global statement",
    ast.Nonlocal: "nonlocal statement", ast.Import: "import statement", ast.ImportFrom: "import statement",
    ast.ClassDef: "class definition", ast.AsyncFunctionDef: "async function", ast.AsyncFor: "async for",
    ast.AsyncWith: "async with", ast.Await: "await", ast.Yield: "yield", ast.YieldFrom: "yield",
    ast.Lambda: "lambda", ast.ListComp: "list comprehension", ast.SetComp: "set comprehension",
    ast.DictComp: "dict comprehension", ast.GeneratorExp: "generator expression", ast.Dict: "dict literal",
    ast.Set: "set literal", ast.JoinedStr: "f-string", ast.NamedExpr: "assignment expression (:=)",
    ast.Starred: "starred expression", ast.Match: "match statement",
}


def check_constructs(parsed: ParsedFunction, tree: ast.FunctionDef) -> None:
    """Raise UnsupportedSyntaxError at the first (in source order) construct kernels cannot contain."""
    bad = [n for n in ast.walk(tree) if type(n) in UNSUPPORTED_CONSTRUCTS]
    if bad:
        node = min(bad, key=lambda n: (n.lineno, n.col_offset))
        raise parsed.error(f"unsupported construct: {UNSUPPORTED_CONSTRUCTS[type(node)]}", node,
                           "kernels support assignments, if/while/for-range loops, arithmetic, math calls, "
                           "View indexing and @pk.function helpers", cls=UnsupportedSyntaxError)


def normalize(parsed: ParsedFunction, kind: str = "workunit") -> KernelSource:
    """Return a resolved copy of ``parsed``'s AST (the cached original is never mutated)."""
    check_constructs(parsed, parsed.tree)
    tree = copy.deepcopy(parsed.tree)
    helpers: dict = {}
    resolver = _Resolver(parsed, _local_names(tree), helpers)
    annotations = {a.arg: resolver.resolve_annotation(a.annotation) for a in tree.args.args}
    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign):
            node.annotation = ast.Constant(value=resolver.resolve_annotation(node.annotation))
        elif isinstance(node, ast.FunctionDef) and node is not tree:
            for a in node.args.args:
                a.annotation = ast.Constant(value=resolver.resolve_annotation(a.annotation))
    for a in tree.args.args:
        a.annotation = None
    if tree.returns is not None:
        annotations["return"] = resolver.resolve_annotation(tree.returns)
        tree.returns = None
    tree.body = [resolver.visit(stmt) for stmt in tree.body]
    tree = inline_subviews(tree, lambda message, node: parsed.error(message, node, cls=UnsupportedSyntaxError))
    resolved_helpers = {name: normalize(fn.parsed, "function") for name, fn in helpers.items()}
    for sub in list(resolved_helpers.values()):  # helpers of helpers are visible to the kernel too
        for name, h in sub.helpers.items():
            resolved_helpers.setdefault(name, h)
    return KernelSource(name=parsed.name, tree=tree, filename=parsed.filename, helpers=resolved_helpers,
                        annotations=annotations)
