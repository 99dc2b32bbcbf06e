"""``@pk.workunit``, ``@pk.function`` and ``@pk.classtype``: capture a Python function's AST once, with its location.

The kernel IR of kfuse is Python's own ``ast`` (a FunctionDef per kernel), with line numbers made
absolute in the source file so every later stage (typing, fusion, transforms, codegen) can report
errors at the user's file:line.
"""
from __future__ import annotations

import ast
import functools
import inspect
import itertools
import textwrap
import types
import weakref
from dataclasses import dataclass, field
from functools import cached_property

from ..errors import SourceError, UnsupportedSyntaxError

_counter = itertools.count(1)


@dataclass(eq=False)
class ParsedFunction:
    """A user function parsed once: its AST, where it lives, and the names it can see."""

    fn: object
    name: str
    tree: ast.FunctionDef
    filename: str
    namespace: dict
    uid: int = field(default_factory=lambda: next(_counter))

    @property
    def param_names(self) -> list[str]:
        return [a.arg for a in self.tree.args.args]

    def resolve(self, name: str):
        """The value a free name has in the function's scope (closure first, then module globals)."""
        return self.namespace[name]

    def error(self, message: str, node: ast.AST | None = None, hint: str | None = None, cls=SourceError):
        return cls(message, workunit=self.name, filename=self.filename, node=node or self.tree, hint=hint)


def parse_function(fn, name: str | None = None) -> ParsedFunction:
    """Parse ``fn``'s source into an AST whose line numbers are absolute in its file; ``name``: what errors
    call it (default: the function's name)."""
    try:
        source = inspect.getsource(fn)
        filename = inspect.getsourcefile(fn) or "<unknown>"
        first_line = fn.__code__.co_firstlineno
    except (OSError, TypeError) as exc:
        raise SourceError(f"cannot read the source of {getattr(fn, '__name__', fn)!r} ({exc}); workunits must be "
                          "defined in a file, not typed at an interactive prompt") from None
    module = ast.parse(textwrap.dedent(source))
    tree = next((n for n in module.body if isinstance(n, ast.FunctionDef)), None)
    if tree is None:
        raise SourceError(f"{fn.__name__} is not a plain function definition", filename=filename)
    ast.increment_lineno(tree, first_line - 1)  # source starts at the first decorator
    tree.decorator_list = []
    namespace = dict(fn.__globals__)
    if fn.__closure__:
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
            try:
                namespace[name] = cell.cell_contents
            except ValueError:  # an empty cell: the name is assigned later in the enclosing scope
                pass
    parsed = ParsedFunction(fn=fn, name=name or fn.__name__, tree=tree, filename=filename, namespace=namespace)
    _check_nesting(parsed)
    return parsed


def compiled(tree: ast.FunctionDef, filename: str, fn, supplied: dict, defaults=None):
    """The function ``tree`` defines, compiled as if it were ``fn`` (its globals, and its closure cells for the free
    names it shares with ``fn``), with ``supplied``'s values bound to the other free names ``tree`` uses."""
    freevars = fn.__code__.co_freevars
    outer = ast.FunctionDef(name="_kf_outer", args=ast.arguments(
        posonlyargs=[], args=[ast.arg(arg=p) for p in [*freevars, *(n for n in supplied if n not in freevars)]],
        vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[]),
        body=[tree, ast.Return(value=ast.Name(id=tree.name, ctx=ast.Load()))],
        decorator_list=[], returns=None, type_comment=None, lineno=1, col_offset=0)
    module = ast.fix_missing_locations(ast.Module(body=[outer], type_ignores=[]))
    outer_code = compile(module, filename, "exec").co_consts[0]
    code = next(c for c in outer_code.co_consts if isinstance(c, types.CodeType) and c.co_name == tree.name)
    cells = dict(zip(freevars, fn.__closure__ or ()))
    closure = tuple(types.CellType(supplied[n]) if n in supplied else cells[n] for n in code.co_freevars)
    return types.FunctionType(code, fn.__globals__, tree.name, defaults, closure)


#: Deepest AST nesting accepted: kfuse's passes recurse over the tree (copy.deepcopy alone takes about
#: four Python frames per level), so this keeps them far from Python's recursion limit of 1,000 frames.
MAX_NESTING = 100


