"""Resolve a parsed workunit's free names once, so later stages need no Python namespace.

After this pass a kernel AST is self-contained: numeric globals are literals, math and kfuse calls are
spelled ``pk.<canonical>`` whatever the user imported (``math.sqrt``, ``np.exp``, ``from math import
sqrt``), helpers are plain names listed in ``KernelSource.helpers``, and annotations hold resolved
type objects. That is what lets the fuser paste bodies from different modules into one kernel.

A ``@pk.classtype`` becomes a ``StructType`` (its fields, declared in ``__init__``) wherever it is named in
an annotation, and its members join the helpers: ``Cls`` is its ``__init__`` (so ``Cls(args)`` reads as a
helper call) and ``Cls.method`` each method some kernel body calls by that name.
"""
from __future__ import annotations

import ast
import builtins
import copy
import inspect
import itertools
import math
from dataclasses import dataclass, field

import numpy as np

from .. import types as kt
from ..errors import KernelTypeError, UnsupportedSyntaxError
from ..ir.nodes import StructType
from ..ir.typing import ATOMIC_CALLS, annotation_dtype
from .subviews import inline_subviews
from .workunit import Function, ParsedFunction, Workunit, is_classtype, parsed_method

# Canonical names of the math functions kernels may call, keyed by the Python objects users reach them by.
MATH_NAMES = ("sqrt", "cbrt", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan",
              "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "fabs", "pow",
              "floor", "ceil", "trunc", "round", "fmin", "fmax", "fmod", "hypot", "isnan", "isinf", "isfinite",
              "erf", "erfc", "copysign", "abs", "fma", "tgamma", "lgamma")
KFUSE_CALLS = (*sorted(ATOMIC_CALLS), "printf", "parallel_for", "parallel_reduce", "parallel_scan",
               "TeamThreadRange", "ThreadVectorRange", "TeamVectorRange", "TeamThreadMDRange", "ThreadVectorMDRange",
               "TeamVectorMDRange", "team_barrier", "single", "PerTeam", "PerThread",
               *(f"ScratchView{rank}D" for rank in range(1, 9)))
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
    helpers: dict = field(default_factory=dict)  # name -> KernelSource of a @pk.function or classtype member
    annotations: dict = field(default_factory=dict)  # param name -> resolved annotation object
    struct: StructType | None = None  # of a classtype's __init__ or method: its class

    def error(self, message, node=None, hint=None, cls=UnsupportedSyntaxError):
        return cls(message, workunit=self.name, filename=self.filename, node=node or self.tree, hint=hint)


def local_names(tree: ast.FunctionDef) -> set[str]:
    """The names a function binds itself (parameters, assignments, nested defs and their parameters)."""
    names = {a.arg for a in tree.args.args}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, ast.FunctionDef) and node is not tree:
            names.add(node.name)
            names.update(a.arg for a in node.args.args)
    return names


