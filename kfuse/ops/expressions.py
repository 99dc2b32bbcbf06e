"""One workunit for a chain of element-wise operations: each operation's kernel body inlined, in order.

The array operations run element-wise kernels written ``out[i] = f(a[i], s)`` (kernels.py, math_kernels.py). A
chain of them over one flat size becomes one kernel whose intermediate values are locals of their result
dtype (the conversion their store into a View of that dtype would make), stored into a View only where an
array outlives the chain. Every inlined body is the operation's own code, so the combined kernel computes
exactly what the operations compute one by one.

A step is ``(workunit, operands, dtype, stored)``: operands per parameter after ``out`` are ``("v", n)`` (input
View n), ``("t", k)`` (the value of step k) or ``("s", n)`` (scalar n); ``stored`` is the output View's number or
None. The last step may be a whole-array reduction (``acc += f(a[i], s)``, its accumulator the kernel's; dtype
and stored None): the kernel is then a ``parallel_reduce``. Or it may sum each row of a 2-D result (``ROW_SUM``,
operands ``(("t", k), ("s", n))``: step k's value over scalar n): the kernel then runs a thread per row, the
other steps in a loop over the row's elements (``rows__n`` of them, its last parameter), and stores the row's
sum, added in the order ``kernels.rows_sum_k`` adds, into the 1-D output; steps after it, over one element per row
(``[i]``), run after the loop. Such a tuple of steps, and whether the kernel is
two-dimensional (``grid``: thread ``(i, j)``, every View indexed ``[i][j]``, for strided 2-D Views), is the key
of the generated workunit (``kernel_for``). The operations' bodies use their index only to index their Views,
so the same body serves both.
"""
from __future__ import annotations

import ast
import copy
import functools
import types

from ..frontend.workunit import ParsedFunction, Workunit, compiled
from ..types import DType
from . import kernels

#: The row reduction a chain may end with (module docstring).
ROW_SUM = kernels.rows_sum_k
_ROW, _COLUMN, _LENGTH, _SUM = "i", "rows__j", "rows__n", "rows__sum"

_FILENAME = "<kfuse array expression>"
_DTYPE_NAMES = {f"kfuse_{d.name}": d for d in DType}


class Template:
    """An element-wise workunit's body as a function of its operands (``None`` from ``template`` if it is not of
    the inlinable form: ``out`` only stored once, last, at the index; View parameters only read at the index;
    the index used for nothing else)."""

    def __init__(self, wu: Workunit, index: str, params: list, body: list, locals_: set, acc=None):
        self.wu, self.index, self.params, self.body, self.locals = wu, index, params, body, locals_
        self.acc = acc  # a reduction's accumulator parameter (ast.arg, with its annotation), else None

    def inline(self, step: int, operands: dict, dtype: DType | None) -> list:
        """The body's statements for step ``step``: operand parameter -> replacement expression factory, the
        final store assigning ``t<step>`` of ``dtype`` instead, locals renamed apart."""
        renamer = _Inliner(self, step, operands, dtype)
        return [renamer.visit(copy.deepcopy(stmt)) for stmt in self.body]


class _Inliner(ast.NodeTransformer):
    def __init__(self, template: Template, step: int, operands: dict, dtype: DType | None):
        self.t, self.step, self.operands = template, step, operands
        self.names = {"__result__": f"t{step}",  # (a reduction's body has no result)
                      **{name: f"{name}_{step}" for name in template.locals}}
        if dtype is not None:
            self.names["__type__"] = f"kfuse_{dtype.name}"

    def visit_Subscript(self, node):
        if isinstance(node.value, ast.Name) and node.value.id in self.operands:
            return ast.copy_location(self.operands[node.value.id](), node)
        return self.generic_visit(node)

    def visit_Name(self, node):
        if node.id in self.operands:
            return ast.copy_location(self.operands[node.id](), node)
        if node.id in self.names:
            return ast.copy_location(ast.Name(id=self.names[node.id], ctx=node.ctx), node)
        return node


