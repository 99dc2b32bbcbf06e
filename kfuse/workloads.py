"""PyKokkos's class-style programs: ``@pk.workload`` classes run by ``pk.execute``, and ``@pk.functor`` classes.

A workload's ``@pk.main`` method runs as Python (as PyKokkos runs workloads in its Debug space), so the
``parallel_*`` calls it makes over ``self.kernel`` are ordinary calls: specialised, traced and fused like any
other (frontend/methods.py turns the kernel's ``self.`` fields into its arguments). Its ``@pk.callback``
methods run after it, in the order the class defines them. A functor is an object whose workunit methods are
passed to ``parallel_*`` directly (``pk.parallel_for(n, obj.kernel)``).
"""
from __future__ import annotations

import ast
import copy

from . import context, kernel_api
from .errors import ArgumentError
from .frontend.methods import ToSelf, bare_fields
from .frontend.workunit import compiled, parse_function
from .spaces import ExecutionSpace, set_default_space

_ROLE = "_kfuse_role"


def _class_decorator(kind: str):
    def decorate(cls=None, **view_types):
        """``@pk.workload``/``@pk.functor``, or with ``(field=pk.ViewTypeInfo(...), ...)``: kfuse takes each View's
        layout and space from the View itself, and a declared Atomic trait makes the field's kernel updates atomic."""
        if cls is None:
            return lambda c: decorate(c, **view_types)
        if not isinstance(cls, type):
            raise ArgumentError(f"@pk.{kind} decorates a class, got {cls!r}")
        cls._kfuse_view_types = view_types
        return cls

    decorate.__name__ = kind
    return decorate


workload = _class_decorator("workload")
functor = _class_decorator("functor")


def main(fn):
    """Marks a workload's entry method, which ``pk.execute`` runs."""
    setattr(fn, _ROLE, "main")
    return fn


def callback(fn):
    """Marks a workload method ``pk.execute`` runs after the main method."""
    setattr(fn, _ROLE, "callback")
    return fn


def _methods(cls: type, role: str) -> list:
    """The methods of ``cls`` marked ``role``, in definition order, base classes first, overrides replacing."""
    found: dict = {}
    for klass in reversed(cls.__mro__):
        for name, value in vars(klass).items():
            if getattr(value, _ROLE, None) == role or (name in found and callable(value)):
                found[name] = value
    return [fn for fn in found.values() if getattr(fn, _ROLE, None) == role]


def execute(*args, dependencies=None) -> None:
    """``pk.execute(space, workload)`` (or ``pk.execute(workload)``): run the workload's main method with its
    kernels in ``space``, then its callbacks. ``dependencies`` (PyKokkos's list of classtypes the workload
    uses) is accepted; kfuse finds them from the kernels' code."""
    if len(args) == 1:
        space, obj = ExecutionSpace.Default, args[0]
    elif len(args) == 2:
        space, obj = args
    else:
        raise ArgumentError(f"pk.execute takes (space, workload) or (workload), got {len(args)} arguments")
    if not isinstance(space, ExecutionSpace):
        raise ArgumentError(f"pk.execute: the space must be a pk.ExecutionSpace, got {space!r}")
    mains = _methods(type(obj), "main")
    if len(mains) != 1:
        raise ArgumentError(f"pk.execute: {type(obj).__name__} has {len(mains)} methods marked @pk.main; a "
                            "workload has exactly one")
    runtime = context.current()
    previous = runtime.default_space
    if space is not ExecutionSpace.Default:
        set_default_space(space)
    try:
        _member_scoped(mains[0], type(obj))(obj)
    finally:
        runtime.default_space = previous
    for fn in _methods(type(obj), "callback"):
        fn(obj)


_scoped: dict = {}  # (main function, class) -> the function run for it


def _member_scoped(fn, cls: type):
    """``fn`` as PyKokkos runs a main method, compiled to a C++ member function: a bare field name reads
    ``self.<field>`` and a bare ``printf`` is ``pk.printf``. The function itself when it uses neither."""
    key = (fn, cls)
    if key not in _scoped:
        _scoped[key] = _rescoped(fn, cls)
    return _scoped[key]


def _rescoped(fn, cls: type):
    parsed = parse_function(fn)
    names = bare_fields(parsed.tree, parsed.namespace, cls)
    tree = ToSelf(names).visit(copy.deepcopy(parsed.tree))
    printf = [n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == "printf"
              and "printf" not in parsed.namespace]
    if not names and not printf:
        return fn
    for node in printf:
        node.id = _PRINTF
    return compiled(tree, parsed.filename, fn, {_PRINTF: kernel_api.printf}, fn.__defaults__)


_PRINTF = "_kfuse_printf"