def _check_nesting(parsed: ParsedFunction) -> None:
    pending = [(parsed.tree, 1, parsed.tree)]  # node, its depth, its statement
    while pending:
        node, depth, statement = pending.pop()
        statement = node if isinstance(node, ast.stmt) else statement
        if depth > MAX_NESTING:
            raise parsed.error(f"code nested more than {MAX_NESTING} levels deep (a very long chain of operators, or "
                               "deeply nested calls or parentheses)", statement,
                               hint="split it into several statements with temporary variables",
                               cls=UnsupportedSyntaxError)
        pending.extend((child, depth + 1, statement) for child in ast.iter_child_nodes(node))


class Workunit:
    """A parallel kernel written in Python. Calling it directly runs the Python function (Debug)."""

    def __init__(self, fn, options: dict | None = None):
        self.fn = fn
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn
        self.options = options or {}
        self.specializations: dict = {}  # dispatch cache: call signature -> prepared kernel
        self.class_kernels: dict = {}  # a method's kernel per class of the objects it is called on

    @cached_property
    def parsed(self) -> ParsedFunction:
        return parse_function(self.fn)

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    def __get__(self, obj, owner=None):
        """``obj.kernel`` of a workunit written as a method: the kernel bound to ``obj``'s fields."""
        if obj is None or not is_method(self.fn):
            return self
        return BoundWorkunit(self, obj)

    def __repr__(self) -> str:
        return f"<kfuse workunit {self.__name__}>"


class BoundWorkunit:
    """``obj.kernel`` for a method workunit: what ``parallel_*`` launches with the object's fields."""

    __slots__ = ("method", "obj")

    def __init__(self, method: Workunit, obj):
        self.method = method
        self.obj = obj

    @property
    def kernel(self) -> Workunit:
        """The method rewritten for the object's class (frontend/methods.py), made at its first launch."""
        kernel = self.method.class_kernels.get(type(self.obj))
        if kernel is None:
            from .methods import kernel_for

            kernel = kernel_for(self.method, type(self.obj))
        return kernel

    @property
    def parsed(self) -> ParsedFunction:
        return self.kernel.parsed

    @property
    def __name__(self) -> str:
        return self.method.__name__

    def __call__(self, *args, **kwargs):
        return self.method.fn(self.obj, *args, **kwargs)

    def __repr__(self) -> str:
        return f"<kfuse workunit {type(self.obj).__name__}.{self.method.__name__} of {self.obj!r}>"


class Function:
    """A device helper callable from workunits (``@pk.function``); callable from Python too."""

    def __init__(self, fn):
        self.fn = fn
        self.__name__ = fn.__name__
        self.__wrapped__ = fn

    @cached_property
    def parsed(self) -> ParsedFunction:
        return parse_function(self.fn)

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    def __get__(self, obj, owner=None):
        """A ``@pk.function`` method called from host code runs as the method it is."""
        if obj is None or not is_method(self.fn):
            return self
        return functools.partial(self.fn, obj)


def is_method(fn) -> bool:
    """Written as a method: its first parameter is ``self`` (a class's workunits and helpers)."""
    code = getattr(fn, "__code__", None)
    return code is not None and code.co_argcount > 0 and code.co_varnames[0] == "self"


def workunit(fn=None, **options):
    """Decorator marking a parallel kernel; ``@pk.workunit`` and ``@pk.workunit(...)`` both work."""
    if fn is None:
        return lambda f: Workunit(f, options)
    return Workunit(fn, options)


def function(fn=None, **options):
    """Decorator marking a helper callable from kernels."""
    if fn is None:
        return lambda f: Function(f)
    return Function(fn)


_CLASSTYPES: weakref.WeakSet = weakref.WeakSet()
_METHODS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # a classtype's method -> its ParsedFunction


def classtype(cls):
    """Decorator marking a class whose values kernels create and use (PyKokkos's ``@pk.classtype``). The class
    is returned unchanged: Python code keeps using it as an ordinary class."""
    if not isinstance(cls, type):
        raise TypeError(f"@pk.classtype decorates a class, not {cls!r}")
    _CLASSTYPES.add(cls)
    return cls


def is_classtype(obj) -> bool:
    return isinstance(obj, type) and obj in _CLASSTYPES


def parsed_method(cls, name: str) -> ParsedFunction | None:
    """Method ``name`` of classtype ``cls`` (a plain function in its class body) parsed once, named
    ``Class.method`` in errors; None if the class body defines no such function."""
    fn = cls.__dict__.get(name)
    if not inspect.isfunction(fn):
        return None
    parsed = _METHODS.get(fn)
    if parsed is None:
        parsed = _METHODS[fn] = parse_function(fn, f"{cls.__name__}.{name}")
    return parsed