class _Resolver(ast.NodeTransformer):
    """Resolves one function's free names; ``helpers`` collects the helpers and classtypes it names
    (name -> (object, first node)), ``methods`` the names it calls as methods (``x.name(...)``)."""

    def __init__(self, parsed: ParsedFunction, local: set[str]):
        self.parsed = parsed
        self.local = local
        self.helpers: dict = {}
        self.methods: set = set()

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
        if not isinstance(node.value, (ast.Name, ast.Attribute)):  # a field of a value (``make().x``)
            node.value = self.visit(node.value)
            return node
        value = self._evaluate(node)
        literal = self._literal(value, node)
        if literal is not None:
            return literal
        raise self.error(f"'{ast.unparse(node)}' cannot be used here in a kernel", node)

    def _helper_name(self, fn, node):
        """A helper or classtype, named in the body by its own name."""
        known = self.helpers.setdefault(fn.__name__, (fn, node))[0]
        if known is not fn:
            raise self.error(f"two different helpers or classtypes are both named '{fn.__name__}'", node)
        return ast.copy_location(ast.Name(id=fn.__name__, ctx=ast.Load()), node)

    def visit_Call(self, node):
        """Calls resolve as Python would, except that a bare math name bound to a workunit (``def sin`` made a
        workunit after ``from math import sin``) means the math function: a workunit cannot be called from a
        kernel, and PyKokkos, which translates calls by name, reads it so."""
        node.args = [self.visit(a) for a in node.args]
        node.keywords = [ast.keyword(arg=k.arg, value=self.visit(k.value)) for k in node.keywords]
        func = node.func
        if self._is_local_chain(func):  # method call on a local (team_member.team_rank(), A.extent(0))
            if isinstance(func, ast.Attribute):
                self.methods.add(func.attr)
            return node
        if isinstance(func, ast.Attribute) and not isinstance(func.value, (ast.Name, ast.Attribute)):
            func.value = self.visit(func.value)  # a method of a value (``make().norm()``)
            self.methods.add(func.attr)
            return node
        if isinstance(func, ast.Name) and func.id in BUILTIN_CALLS and func.id not in self.parsed.namespace:
            return node
        target = self._evaluate(func)
        if shadowed_math(func, self.parsed.namespace):
            target = math_function(func.id)
        if isinstance(target, Function) or is_classtype(target):
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
        """The object ``ann`` names; a classtype is recorded as one the function uses."""
        value = self._annotation(ann)
        if is_classtype(value):
            self._helper_name(value, ann)
        return value

    def _annotation(self, ann):
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
    return _Resolver(parsed, set()).resolve_annotation(ann)


