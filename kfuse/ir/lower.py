"""Lower a kernel's resolved Python AST to the typed IR, once its specialisation is known.

The lowering types every value with the kernel typing rules (``typing``), which are what the emitted C++
computes, so the IR's types are the C++ program's. It raises the user's syntax and type errors, pointing
at the source they are about.
"""
from __future__ import annotations

import ast
import copy

from ..errors import KernelTypeError, UnsupportedSyntaxError
from ..types import DType
from . import nodes as ir
from . import printf
from . import typing as rules
from .nodes import TEAM, Loc, ViewType
from .pyast import flatten_subscript
from .typing import BOOL, F64, I64, Unknown

_TEAM_QUERIES = ("league_rank", "team_rank", "team_size", "league_size")
_NESTED_RANGES = ("TeamThreadRange", "ThreadVectorRange", "TeamVectorRange")
_EXPR_NAMES = {ast.List: "list literal", ast.Tuple: "tuple", ast.Slice: "slice"}


def value_type(arg_type):
    """The IR type of a kernel argument's ``ArgType`` (a View) or DType (a scalar)."""
    if getattr(arg_type, "is_view", False):
        return ViewType(arg_type.dtype, arg_type.ndim, arg_type.layout)
    return getattr(arg_type, "dtype", arg_type)


def roles(source, spec) -> tuple:
    """The workunit's parameter names split into thread indices (or the team), accumulators, scan flag."""
    names = [a.arg for a in source.tree.args.args]
    n_index = 1 if spec.policy == "team" else spec.rank
    n_acc = len(spec.accs)
    n_flag = 1 if spec.op == "scan" else 0
    return names[:n_index], names[n_index:n_index + n_acc], names[n_index + n_acc:n_index + n_acc + n_flag]


def mark_origin(tree: ast.AST, workunit: str, filename: str, member: int) -> None:
    """Tag every node of a fused member's AST before fusion renames it (``kf_origin``, read by ``loc`` and
    ``user_view`` below): faults in the fused kernel then name the member (its position, workunit, file and,
    for Views, its own parameter name), as the unfused call would."""
    for node in ast.walk(tree):
        node.kf_origin = (workunit, filename, getattr(node, "id", None), member)


def lower(source, spec) -> ir.Kernel:
    """The IR of ``source`` (a ``KernelSource``) specialised as ``spec`` (a ``KernelSpec``)."""
    index_names, acc_names, flag_names = roles(source, spec)
    params = tuple((n, value_type(t)) for n, t in spec.params)
    if spec.policy == "team":
        threads = ((index_names[0], TEAM),)
    else:
        threads = tuple((n, I64) for n in index_names)
    accs = tuple(zip(acc_names, spec.accs))
    flags = tuple((n, BOOL) for n in flag_names)
    scope = {n: ("view" if isinstance(t, ViewType) else "scalar", t) for n, t in params}
    scope.update({n: ("team" if t == TEAM else "scalar", t) for n, t in threads + accs + flags})
    helpers = _Helpers(source.helpers)
    body = _Lowerer(source, source, helpers, scope, accumulators=set(acc_names))
    copies = [n for n, t in params + threads + flags if not isinstance(t, ViewType) and t != TEAM]
    locals_, stmts = body.function_body(_assignable(source.tree, copies).body)
    return ir.Kernel(source.name, spec.op, spec.policy, threads, accs, flags, params, locals_, stmts,
                     tuple(helpers.functions), tuple(body.first_helpers),
                     loc=Loc(source.filename, source.tree.lineno))


