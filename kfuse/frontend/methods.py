"""Workunits written as methods (``@pk.workload`` / ``@pk.functor`` classes) become standalone kernels.

A method kernel reads its object's fields as ``self.x``. Rather than a second code path, each method is
rewritten once per class into a plain workunit whose extra parameters are the fields it uses (transitively,
through the ``@pk.function`` methods it calls as ``self.f(...)``); a call then passes the object's current
field values as those arguments. So a workload's calls are specialised, traced and fused exactly like
standalone workunits' calls, and the fuser sees the object's Views as the arguments they are.

Field types follow the annotations of the class's ``__init__`` (``self.n: int = ...``, ``self.a:
pk.View1D[pk.double] = ...``), as in PyKokkos; a field without one is typed by its value.
"""
from __future__ import annotations

import ast
import builtins
import copy
import functools
import typing

import numpy as np

from ..errors import ArgumentError, UnsupportedSyntaxError
from ..types import View1D, _ViewAnnotation
from .normalize import local_names, resolve_annotation
from .workunit import Function, ParsedFunction, Workunit, is_method, parse_function


class MethodKernel(Workunit):
    """A method workunit rewritten for one class: a standalone workunit with a parameter per field it uses."""

    def __init__(self, method: Workunit, cls: type, parsed: ParsedFunction, fields: dict):
        declared = getattr(cls, "_kfuse_view_types", {})  # @pk.workload(field=pk.ViewTypeInfo(...))
        super().__init__(method.fn, {**method.options, **{p: declared[f] for p, f in fields.items() if f in declared}})
        self.__name__ = method.__name__
        self.__dict__["parsed"] = parsed  # the rewritten function, instead of parsing fn
        self.cls = cls
        self.fields = fields  # parameter name -> field name

    def field_arguments(self, obj) -> dict:
        out = {}
        for param, field in self.fields.items():
            try:
                value = getattr(obj, field)
            except AttributeError:
                raise ArgumentError(f"workunit '{self.cls.__name__}.{self.__name__}' uses self.{field}, which this "
                                    f"{self.cls.__name__} object does not have") from None
            out[param] = _list_field(value, self.cls, field) if isinstance(value, (list, tuple)) else value
        return out


def _list_field(value, cls: type, field: str) -> np.ndarray:
    """A list field (``self.offsets: List[int]``) reaches kernels as a 1-D array of its value at the call."""
    declared = _field_annotations(cls).get(field)
    dtype = declared.dtype.np if isinstance(declared, _ViewAnnotation) and declared.dtype else None
    try:
        return np.array(value, dtype=dtype)
    except (TypeError, ValueError):
        raise ArgumentError(f"self.{field} of {cls.__name__} is a list a kernel cannot read (it must hold "
                            "numbers only)") from None


def kernel_for(method: Workunit, cls: type) -> MethodKernel:
    """The kernel of ``method`` for objects of ``cls`` (made once per class)."""
    kernel = method.class_kernels.get(cls)
    if kernel is None:
        kernel = method.class_kernels[cls] = _Rewrite(cls, method.parsed).kernel(method)
    return kernel


# --- field annotations ------------------------------------------------------------------------
@functools.cache
def _field_annotations(cls: type) -> dict:
    """field -> resolved annotation, from the ``self.f: T = ...`` assignments of the ``__init__``s of ``cls``
    and its bases (a subclass's own declaration wins). A list field is a 1-D View of its element type."""
    found: dict = {}
    for klass in reversed(cls.__mro__):
        init = klass.__dict__.get("__init__")
        if init is None or not hasattr(init, "__code__"):
            continue
        try:
            parsed = parse_function(init)
        except Exception:  # noqa: BLE001 - no readable source: fields are typed by value
            continue
        for node in ast.walk(parsed.tree):
            if isinstance(node, ast.AnnAssign) and _is_self_attribute(node.target):
                found[node.target.attr] = _annotation(parsed, node.annotation)
    return found


