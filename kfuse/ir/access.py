"""The one access analysis: every View access of a kernel, its kind, and its indices as affine functions.

An index is affine when it is ``sum(coef * v) + const + sum(coef * p)`` with ``v`` thread indices and
loop variables (never reassigned in the kernel, so each names one value per thread and iteration) and
``p`` scalar parameters never reassigned (a symbolic offset, known at run time). Anything else (a
product of variables, a load, a local) is unknown (None). Integer widenings are seen through: they keep
the value. Views handed to helpers (classtype methods and constructors included) are "opaque": their
accesses are not visible here. A classtype value is a thread's own; a statement that sets one of its fields,
or hands it to a call (which may set them), assigns its name.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..types import DType
from . import nodes as ir


@dataclass(frozen=True)
class Affine:
    """``sum(c * v for v, c in terms) + const + sum(c * p for p, c in symbols)``, terms and symbols sorted."""

    terms: tuple  # (thread index or loop variable, coefficient)
    const: int = 0
    symbols: tuple = ()  # (scalar parameter, coefficient)

    def coefficient(self, var: str) -> int:
        return dict(self.terms).get(var, 0)


@dataclass(frozen=True)
class Access:
    """One access: ``kind`` is read | write | update (read-modify-write) | atomic | opaque (a helper's)."""

    view: str
    kind: str
    indices: tuple  # Affine or None per dimension; () for opaque
    text: str  # the user's spelling, for messages
    loc: ir.Loc

    @property
    def reads(self) -> bool:
        return self.kind != "write"

    @property
    def writes(self) -> bool:
        return self.kind != "read"


@dataclass(frozen=True)
class Analysis:
    accesses: tuple  # Access, in evaluation order
    assigned: frozenset  # names the kernel assigns (locals, parameters, thread indices, loop variables)
    returns: bool  # the kernel's own body can return early (nested defs' returns excluded)
    loops: tuple = ()  # (For, the Accesses of its body), so a transform can reason about one loop

    def in_loop(self, loop: ir.For) -> tuple:
        """The accesses of ``loop``'s body (the very node, not one written alike)."""
        return next(found for node, found in self.loops if node is loop)


def analyse(kernel: ir.Kernel) -> Analysis:
    assigned = frozenset(assigned_names(kernel.body))
    walker = _Walker(kernel, assigned)
    walker.block(kernel.body, frozenset(n for n, t in kernel.threads if t == DType.int64 and n not in assigned))
    return Analysis(tuple(walker.found), assigned, _returns(kernel.body), tuple(walker.loops))


def assigned_names(stmts) -> set:
    """Names assigned anywhere under ``stmts``, loop variables and changed classtype values included (nested
    defs too)."""
    names: set = set()
    for s in stmts:
        if isinstance(s, (ir.Assign, ir.Accumulate)):
            names.add(s.name)
        elif isinstance(s, ir.For):
            names.add(s.var)
        elif isinstance(s, ir.SetField):
            names.add(s.target)
        for e in (x for top in _expressions(s) for x in subexpressions(top)):
            if isinstance(e, (ir.HelperCall, ir.New)):
                names.update(a.id for a in e.args if isinstance(a, ir.Name) and isinstance(a.type, ir.StructType))
        for inner in _bodies(s):
            names |= assigned_names(inner)
    return names


def nested_params(stmts) -> set:
    """Names of the parameters of the nested defs anywhere under ``stmts`` (inside one, a name of the kernel's own
    may mean its parameter instead)."""
    names: set = set()
    for s in stmts:
        if isinstance(s, ir.Lambda):
            names.update(n for n, _ in s.params)
        for inner in _bodies(s):
            names |= nested_params(inner)
    return names


def names_read(stmts) -> set:
    """Names whose value is read anywhere under ``stmts`` (nested defs too), Views handed to helpers included."""
    names: set = set()
    for s in stmts:
        for e in _expressions(s):
            names |= referenced(e, views=False)
        for inner in _bodies(s):
            names |= names_read(inner)
    return names


def referenced(e, views: bool = True) -> set:
    """Names ``e`` reads, with (``views``) the Views whose elements or extents it reads."""
    names = {e.id} if isinstance(e, ir.Name) else set()
    if views and isinstance(e, (ir.Load, ir.Atomic, ir.Extent)):
        names.add(e.view)
    for child in _children(e):
        names |= referenced(child, views)
    return names


def leaves_early(stmts) -> bool:
    """A break, continue or return anywhere under ``stmts``, inner loops and nested defs included."""
    return any(isinstance(s, (ir.Break, ir.Continue, ir.Return)) or any(leaves_early(b) for b in _bodies(s))
               for s in stmts)


def statements(stmts):
    """Every statement under ``stmts``, nested ones (inner blocks, nested defs) after the one holding them."""
    for s in stmts:
        yield s
        for inner in _bodies(s):
            yield from statements(inner)


def _bodies(s) -> tuple:
    if isinstance(s, ir.If):
        return (s.body, s.orelse)
    if isinstance(s, (ir.For, ir.While, ir.Lambda)):
        return (s.body,)
    return ()


def _returns(stmts) -> bool:
    return any(isinstance(s, ir.Return) or (not isinstance(s, ir.Lambda) and any(_returns(b) for b in _bodies(s)))
               for s in stmts)


class _Walker:
    def __init__(self, kernel: ir.Kernel, assigned: frozenset):
        self.views = kernel.views
        self.symbols = {n for n, t in kernel.scalars.items() if t.is_int and n not in assigned}
        self.found: list = []
        self.loops: list = []

    def block(self, stmts, variables: frozenset) -> None:
        for s in stmts:
            self.stmt(s, variables)

    def stmt(self, s, variables: frozenset) -> None:
        if isinstance(s, ir.Store):
            self.expr(s.value, variables)
            for i in s.indices:
                self.expr(i, variables)
            self.record(s.view, "write" if s.op is None else "update", s.indices, s.text, s.loc, variables)
        elif isinstance(s, ir.For):
            for e in (s.start, s.stop, s.step):
                self.expr(e, variables)
            reassigned = s.var in assigned_names(s.body)
            first = len(self.found)
            self.block(s.body, variables - {s.var} if reassigned else variables | {s.var})
            self.loops.append((s, tuple(self.found[first:])))
        elif isinstance(s, ir.Lambda):
            self.block(s.body, variables - {n for n, _ in s.params})
        else:
            for e in _expressions(s):
                self.expr(e, variables)
            for inner in _bodies(s):
                self.block(inner, variables)

    def expr(self, e, variables: frozenset) -> None:
        for child in _children(e):
            self.expr(child, variables)
        if isinstance(e, ir.Load):
            self.record(e.view, "read", e.indices, e.text, e.loc, variables)
        elif isinstance(e, ir.Atomic):
            self.record(e.view, "atomic", e.indices, e.text, e.loc, variables)
        elif isinstance(e, (ir.HelperCall, ir.New)):
            for a in e.args:
                if isinstance(a, ir.Name) and a.id in self.views:
                    self.found.append(Access(a.id, "opaque", (), a.id, e.loc))

    def record(self, view, kind, indices, text, loc, variables) -> None:
        if view in self.views:
            self.found.append(Access(view, kind, tuple(affine(i, variables, self.symbols) for i in indices),
                                     text, loc))


def subexpressions(e):
    """``e`` and every expression inside it, parents first."""
    yield e
    for child in _children(e):
        yield from subexpressions(child)


def evaluated(e):
    """``e`` and the expressions inside it that are evaluated whatever the data, parents first: of a conditional
    expression its test, of ``and``/``or`` its first operand."""
    yield e
    if isinstance(e, ir.Ternary):
        children = (e.test,)
    elif isinstance(e, ir.BoolOp):
        children = e.values[:1]
    else:
        children = _children(e)
    for child in children:
        yield from evaluated(child)


def _expressions(s) -> tuple:
    """The expressions a statement evaluates itself (not those of nested statements)."""
    if isinstance(s, (ir.Assign, ir.Accumulate, ir.Eval, ir.SetField)):
        return (s.value,)
    if isinstance(s, ir.Store):
        return (s.value,) + s.indices
    if isinstance(s, ir.For):
        return (s.start, s.stop, s.step)
    if isinstance(s, (ir.If, ir.While)):
        return (s.test,)
    if isinstance(s, ir.Return):
        return () if s.value is None else (s.value,)
    if isinstance(s, ir.Print):
        return s.args
    if isinstance(s, ir.ScratchView):
        return s.extents
    return ()


expressions = _expressions


def _children(e) -> tuple:
    if isinstance(e, (ir.BinOp, ir.Compare)):
        return (e.left, e.right)
    if isinstance(e, ir.UnaryOp):
        return (e.operand,)
    if isinstance(e, ir.Cast):
        return (e.value,)
    if isinstance(e, ir.BoolOp):
        return e.values
    if isinstance(e, (ir.Call, ir.HelperCall, ir.New)):
        return e.args
    if isinstance(e, ir.Field):
        return (e.value,)
    if isinstance(e, ir.Ternary):
        return (e.test, e.body, e.orelse)
    if isinstance(e, ir.Load):
        return e.indices
    if isinstance(e, ir.Atomic):
        return e.indices + e.args
    if isinstance(e, ir.Extent):
        return (e.dim,)
    if isinstance(e, ir.Nested):
        return e.bounds
    return ()


def affine(e, variables: frozenset, symbols: set) -> Affine | None:
    """``e`` as an Affine over ``variables`` with offsets in ``symbols``, or None."""
    if isinstance(e, ir.Const) and e.type.is_int:
        return Affine((), e.value)
    if isinstance(e, ir.Name):
        if e.id in variables:
            return Affine(((e.id, 1),))
        if e.id in symbols:
            return Affine((), 0, ((e.id, 1),))
        return None
    if isinstance(e, ir.Cast) and e.type.is_int and e.type.bits == 64 and isinstance(e.value.type, DType) \
            and e.value.type.is_int:
        return affine(e.value, variables, symbols)
    if isinstance(e, ir.UnaryOp) and e.op in ("-", "+"):
        inner = affine(e.operand, variables, symbols)
        return inner if inner is None or e.op == "+" else _scale(inner, -1)
    if isinstance(e, ir.BinOp) and e.op in ("+", "-", "*"):
        left, right = affine(e.left, variables, symbols), affine(e.right, variables, symbols)
        if left is None or right is None:
            return None
        if e.op == "*":
            if not left.terms and not left.symbols:
                return _scale(right, left.const)
            if not right.terms and not right.symbols:
                return _scale(left, right.const)
            return None
        return _add(left, right if e.op == "+" else _scale(right, -1))
    return None


def _combine(a: tuple, b: tuple) -> tuple:
    total: dict = dict(a)
    for name, c in b:
        total[name] = total.get(name, 0) + c
    return tuple(sorted((n, c) for n, c in total.items() if c))


def _add(a: Affine, b: Affine) -> Affine:
    return Affine(_combine(a.terms, b.terms), a.const + b.const, _combine(a.symbols, b.symbols))


def _scale(a: Affine, k: int) -> Affine:
    return Affine(tuple((n, c * k) for n, c in a.terms if c * k), a.const * k,
                  tuple((n, c * k) for n, c in a.symbols if c * k))