def _assignable(tree: ast.FunctionDef, scalars: list) -> ast.FunctionDef:
    """``tree`` with each scalar parameter it assigns (``i -= 1``, as Python allows) read through a local copy:
    in the kernel, thread indices and scalar arguments are constants."""
    stored = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    assigned = [n for n in scalars if n in stored]
    if not assigned:
        return tree
    taken = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {a.arg for a in ast.walk(tree)
                                                                         if isinstance(a, ast.arg)}
    copies = {}
    for name in assigned:
        copy_name = name + "_local"
        while copy_name in taken:
            copy_name += "_"
        copies[name] = copy_name
    tree = copy.deepcopy(tree)
    for node in (n for stmt in tree.body for n in ast.walk(stmt)):  # nested defs' parameters too: same scope rules
        if isinstance(node, ast.Name) and node.id in copies:
            node.id = copies[node.id]
        elif isinstance(node, ast.arg) and node.arg in copies:
            node.arg = copies[node.arg]
    first = tree.body[0]
    tree.body[:0] = [ast.copy_location(ast.Assign(targets=[ast.Name(id=local, ctx=ast.Store())],
                                                  value=ast.Name(id=name, ctx=ast.Load())), first)
                     for name, local in copies.items()]
    return ast.fix_missing_locations(tree)


def lowered(source, spec) -> ir.Kernel:
    """``lower(source, spec)``, once per source object and spec: the access analysis, the fuser's safety
    proof and codegen share it (kept on the source, which is never changed once built)."""
    cache = source.__dict__.setdefault("_kfuse_ir", {})
    kernel = cache.get(spec)
    if kernel is None:
        kernel = cache[spec] = lower(source, spec)
    return kernel


class _Helpers:
    """The ``@pk.function`` instances a kernel calls, numbered in the order their first calls are lowered."""

    def __init__(self, sources: dict):
        self.sources = sources  # name -> KernelSource
        self.instances: dict = {}  # (name, argument types) -> (index, return type)
        self.functions: list = []
        self._active: set = set()

    def instance(self, name: str, arg_types: tuple, node, caller, kernel) -> tuple:
        """(index, return type) of the instance of ``name`` for ``arg_types``, lowered at its first call."""
        key = (name, arg_types)
        if key in self.instances:
            return self.instances[key]
        if name in self._active:
            raise caller.error(f"helper '{name}' calls itself; recursion is not supported in kernels", node)
        src = self.sources[name]
        typed = rules.helper_params(name, src, arg_types, node, caller)
        self._active.add(name)
        scope = {n: ("view" if isinstance(t, ViewType) else "scalar", t) for n, t in typed}
        body = _Lowerer(src, kernel, self, scope, in_helper=True)
        locals_, stmts = body.function_body(src.tree.body)
        ret = rules.helper_return(src, body.return_types)
        self._active.discard(name)
        self.instances[key] = (len(self.functions), ret)
        self.functions.append(ir.Function(name, tuple(typed), ret, locals_, stmts, tuple(body.first_helpers),
                                          loc=Loc(src.filename, src.tree.lineno)))
        return self.instances[key]