def _annotation(parsed, node):
    """The resolved annotation, or None when it is not one kernels use (the value's type then decides)."""
    try:
        value = resolve_annotation(parsed, node)
    except Exception:  # noqa: BLE001 - e.g. an annotation naming a host-only class
        return None
    if typing.get_origin(value) in (list, tuple):  # List[int]: a 1-D array of the element type in kernels
        args = typing.get_args(value)
        try:
            return View1D[args[0]] if args else View1D
        except TypeError:
            return View1D
    return value


def bare_fields(tree: ast.FunctionDef, namespace: dict, cls: type) -> set:
    """Names ``tree`` reads bare that mean the object's fields: PyKokkos compiles a class's methods to C++, where a
    member is in scope by its bare name (``A[j]`` for ``self.A``). Only names that are no local, parameter, global
    or builtin of the method, and that ``cls`` declares as fields, are taken so."""
    local = local_names(tree)
    declared = _field_annotations(cls)
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
            and n.id not in local and n.id not in namespace and not hasattr(builtins, n.id) and n.id in declared}


class ToSelf(ast.NodeTransformer):
    """Reads of the given bare names become ``self.<name>``."""

    def __init__(self, names: set):
        self.names = names

    def visit_Name(self, node):
        if node.id in self.names and isinstance(node.ctx, ast.Load):
            return ast.copy_location(ast.Attribute(value=ast.Name(id="self", ctx=ast.Load()), attr=node.id,
                                                   ctx=ast.Load()), node)
        return node


def _member_scoped(parsed: ParsedFunction, cls: type) -> ParsedFunction:
    names = bare_fields(parsed.tree, parsed.namespace, cls)
    if not names:
        return parsed
    tree = ast.fix_missing_locations(ToSelf(names).visit(copy.deepcopy(parsed.tree)))
    return ParsedFunction(fn=parsed.fn, name=parsed.name, tree=tree, filename=parsed.filename,
                          namespace=parsed.namespace)


def _is_self_attribute(node) -> bool:
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"


# --- the rewrite ------------------------------------------------------------------------------
class _Rewrite:
    """Rewrites a method and the ``@pk.function`` methods it calls for one class (see the module docstring)."""

    def __init__(self, cls: type, root: ParsedFunction):
        self.cls = cls
        root = _member_scoped(root, cls)
        self.parsed = {root.name: root}  # method name -> its parsed source, for the root and its helpers
        self.direct: dict = {}  # method name -> fields it uses itself
        self.calls: dict = {}  # method name -> helper methods it calls
        pending = [root.name]
        while pending:
            name = pending.pop()
            self._scan(name)
            for callee in self.calls[name]:
                if callee not in self.parsed:
                    self.parsed[callee] = _member_scoped(getattr(cls, callee).parsed, cls)
                    pending.append(callee)
        self.used = {name: self._closure(name) for name in self.parsed}
        taken = set().union(*(_names_in(p.tree) for p in self.parsed.values()))
        self.param = {f: _fresh(f, taken) for f in sorted(set().union(*self.used.values()))}
        self.helper_name = {m: _fresh(m, taken | set(self.param.values())) for m in self.parsed if m != root.name}
        self.root = root.name

    def _scan(self, name: str) -> None:
        parsed = self.parsed[name]
        nodes = list(ast.walk(parsed.tree))
        called = {id(n.func) for n in nodes if isinstance(n, ast.Call)}
        bases = {id(n.value) for n in nodes if isinstance(n, ast.Attribute)}
        fields, calls = set(), set()
        for node in nodes:
            if isinstance(node, ast.Call) and _is_self_attribute(node.func):
                calls.add(_method_called(self.cls, parsed, node))
            elif _is_self_attribute(node) and not isinstance(node.ctx, ast.Load):
                raise parsed.error(f"'{ast.unparse(node)}' is assigned in a kernel: a kernel cannot rebind its "
                                   "object's fields (each thread would change its own copy)", node,
                                   hint="write into a View field instead (self.x[i] = ...), or assign the field "
                                        "outside kernels", cls=UnsupportedSyntaxError)
            elif _is_self_attribute(node) and id(node) not in called:
                fields.add(node.attr)
            elif isinstance(node, ast.Name) and node.id == "self" and id(node) not in bases:
                raise parsed.error("'self' can only be used as self.field or self.method(...) in a kernel", node,
                                   cls=UnsupportedSyntaxError)
        self.direct[name] = fields
        self.calls[name] = calls

    def _closure(self, name: str, seen=None) -> set:
        seen = seen or set()
        seen.add(name)
        out = set(self.direct[name])
        for callee in self.calls[name]:
            if callee not in seen:
                out |= self._closure(callee, seen)
        return out

    def kernel(self, method: Workunit) -> MethodKernel:
        helpers = {m: Function(self.parsed[m].fn) for m in self.parsed if m != self.root}
        for m, fn in helpers.items():  # all made first: the rewritten helpers name each other
            fn.__name__ = self.helper_name[m]
        for m, fn in helpers.items():
            fn.__dict__["parsed"] = self._rewrite_one(m, helpers)
        return MethodKernel(method, self.cls, self._rewrite_one(self.root, helpers),
                            {self.param[f]: f for f in sorted(self.used[self.root])})

    def _rewrite_one(self, name: str, helpers: dict) -> ParsedFunction:
        parsed = self.parsed[name]
        tree = copy.deepcopy(parsed.tree)
        fields = sorted(self.used[name])
        annotations = _field_annotations(self.cls)
        tree.args.args = tree.args.args[1:] + [
            ast.arg(arg=self.param[f], annotation=_constant(annotations.get(f), tree)) for f in fields]
        tree = _SelfToParameters(self).visit(tree)
        ast.fix_missing_locations(tree)
        namespace = dict(parsed.namespace)
        namespace.update({self.helper_name[m]: fn for m, fn in helpers.items()})
        return ParsedFunction(fn=parsed.fn, name=parsed.name if name == self.root else self.helper_name[name],
                              tree=tree, filename=parsed.filename, namespace=namespace)