@functools.lru_cache(maxsize=None)
def template(wu: Workunit) -> Template | None:
    tree = wu.parsed.tree
    args = tree.args
    if args.vararg or args.kwarg or args.kwonlyargs or args.defaults or len(args.args) < 2:
        return None
    names = [a.arg for a in args.args]
    index, out, params = names[0], names[1], names[2:]
    body = tree.body[1:] if _docstring(tree.body[0]) else list(tree.body)
    acc = args.args[1] if args.args[1].annotation is not None and body and _is_sum(body[-1], out) else None
    if not body or not (acc or _is_store(body[-1], out, index)):
        return None
    locals_ = set()
    for stmt in body[:-1]:
        if not isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.If, ast.Expr)):
            return None
        for node in ast.walk(stmt):
            if isinstance(node, (ast.FunctionDef, ast.Lambda, ast.Return, ast.For, ast.While)):
                return None
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                if node.id in names:
                    return None
                locals_.add(node.id)
    uses = 0  # of the index, less those as a View's subscript: none may remain
    for stmt in body:
        value = stmt.value if stmt is body[-1] else stmt
        for node in ast.walk(value):
            if isinstance(node, ast.Name) and node.id == out:
                return None
            uses += isinstance(node, ast.Name) and node.id == index
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in params:
                if not _at_index(node, index):
                    return None
                uses -= 1
    if uses:
        return None
    final = body[-1]
    if acc is not None:
        last = ast.AugAssign(target=ast.Name(id="acc", ctx=ast.Store()), op=ast.Add(), value=final.value)
    else:
        last = ast.AnnAssign(target=ast.Name(id="__result__", ctx=ast.Store()), annotation=ast.Name(
            id="__type__", ctx=ast.Load()), value=final.value, simple=1)
    ast.copy_location(last, final)
    return Template(wu, index, params, [*body[:-1], last], locals_, acc)


def _docstring(stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


def _at_index(node: ast.Subscript, index: str) -> bool:
    return isinstance(node.slice, ast.Name) and node.slice.id == index and isinstance(node.ctx, ast.Load)


def _is_store(stmt, out: str, index: str) -> bool:
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
        return False
    target = stmt.targets[0]
    return isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) and target.value.id == out \
        and isinstance(target.slice, ast.Name) and target.slice.id == index


def _is_sum(stmt, acc: str) -> bool:
    return isinstance(stmt, ast.AugAssign) and isinstance(stmt.op, ast.Add) and isinstance(stmt.target, ast.Name) \
        and stmt.target.id == acc


def _name(name: str):
    return lambda: ast.Name(id=name, ctx=ast.Load())


def _element(view: str, grid: bool, ctx=ast.Load, column: str = "j"):
    """``view[i]``, or ``view[i][j]`` in a 2-D kernel (``column``: the name of j)."""
    def make():
        node = ast.Subscript(value=ast.Name(id=view, ctx=ast.Load()), slice=ast.Name(id="i", ctx=ast.Load()),
                             ctx=ast.Load() if grid else ctx())
        if grid:
            node = ast.Subscript(value=node, slice=ast.Name(id=column, ctx=ast.Load()), ctx=ctx())
        return node
    return make


def _in_row(view: str, grid: bool, ctx=ast.Load):
    """Element ``rows__j`` of row ``i`` in a row kernel: ``view[i][rows__j]``, or of a flat View
    ``view[i * rows__n + rows__j]``."""
    if grid:
        return _element(view, True, ctx, _COLUMN)

    def make():
        flat = ast.BinOp(left=ast.BinOp(left=_name(_ROW)(), op=ast.Mult(), right=_name(_LENGTH)()), op=ast.Add(),
                         right=_name(_COLUMN)())
        return ast.Subscript(value=ast.Name(id=view, ctx=ast.Load()), slice=flat, ctx=ctx())
    return make


def signature(steps: tuple) -> tuple:
    """(outputs, inputs, scalars): how many of each the kernel for ``steps`` takes."""
    outputs = sum(1 for step in steps if type(step[3]) is int)
    inputs = max((n for step in steps for kind, n in step[1] if kind == "v"), default=-1) + 1
    scalars = max((n for step in steps for kind, n in step[1] if kind == "s"), default=-1) + 1
    return outputs, inputs, scalars


def namespace(steps: tuple) -> dict | None:
    """The names the inlined bodies use, merged (None when two operations' modules bind one name differently)."""
    return _merged(frozenset(step[0] for step in steps))


@functools.lru_cache(maxsize=256)
def _merged(wus: frozenset) -> dict | None:
    merged = dict(_DTYPE_NAMES)
    for wu in wus:
        for name, value in wu.parsed.namespace.items():
            if merged.setdefault(name, value) is not value and not name.startswith("__"):
                return None
    return merged