# Python constructs no kernel can contain, named as a user knows them. Rejected before names are resolved,
# so the error names the construct rather than a symptom (e.g. a lambda's parameter looking undefined).
UNSUPPORTED_CONSTRUCTS = {
    ast.Try: "try statement", ast.With: "with statement", ast.Raise: "raise statement",
    ast.Assert: "assert statement", ast.Delete: "del statement", ast.Global: "global statement",
    ast.Import: "import statement", ast.ImportFrom: "import statement",
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


def _resolve(parsed: ParsedFunction) -> tuple[KernelSource, _Resolver]:
    """A resolved copy of one function's AST (the cached original is never mutated), and what it names."""
    check_constructs(parsed, parsed.tree)
    tree = copy.deepcopy(parsed.tree)
    resolver = _Resolver(parsed, local_names(tree))
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
    return KernelSource(name=parsed.name, tree=tree, filename=parsed.filename, annotations=annotations), resolver


def normalize(parsed: ParsedFunction, kind: str = "workunit") -> KernelSource:
    """The resolved kernel with every helper and classtype member it reaches, each resolved once (so helpers
    calling each other terminate here; the lowering rejects the recursion) and sharing one table."""
    source, resolver = _resolve(parsed)
    table: dict = {}
    owners: dict = {}  # name -> the one helper or class it stands for in this kernel
    classes: dict = {}
    methods: set = set()
    pending = [resolver]
    while pending:
        current = pending.pop()
        methods |= current.methods
        for name, (obj, node) in current.helpers.items():
            if owners.setdefault(name, obj) is not obj:
                raise current.error(f"two different helpers or classtypes are both named '{name}'", node)
            if name in table:
                continue
            if is_classtype(obj):
                classes[name] = obj
                init = _constructor(obj, current, node)
                table[name], sub = _resolve(init)
                table[name].struct = _struct(obj, init, table[name].tree)
            else:
                table[name], sub = _resolve(obj.parsed)
            pending.append(sub)
        if not pending:  # all reached so far is resolved: add the methods of its classtypes that it calls
            for (name, cls), method in itertools.product(classes.items(), sorted(methods - {"__init__"})):
                member = parsed_method(cls, method)
                if member is not None and f"{name}.{method}" not in table:
                    table[f"{name}.{method}"], sub = _resolve(member)
                    table[f"{name}.{method}"].struct = table[name].struct
                    pending.append(sub)
    structs = {name: table[name].struct for name in classes}
    for src in (source, *table.values()):
        src.helpers = table
        _annotate_structs(src, structs)
    return source


def _annotate_structs(src: KernelSource, structs: dict) -> None:
    """Annotations naming a classtype hold its StructType from here on: the IR's type of its values."""
    def typed(value):
        return structs[value.__name__] if is_classtype(value) else value

    for node in ast.walk(src.tree):
        if isinstance(node, ast.Constant):
            node.value = typed(node.value)
    src.annotations = {k: typed(v) for k, v in src.annotations.items()}


def _constructor(cls, resolver: _Resolver, node) -> ParsedFunction:
    """The ``__init__`` of classtype ``cls``, which ``resolver``'s function names at ``node``."""
    if cls.__bases__ != (object,):
        raise resolver.error(f"classtype '{cls.__name__}' has base classes; classtypes cannot inherit", node)
    member = parsed_method(cls, "__init__")
    if member is None or not member.tree.args.args:
        raise resolver.error(f"classtype '{cls.__name__}' has no __init__(self, ...) declaring its fields", node,
                             hint="declare each field in __init__ as 'self.name: type = value'")
    return member


def _struct(cls, init: ParsedFunction, tree: ast.FunctionDef) -> StructType:
    """The fields a classtype's ``__init__`` declares: each ``self.f: T = v`` at the top level of its body,
    T a scalar type. In Python a field exists once assigned, so no statement may use a field before its
    declaration, nor ``self`` as a whole (a method call, an argument) or ``return`` come before every field
    is declared."""
    me = tree.args.args[0].arg
    methods = {n for n, v in vars(cls).items() if inspect.isfunction(v)}
    declared: dict = {}
    body = [s for s in tree.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    declarations = [s for s in body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Attribute)
                    and isinstance(s.target.value, ast.Name) and s.target.value.id == me]
    last = body.index(declarations[-1]) if declarations else -1
    for position, stmt in enumerate(body):
        target = stmt.target if stmt in declarations else None
        early = next((n for n in ast.walk(stmt) if isinstance(n, ast.Return)), None) if position < last else None
        if early is not None:
            raise init.error("__init__ returns before it declares all its fields", early,
                             "declare every field first", cls=KernelTypeError)
        for node, attr in _self_uses(stmt, me, methods):
            if attr is None and position < last:
                raise init.error(f"'{me}' is used before __init__ declares all its fields", node,
                                 "declare every field first", cls=KernelTypeError)
            if attr is not None and attr not in declared and node is not target:
                raise init.error(f"field '{attr}' is used before __init__ declares it", node,
                                 "declare each field at the top level of __init__, as 'self.name: type = value', "
                                 "before any use", cls=KernelTypeError)
        if target is not None:
            dtype = annotation_dtype(stmt.annotation.value)
            if dtype is None:
                raise init.error(f"field '{target.attr}' of classtype '{cls.__name__}' is annotated "
                                 f"{stmt.annotation.value!r}; fields are scalars", stmt,
                                 "annotate fields with int, float, bool or pk.<dtype>", cls=KernelTypeError)
            if target.attr in methods or target.attr.startswith("__"):
                what = "the name of a method" if target.attr in methods else "a name Python mangles, private to"
                raise init.error(f"field '{target.attr}' has {what} of '{cls.__name__}'", stmt,
                                 cls=KernelTypeError)
            if declared.setdefault(target.attr, dtype) != dtype:
                raise init.error(f"field '{target.attr}' is declared as {declared[target.attr].name} and as "
                                 f"{dtype.name}", stmt, cls=KernelTypeError)
    return StructType(cls.__name__, tuple(declared.items()))


def _self_uses(stmt, me: str, methods: set):
    """(node, field) for each use of ``me`` under ``stmt``: ``me.field`` gives its Attribute and the field's
    name, any other use (``me`` as an argument, ``me.method(...)``) the Name and None."""
    calls = {id(n.func) for n in ast.walk(stmt) if isinstance(n, ast.Call)}
    bases = set()
    for node in ast.walk(stmt):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == me \
                and not (node.attr in methods and id(node) in calls):
            bases.add(id(node.value))
            yield node, node.attr
    for node in ast.walk(stmt):
        if isinstance(node, ast.Name) and node.id == me and id(node) not in bases:
            yield node, None