class _SelfToParameters(ast.NodeTransformer):
    """``self.f`` -> the field's parameter; ``self.m(args)`` -> ``m(args, <the fields m uses>)``."""

    def __init__(self, rewrite: _Rewrite):
        self.rewrite = rewrite

    def visit_Call(self, node):
        self.generic_visit(node)
        if isinstance(node.func, ast.Attribute) and node.func.attr in self.rewrite.helper_name \
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "self":
            callee = node.func.attr
            node.func = ast.copy_location(ast.Name(id=self.rewrite.helper_name[callee], ctx=ast.Load()), node.func)
            node.args = node.args + [ast.Name(id=self.rewrite.param[f], ctx=ast.Load())
                                     for f in sorted(self.rewrite.used[callee])]
        return node

    def visit_Attribute(self, node):
        if _is_self_attribute(node) and node.attr in self.rewrite.param:
            return ast.copy_location(ast.Name(id=self.rewrite.param[node.attr], ctx=ast.Load()), node)
        self.generic_visit(node)
        return node


def _method_called(cls: type, parsed: ParsedFunction, node: ast.Call) -> str:
    name = node.func.attr
    target = getattr(cls, name, None)
    if isinstance(target, Function) and is_method(target.fn):
        return name
    what = ("a workunit (launch it with pk.parallel_for/parallel_reduce instead)" if isinstance(target, Workunit)
            else "not a @pk.function method" if target is not None else f"not a method of {cls.__name__}")
    raise parsed.error(f"kernel calls self.{name}(...), which is {what}", node, cls=UnsupportedSyntaxError)


def _names_in(tree) -> set:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {a.arg for a in ast.walk(tree)
                                                                          if isinstance(a, ast.arg)}


def _fresh(name: str, taken: set) -> str:
    """``name`` itself when free in the rewritten functions, else ``self_name`` (and more underscores)."""
    candidate = name
    while candidate in taken or candidate == "self":
        candidate = "self_" + candidate
    return candidate


def _constant(annotation, where) -> ast.expr | None:
    """An already-resolved annotation, carried as a constant the front end takes as it is."""
    if annotation is None:
        return None
    return ast.copy_location(ast.Constant(value=annotation), where)