@functools.lru_cache(maxsize=512)
def kernel_for(steps: tuple, grid: bool = False) -> Workunit:
    """The workunit computing ``steps`` (all inlinable, ``namespace(steps)`` not None), made once per key."""
    outputs, inputs, scalars = signature(steps)
    rows = next((k for k, step in enumerate(steps) if step[0] is ROW_SUM), None)
    if rows is None:
        body, acc = _inlined(steps, 0, functools.partial(_element, grid=grid))
    else:
        body, acc = _inlined(steps[:rows], 0, functools.partial(_in_row, grid=grid))
        after, _ = _inlined(steps[rows + 1:], rows + 1, functools.partial(_element, grid=False))
        body = [*_row_loop(body, rows, steps[rows]), *after]
    names = [*(f"o{n}" for n in range(outputs)), *(f"v{n}" for n in range(inputs)), *(f"s{n}" for n in range(scalars))]
    if rows is not None:
        names.append(_LENGTH)
    title = "_".join(dict.fromkeys(step[0].__name__.removesuffix("_k") for step in steps))
    index = [ast.arg(arg="i"), ast.arg(arg="j")] if grid and rows is None else [ast.arg(arg="i")]
    params = [*index, *acc, *(ast.arg(arg=n) for n in names)]
    tree = ast.FunctionDef(name=f"ops_{title}"[:80], args=ast.arguments(
        posonlyargs=[], args=params, vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[]),
        body=body, decorator_list=[], returns=None, type_comment=None)
    for node in ast.walk(tree):
        node.lineno = node.end_lineno = 1
        node.col_offset = node.end_col_offset = 0
    merged = namespace(steps)
    code = compiled(tree, _FILENAME, _no_closure, {}).__code__
    fn = types.FunctionType(code, merged, tree.name)  # run by the Debug space: the bodies' own names
    wu = Workunit(fn)
    wu.__dict__["parsed"] = ParsedFunction(fn=fn, name=tree.name, tree=tree, filename=_FILENAME, namespace=merged)
    return wu


def _inlined(steps: tuple, first: int, element) -> tuple:
    """The inlined bodies of ``steps`` (step numbers from ``first``; ``element(view, ctx=...)`` indexes a View) with
    their stores, and the kernel's accumulator parameter if one is a reduction."""
    body, acc = [], []
    for k, (wu, operands, dtype, stored) in enumerate(steps, first):
        t = template(wu)
        bindings = {}
        for param, (kind, n) in zip(t.params, operands):
            bindings[param] = element(f"v{n}") if kind == "v" else _name(f"t{n}" if kind == "t" else f"s{n}")
        body.extend(t.inline(k, bindings, dtype))
        if t.acc is not None:
            acc = [ast.arg(arg="acc", annotation=copy.deepcopy(t.acc.annotation))]
        if stored is not None:
            body.append(ast.Assign(targets=[element(f"o{stored}", ctx=ast.Store)()],
                                   value=ast.Name(id=f"t{k}", ctx=ast.Load())))
    return body, acc


def _row_loop(body: list, k: int, step: tuple) -> list:
    """A row kernel's statements: the chain's ``body`` per element of row ``i``, its value summed as
    ``kernels.rows_sum_k`` sums, over the divisor the value ``t<k>`` of row sum step ``k`` (stored if it is)."""
    _, ((_, value), (_, divisor)), dtype, stored = step
    total = ast.parse(f"{_SUM} = 0.0").body
    add = ast.AugAssign(target=ast.Name(id=_SUM, ctx=ast.Store()), op=ast.Add(), value=_name(f"t{value}")())
    loop = ast.For(target=ast.Name(id=_COLUMN, ctx=ast.Store()), iter=ast.Call(
        func=_name("range")(), args=[_name(_LENGTH)()], keywords=[]), body=[*body, add], orelse=[], type_comment=None)
    mean = ast.AnnAssign(target=ast.Name(id=f"t{k}", ctx=ast.Store()), annotation=_name(f"kfuse_{dtype.name}")(),
                         value=ast.BinOp(left=_name(_SUM)(), op=ast.Div(), right=_name(f"s{divisor}")()), simple=1)
    stores = [] if stored is None else [ast.Assign(targets=[_element(f"o{stored}", False, ast.Store)()],
                                                   value=_name(f"t{k}")())]
    return [*total, loop, mean, *stores]


def _no_closure():
    """What ``compiled`` takes the (empty) closure of."""
