"""Lambdas as kernels, as PyKokkos takes them: ``pk.parallel_for(n, lambda i: ...)``, the same with an output
View (``pk.parallel_for(n, lambda i: expr, view)`` stores ``expr`` in ``view[i]``), and
``pk.parallel_reduce(n, lambda i, acc: acc + expr)`` (the lambda gives the new partial sum).

A lambda is turned into a workunit once per code object (``main`` makes a new lambda object at every run): its
body becomes a function body, and the variables it captures become parameters, passed at each call with their
values then. A captured ``self`` makes it a method kernel (frontend/methods.py), reading the object's fields.
"""
from __future__ import annotations

import ast
import functools
import linecache
import numbers

import numpy as np

from ..errors import ArgumentError, SourceError
from ..future import Future
from ..views import View
from .workunit import BoundWorkunit, ParsedFunction, Workunit, compiled

OUTPUT = "lambda_output"  # the parameter the 3-argument parallel_for form writes


def is_lambda(fn) -> bool:
    return getattr(fn, "__name__", None) == "<lambda>" and hasattr(fn, "__code__")


def as_kernel(op: str, fn, positional: tuple, kwargs: dict):
    """(workunit or bound method kernel, positional, kwargs) to launch for lambda ``fn``."""
    if kwargs:
        raise ArgumentError(f"a lambda kernel takes no keyword arguments (got '{next(iter(kwargs))}'): it reads the "
                            "variables it captures")
    output = op == "for" and len(positional) == 1
    if positional and not output:
        raise ArgumentError("a lambda kernel takes at most one extra argument, the View of parallel_for(n, lambda i: "
                            "value, view) that receives each value")
    if op == "scan":
        raise ArgumentError("parallel_scan needs a @pk.workunit (its kernel writes through last_pass); a lambda "
                            "kernel is for parallel_for and parallel_reduce")
    code = fn.__code__
    captured = dict(zip(code.co_freevars, (cell.cell_contents for cell in fn.__closure__ or ())))
    key = (code, op, output)
    made = _made.get(key)
    if made is None:
        constants = {n: v for n, v in captured.items() if n != "self" and not _is_data(v)}
        made = _made[key] = (_workunit(fn, op, output, constants), constants)
    wu, constants = made
    for name, value in constants.items():
        if captured[name] is not value:
            raise ArgumentError(f"the lambda kernel at {code.co_filename}:{code.co_firstlineno} captures '{name}', "
                                "which was compiled into it as a constant (a function, class or module) and now "
                                "holds something else; give the kernel its own name for each")
    values = {name: value for name, value in captured.items() if name != "self" and name not in constants}
    if output:
        values[OUTPUT] = positional[0]
    if "self" in captured:
        bound = BoundWorkunit(wu, captured["self"])
        return bound, (), values
    return wu, (), values


_made: dict = {}  # (code, op, output form) -> (its workunit, the captured constants compiled into it)


def _is_data(value) -> bool:
    """A captured value a kernel takes as an argument (read at each call); anything else (a @pk.function, a
    module) is a constant of the kernel, as globals are."""
    return isinstance(value, (View, np.ndarray, numbers.Number, np.generic, Future)) or \
        hasattr(value, "__cuda_array_interface__")


def _workunit(lam, op: str, output: bool, constants: dict) -> Workunit:
    """The workunit of lambda ``lam``; its ``fn`` is the kernel's tree compiled as a function seeing the lambda's
    globals and captured constants (the Debug space runs it)."""
    code = lam.__code__
    node = _find(code)
    params = [a.arg for a in node.args.args]
    expected = 1 if op == "for" else 2
    if len(params) != expected or node.args.vararg or node.args.kwarg or node.args.kwonlyargs:
        what = "lambda i: ..." if op == "for" else "lambda i, acc: acc + ..."
        raise SourceError(f"a lambda kernel for parallel_{op} is written {what}; this one takes "
                          f"({', '.join(params)})", filename=code.co_filename, node=node)
    if op == "for":
        body = ast.Assign(targets=[_subscript(OUTPUT, params[0])], value=node.body) if output else ast.Expr(node.body)
    else:
        body = ast.Assign(targets=[ast.Name(id=params[1], ctx=ast.Store())], value=node.body)
    captured = [ast.arg(arg=name) for name in code.co_freevars if name != "self" and name not in constants]
    extra = [ast.arg(arg=OUTPUT)] if output else []
    self_ = [ast.arg(arg="self")] if "self" in code.co_freevars else []
    tree = ast.FunctionDef(name="lambda_line%d" % node.lineno, args=ast.arguments(
        posonlyargs=[], args=self_ + [ast.arg(arg=p) for p in params] + captured + extra, vararg=None,
        kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[]), body=[ast.copy_location(body, node)],
        decorator_list=[], returns=None, type_comment=None)
    ast.copy_location(tree, node)
    ast.fix_missing_locations(tree)
    fn = compiled(tree, code.co_filename, lam, {})
    wu = Workunit(fn)
    wu.__dict__["parsed"] = ParsedFunction(fn=fn, name=tree.name, tree=tree, filename=code.co_filename,
                                           namespace={**fn.__globals__, **constants})
    return wu


def _subscript(view: str, index: str) -> ast.Subscript:
    return ast.Subscript(value=ast.Name(id=view, ctx=ast.Load()), slice=ast.Name(id=index, ctx=ast.Load()),
                         ctx=ast.Store())


def _find(code) -> ast.Lambda:
    """The lambda whose code is ``code``, found in its file by line and parameter names."""
    lines = linecache.getlines(code.co_filename)
    if not lines:
        raise SourceError("cannot read the source of a lambda kernel; lambdas must be defined in a file",
                          filename=code.co_filename)
    tree = _parse("".join(lines), code.co_filename)
    names = list(code.co_varnames[:code.co_argcount])
    found = [n for n in ast.walk(tree) if isinstance(n, ast.Lambda) and n.lineno == code.co_firstlineno
             and [a.arg for a in n.args.args] == names]
    if len(found) != 1:
        raise SourceError(f"{len(found) or 'no'} lambdas with parameters ({', '.join(names)}) on line "
                          f"{code.co_firstlineno}: kfuse finds a lambda kernel by its line", filename=code.co_filename,
                          hint="put each lambda kernel on its own line, or write it as a @pk.workunit")
    return found[0]


@functools.lru_cache(maxsize=64)
def _parse(source: str, filename: str) -> ast.Module:
    return ast.parse(source, filename)