class _Lowerer:
    """Lowers one function body (workunit, helper or nested def) given the names it starts with.

    ``scope``: name -> (kind, type), kind "scalar" | "view" | "team" | "lambda" (type: the FunctionDef
    and its accumulator type)."""

    def __init__(self, src, kernel, helpers: _Helpers, scope: dict, in_helper: bool = False,
                 accumulators: frozenset = frozenset()):
        self.src = src
        self.kernel = kernel  # the workunit's KernelSource (src is a helper's inside a helper)
        self.helpers = helpers
        self.scope = dict(scope)
        self.in_helper = in_helper
        self.accumulators = accumulators
        self.return_types: list = []
        self.loop_vars: set = set()
        self.inferring = False
        self.first_helpers: list = []  # helper instances first called while typing the locals
        self._tmp = 0  # numbers loops and nested reductions, as typing and then the statements meet them
        self._statements: list = []  # enclosing statements, innermost last

    # --- errors and locations -------------------------------------------------------------
    def unsupported(self, what: str, node, hint: str | None = None):
        return self.src.error(f"unsupported construct: {what}", node, hint, cls=UnsupportedSyntaxError)

    def type_error(self, what: str, node, hint: str | None = None):
        return self.src.error(what, node, hint, cls=KernelTypeError)

    def loc(self, node) -> Loc:
        """Where ``node`` is: a fused member's file and position (``kf_origin``, of the node or, for one a
        transform made, of a node inside it or around it), else this function's file."""
        origin = next((n.kf_origin for n in ast.walk(node) if hasattr(n, "kf_origin")), None)
        for stmt in reversed(self._statements):
            origin = origin or getattr(stmt, "kf_origin", None)
        line = getattr(node, "lineno", None) or next(
            (s.lineno for s in reversed(self._statements) if getattr(s, "lineno", None)), 0)
        if origin is not None and self.src is self.kernel:
            return Loc(origin[1], line, origin[3], origin[0])
        return Loc(self.src.filename, line)

    def user_view(self, node) -> str:
        """A View's name as its workunit spells it (a fused member's own parameter name)."""
        origin = getattr(node, "kf_origin", None)
        return (origin[2] if origin else None) or ast.unparse(node)

    # --- bodies ----------------------------------------------------------------------------
    def function_body(self, stmts) -> tuple:
        """(hoisted locals, statements): locals are typed first, as Python scopes them function-wide."""
        def type_of(value, types, lambdas):
            saved = dict(self.scope)
            self.scope.update({n: ("lambda", (d, rules.lambda_acc_type(d))) for n, d in lambdas.items()})
            self.scope.update({n: ("scalar", t) for n, t in types.items()})
            try:
                return self.expr(value).type
            finally:
                self.scope = saved

        self.inferring = True
        try:
            found, self.loop_vars = rules.infer_locals(stmts, self.scope, type_of, self)
        finally:
            self.inferring = False
        for name, dtype in found.items():
            self.scope[name] = ("scalar", dtype)
        return tuple(found.items()), self.block(stmts)

    def block(self, stmts) -> tuple:
        out: list = []
        for stmt in stmts:
            method = getattr(self, "stmt_" + type(stmt).__name__, None)
            if method is None:
                raise self.unsupported(f"'{type(stmt).__name__}' statement", stmt)
            self._statements.append(stmt)
            try:
                out.extend(method(stmt))
            finally:
                self._statements.pop()
        return tuple(out)

    # --- statements ------------------------------------------------------------------------
    def stmt_Pass(self, node):
        return []

    def stmt_Break(self, node):
        return [ir.Break(loc=self.loc(node))]

    def stmt_Continue(self, node):
        return [ir.Continue(loc=self.loc(node))]

    def stmt_Return(self, node):
        if node.value is None:
            return [ir.Return(loc=self.loc(node))]
        if not self.in_helper:
            raise self.unsupported("returning a value from a workunit", node,
                                   "write results into a View or use parallel_reduce with an accumulator")
        value = self.expr(node.value)
        if not isinstance(value.type, DType):
            raise self.unsupported("returning a View from a helper", node)
        self.return_types.append(value.type)
        return [ir.Return(value, loc=self.loc(node))]

    def stmt_Expr(self, node):
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return []  # docstring
        if not isinstance(node.value, ast.Call):
            raise self.unsupported("an expression statement with no effect", node)
        effect = self.call(node.value, statement=True)
        return [effect if isinstance(effect, (ir.Print, ir.Barrier)) else ir.Eval(effect, loc=self.loc(node))]

    def _target(self, target):
        """(kind, what, indices, type) of an assignment target: a local or accumulator (``what``: its name)
        or a View element (``what``: its Load)."""
        if isinstance(target, ast.Name):
            sym = self.scope.get(target.id)
            if sym is None:
                raise self.type_error(f"assignment to unknown name '{target.id}'", target)
            if sym[0] != "scalar":
                raise self.unsupported(f"assigning to {sym[0]} '{target.id}'", target)
            return ("acc" if target.id in self.accumulators else "local"), target.id, (), sym[1]
        if isinstance(target, ast.Subscript):
            load = self.subscript(target)
            if isinstance(load, ir.Load):
                return "store", load, load.indices, load.type
        raise self.unsupported(f"assignment target '{ast.unparse(target)}'", target)

    def _assign(self, target, value, node, op=None):
        kind, what, indices, t = self._target(target)
        if kind == "store":  # where the element is, as a load of it would be
            return ir.Store(what.view, indices, value, t, op, text=ast.unparse(target), user_view=what.user_view,
                            loc=what.loc)
        cls = ir.Accumulate if kind == "acc" else ir.Assign
        return cls(what, t, value, op, loc=self.loc(node))

    def stmt_Assign(self, node):
        value = self.expr(node.value)
        out = []
        for target in node.targets:
            t = self._target(target)[3]
            out.append(self._assign(target, _convert(value, t), node))
        return out

    def stmt_AnnAssign(self, node):
        if node.value is None:
            return []
        return self.stmt_Assign(ast.Assign(targets=[node.target], value=node.value, lineno=node.lineno,
                                           col_offset=node.col_offset))

    def stmt_AugAssign(self, node):
        t = self._target(node.target)[3]
        op = rules.BINOPS.get(type(node.op))
        if op in ("+", "-", "*", "&", "|", "^"):
            return [self._assign(node.target, self.expr(node.value), node, op)]
        current = self._current(node.target)
        return [self._assign(node.target, _convert(self.binop(node.op, current, self.expr(node.value), node), t),
                             node)]

    def _current(self, target):
        if isinstance(target, ast.Name):
            return ir.Name(target.id, self.scope[target.id][1], loc=self.loc(target))
        return self.subscript(target)

    def stmt_If(self, node):
        test = self.expr(node.test)
        return [ir.If(test, self.block(node.body), self.block(node.orelse), loc=self.loc(node))]

    def stmt_While(self, node):
        if node.orelse:
            raise self.unsupported("while ... else", node)
        test = self.expr(node.test)
        return [ir.While(test, self.block(node.body), loc=self.loc(node))]

    def stmt_For(self, node):
        if node.orelse:
            raise self.unsupported("for ... else", node)
        it = node.iter
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"
                and not it.keywords and 1 <= len(it.args) <= 3):
            raise self.unsupported(f"for loop over '{ast.unparse(it)}'", node, "loop over range(...)")
        if not isinstance(node.target, ast.Name):
            raise self.unsupported("for loop with a tuple target", node)
        args = [self.expr(a) for a in it.args]
        for arg, a in zip(args, it.args):
            if not (isinstance(arg.type, DType) and not arg.type.is_float):
                raise self.type_error(f"range() needs integers, got {arg.type} in '{ast.unparse(a)}'", a)
        one = ir.Const(1, I64, loc=self.loc(it))
        start, stop, step = (ir.Const(0, I64, loc=self.loc(it)), args[0], one) if len(args) == 1 else \
            (args[0], args[1], args[2] if len(args) == 3 else one)
        self._tmp += 1
        tmp = self._tmp
        var = node.target.id
        scoped = not (var in self.scope and var not in self.loop_vars)
        saved = self.scope.get(var)
        if scoped:
            self.scope[var] = ("scalar", I64)
        body = self.block(node.body)
        if scoped:
            if saved is None:
                del self.scope[var]
            else:
                self.scope[var] = saved
        return [ir.For(var, start, stop, step, body, scoped, len(args) == 3, tmp, loc=self.loc(node))]

    def stmt_FunctionDef(self, node):
        """A nested def inside a team workunit: the body of nested parallelism."""
        params = node.args.args
        if not params:
            raise self.unsupported("a nested function without an index parameter", node)
        scope = dict(self.scope)
        typed = [(params[0].arg, I64)]
        acc_type = rules.lambda_acc_type(node)
        if len(params) >= 2:
            typed.append((params[1].arg, acc_type))
        if len(params) >= 3:
            typed.append((params[2].arg, BOOL))
        scope.update({n: ("scalar", t) for n, t in typed})
        inner = _Lowerer(self.src, self.kernel, self.helpers, scope, in_helper=True)
        locals_, body = inner.function_body(node.body)
        if inner.return_types:
            raise self.unsupported("returning a value from a nested parallel body", node)
        self.scope[node.name] = ("lambda", (node, acc_type))
        return [ir.Lambda(node.name, tuple(typed), locals_, body, tuple(inner.first_helpers), loc=self.loc(node))]

    # --- expressions -----------------------------------------------------------------------
    def expr(self, node):
        if isinstance(node, ast.Call):
            value = self.call(node)
            if isinstance(value, (ir.Print, ir.Barrier)):
                raise self.type_error(f"'{ast.unparse(node)}' has no value", node)
            return value
        method = getattr(self, "expr_" + type(node).__name__, None)
        if method is None:
            kind = _EXPR_NAMES.get(type(node), type(node).__name__)
            raise self.unsupported(f"{kind} '{ast.unparse(node)}'", node)
        return method(node)

    def expr_Constant(self, node):
        v = node.value
        loc = self.loc(node)
        if isinstance(v, bool):
            return ir.Const(v, BOOL, loc=loc)
        if isinstance(v, int):
            if not -(2 ** 63) <= v < 2 ** 63:
                raise self.type_error(f"integer constant {v} does not fit in 64 bits", node)
            return ir.Const(v, I64, loc=loc)
        if isinstance(v, float):
            return ir.Const(v, F64, loc=loc)
        raise self.unsupported(f"constant {v!r} of type {type(v).__name__}", node)

    def expr_Name(self, node):
        sym = self.scope.get(node.id)
        if sym is None:
            raise Unknown(node.id) if self.inferring else \
                self.type_error(f"name '{node.id}' is used before any assignment", node)
        kind, t = sym
        return ir.Name(node.id, None if kind == "lambda" else t, loc=self.loc(node))

    def expr_BinOp(self, node):
        return self.binop(node.op, self.expr(node.left), self.expr(node.right), node)

    def binop(self, op, left, right, node):
        for t in (left.type, right.type):
            if not isinstance(t, DType):
                raise self.type_error(f"arithmetic on a {'View' if isinstance(t, ViewType) else t} in "
                                      f"'{ast.unparse(node)}'", node, "index the View to get an element")
        name = rules.BINOPS.get(type(op))
        if name is None:
            raise self.unsupported(f"operator {type(op).__name__}", node)
        ta, tb = left.type, right.type
        both_int = not ta.is_float and not tb.is_float
        if name in rules.BITWISE and not both_int:
            raise self.type_error(f"bitwise operator on floats in '{ast.unparse(node)}'", node)
        t = rules.binop_type(name, ta, tb)
        operands = rules.integer_operands(name, ta, tb)
        if operands is None and (name == "/" and both_int or name == "**" and not both_int):
            operands = t  # true division of integers in double; a float power in the promoted type
        if operands is not None:
            left, right = _convert(left, operands), _convert(right, operands)
        return ir.BinOp(name, left, right, t, loc=self.loc(node))

    def expr_UnaryOp(self, node):
        operand = self.expr(node.operand)
        t = operand.type
        if not isinstance(t, DType):
            raise self.type_error(f"operator on a non-scalar in '{ast.unparse(node)}'", node)
        name = rules.UNARY[type(node.op)]
        if name == "~" and t.is_float:
            raise self.type_error("~ on a float", node)
        return ir.UnaryOp(name, operand, rules.unary_type(name, t), loc=self.loc(node))

    def expr_BoolOp(self, node):
        values = [self.expr(v) for v in node.values]
        for value, v in zip(values, node.values):
            if not isinstance(value.type, DType):
                raise self.type_error(f"'{ast.unparse(v)}' is not a scalar in '{ast.unparse(node)}'", v)
        t = rules.boolop_type([v.type for v in values])
        return ir.BoolOp("and" if isinstance(node.op, ast.And) else "or", tuple(_convert(v, t) for v in values), t,
                         loc=self.loc(node))

    def expr_Compare(self, node):
        parts = []
        left = self.expr(node.left)
        for op, comparator in zip(node.ops, node.comparators):
            if type(op) not in rules.COMPARE:
                raise self.unsupported(f"comparison '{type(op).__name__}'", node)
            right = self.expr(comparator)
            t = rules.compare_operands(left.type, right.type)
            parts.append(ir.Compare(rules.COMPARE[type(op)], _convert(left, t), _convert(right, t), loc=self.loc(node)))
            left = right
        return parts[0] if len(parts) == 1 else ir.BoolOp("and", tuple(parts), BOOL, loc=self.loc(node))

    def expr_IfExp(self, node):
        test = self.expr(node.test)
        body, orelse = self.expr(node.body), self.expr(node.orelse)
        t = rules.join(body.type, orelse.type)
        return ir.Ternary(test, _convert(body, t), _convert(orelse, t), t, loc=self.loc(node))

    def subscript(self, node):
        base, indices = flatten_subscript(node)
        if isinstance(base, ast.Attribute) and base.attr == "shape":
            view = self.expr(base.value)
            if isinstance(view.type, ViewType) and len(indices) == 1:
                return ir.Extent(view.id, self.expr(indices[0]), loc=self.loc(node))
        view = self.expr(base)
        t = view.type
        if not isinstance(t, ViewType):
            raise self.type_error(f"'{ast.unparse(base)}' is not a View and cannot be indexed", node)
        if len(indices) != t.ndim:
            raise self.unsupported(f"indexing a {t.ndim}-D View with {len(indices)} indices", node,
                                   "kernels access single elements: give one index per dimension")
        index = []
        for i in indices:
            if isinstance(i, ast.Slice):
                raise self.unsupported("slicing inside a kernel", i)
            value = self.expr(i)
            if not (isinstance(value.type, DType) and not value.type.is_float):
                raise self.type_error(f"View index '{ast.unparse(i)}' is not an integer", i)
            index.append(value)
        return ir.Load(view.id, tuple(index), t.dtype, text=ast.unparse(node), user_view=self.user_view(base),
                       loc=self.loc(node))

    def expr_Subscript(self, node):
        return self.subscript(node)

    def expr_Attribute(self, node):
        raise self.unsupported(f"attribute '{ast.unparse(node)}'", node)

    # --- calls -----------------------------------------------------------------------------
    def call(self, node, statement: bool = False):
        func = node.func
        if node.keywords:
            raise self.unsupported("keyword arguments in a kernel call", node)
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "pk" \
                and "pk" not in self.scope:
            return self.call_pk(func.attr, node, statement)
        if isinstance(func, ast.Attribute):
            return self.call_method(func, node)
        if isinstance(func, ast.Name):
            if func.id in self.src.helpers and func.id not in self.scope:
                args = tuple(self.expr(a) for a in node.args)
                known = len(self.helpers.functions)
                index, ret = self.helpers.instance(func.id, tuple(a.type for a in args), node, self.src, self.kernel)
                if self.inferring and index >= known:
                    self.first_helpers.append(index)
                return ir.HelperCall(func.id, index, args, ret, loc=self.loc(node))
            return self.call_builtin(func.id, node)
        raise self.unsupported(f"call to '{ast.unparse(func)}'", node)

    def _scalar_args(self, node, count=None) -> list:
        args = [self.expr(a) for a in node.args]
        if count is not None and len(args) != count:
            raise self.type_error(f"'{ast.unparse(node.func)}' takes {count} arguments, {len(args)} given", node)
        for value, a in zip(args, node.args):
            if not isinstance(value.type, DType):
                raise self.type_error(f"argument '{ast.unparse(a)}' is not a scalar", a)
        return args

    def call_builtin(self, name, node):
        loc = self.loc(node)
        if name in ("int", "float", "bool"):
            (value,) = self._scalar_args(node, 1)
            return ir.Cast(value, {"int": I64, "float": F64, "bool": BOOL}[name], explicit=True, loc=loc)
        if name == "abs":
            (value,) = self._scalar_args(node, 1)
            return ir.Call("abs", (value,), rules.abs_type(value.type), loc=loc)
        if name in ("min", "max"):
            args = self._scalar_args(node)
            if len(args) < 2:
                raise self.type_error(f"{name}() in a kernel needs at least two scalars", node)
            t = rules.promote_all([a.type for a in args])
            return ir.Call(name, tuple(_convert(a, t) for a in args), t, loc=loc)
        if name == "round":
            (value,) = self._scalar_args(node, 1)
            return ir.Call("round", (value,), I64, loc=loc)
        if name == "len":
            view = self.expr(node.args[0])
            if not isinstance(view.type, ViewType):
                raise self.type_error("len() of a non-View", node)
            return ir.Extent(view.id, ir.Const(0, I64, loc=loc), loc=loc)
        if name == "range":
            raise self.unsupported("range() outside a for loop", node)
        raise self.unsupported(f"call to '{name}'", node)

    def call_method(self, func, node):
        target = self.expr(func.value)
        loc = self.loc(node)
        if target.type == TEAM:
            if func.attr in _TEAM_QUERIES:
                return ir.TeamQuery(target.id, func.attr, loc=loc)
            if func.attr == "team_barrier":
                return ir.Barrier(target.id, loc=loc)
        if isinstance(target.type, ViewType):
            if func.attr == "extent":
                (dim,) = self._scalar_args(node, 1)
                return ir.Extent(target.id, dim, loc=loc)
            if func.attr == "rank":
                return ir.Const(target.type.ndim, I64, loc=loc)
        raise self.unsupported(f"method call '{ast.unparse(func)}'", node)

    def call_pk(self, name, node, statement):
        loc = self.loc(node)
        if rules.is_math(name):
            count = 3 if name == "fma" else 2 if name in rules.BINARY_FLOAT_MATH else 1
            args = self._scalar_args(node, count)
            t = rules.math_type(name, [a.type for a in args])
            operand = F64 if name in ("fma", "isnan", "isinf", "isfinite") else \
                None if name in ("fabs", "abs", "round") else t
            return ir.Call(name, tuple(_convert(a, operand) for a in args), t, loc=loc)
        if name in rules.ATOMIC_CALLS:
            return self.call_atomic(name, node)
        if name == "printf":
            return self.call_printf(node)
        if name == "team_barrier":
            team = self.expr(node.args[0])
            if team.type != TEAM:
                raise self.type_error("pk.team_barrier expects the team member", node)
            return ir.Barrier(team.id, loc=loc)
        if name in ("parallel_for", "parallel_reduce", "parallel_scan"):
            return self.call_nested(name, node, statement)
        raise self.unsupported(f"pk.{name} inside a kernel", node)

    def call_atomic(self, name, node):
        """``pk.atomic_fetch_add(view, [i, j], value)`` (PyKokkos spelling)."""
        args = node.args
        if name in ("atomic_increment", "atomic_decrement"):
            if len(args) != 2:
                raise self.type_error(f"pk.{name}(view, [indices]) takes 2 arguments", node)
        elif name == "atomic_compare_exchange":
            if len(args) != 4:
                raise self.type_error("pk.atomic_compare_exchange(view, [indices], expected, desired)", node)
        elif len(args) != 3:
            raise self.type_error(f"pk.{name}(view, [indices], value) takes 3 arguments", node)
        view = self.expr(args[0])
        t = view.type
        if not isinstance(t, ViewType):
            raise self.type_error(f"atomic target '{ast.unparse(args[0])}' is not a View", node)
        parts = args[1].elts if isinstance(args[1], (ast.List, ast.Tuple)) else [args[1]]
        if len(parts) != t.ndim:
            raise self.type_error(f"atomic on a {t.ndim}-D View needs {t.ndim} indices", node)
        indices = tuple(self.expr(p) for p in parts)
        if rules.atomic_op(name) in rules.INTEGER_ATOMIC_OPS and not t.dtype.is_int:
            raise self.type_error(f"'{ast.unparse(node)}': pk.{name} needs a View of integers, "
                                  f"'{ast.unparse(args[0])}' holds {t.dtype.name}", node)
        values = tuple(_convert(self.expr(a), t.dtype) for a in args[2:])
        return ir.Atomic(name, view.id, indices, values, rules.atomic_type(name, t.dtype), text=ast.unparse(node),
                         user_view=self.user_view(args[0]), loc=self.loc(node))

    def call_printf(self, node):
        if not node.args or not (isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            raise self.type_error("pk.printf needs a constant format string first", node)
        fmt = node.args[0].value
        args = tuple(self.expr(a) for a in node.args[1:])
        try:
            specs = printf.conversions(fmt)
        except printf.FormatError as exc:
            raise self.unsupported(str(exc), node, exc.hint) from None
        if len(specs) != len(args):
            raise self.type_error(f"pk.printf format has {len(specs)} conversions but {len(args)} arguments", node)
        for m, arg in zip(specs, args):
            conv = m.group(3)
            if not isinstance(arg.type, DType):
                raise self.type_error("pk.printf can only print scalars", node)
            if conv in printf.INTEGER and arg.type.is_float:
                raise self.type_error(f"printf '%{conv}' given a float", node)
            if conv not in printf.INTEGER + printf.FLOAT:
                raise self.type_error(f"printf conversion '%{conv}' is not supported in kernels", node)
        return ir.Print(fmt, args, loc=self.loc(node))

    def call_nested(self, name, node, statement):
        if len(node.args) != 2:
            raise self.type_error(f"nested pk.{name} takes (range, function)", node)
        rng, fn = node.args
        if not (isinstance(rng, ast.Call) and isinstance(rng.func, ast.Attribute) and rng.func.attr in _NESTED_RANGES):
            raise self.unsupported(f"pk.{name} inside a kernel outside TeamThreadRange/ThreadVectorRange", node,
                                   "nested parallelism needs a TeamPolicy workunit")
        team = self.expr(rng.args[0])
        if team.type != TEAM:
            raise self.type_error(f"{rng.func.attr} needs the team member first", rng)
        bounds = tuple(self.expr(a) for a in rng.args[1:])
        if not 1 <= len(bounds) <= 2:
            raise self.type_error(f"{rng.func.attr}(member, end) or (member, begin, end)", rng)
        sym = self.scope.get(fn.id) if isinstance(fn, ast.Name) else None
        if sym is None or sym[0] != "lambda":
            raise self.unsupported("nested parallel body that is not a nested def", fn,
                                   "define the body with 'def inner(j, ...):' inside the workunit")
        _, acc_type = sym[1]
        if name == "parallel_scan" and not statement:
            raise self.unsupported("using the result of a nested parallel_scan", node,
                                   "call it as a statement; the body's last_pass writes the prefix sums")
        if name != "parallel_reduce":
            return ir.Nested(name, rng.func.attr, team.id, bounds, fn.id, None, loc=self.loc(node))
        self._tmp += 1
        return ir.Nested(name, rng.func.attr, team.id, bounds, fn.id, acc_type or F64, self._tmp, loc=self.loc(node))


def _convert(value, t):
    """``value`` as type ``t``: a Cast where the types differ (None or a non-scalar: unchanged)."""
    if isinstance(t, DType) and isinstance(value.type, DType) and value.type != t:
        return ir.Cast(value, t, loc=value.loc)
    return value
