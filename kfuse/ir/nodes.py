"""The kernel IR: frozen, hashable nodes, each with the source location it came from.

Every expression carries its type (a ``DType``, a ``ViewType``, a ``StructType`` or ``TEAM``; ``None`` for a
call that returns nothing). Locations and the user's spelling of an access are left out of equality, so two
accesses written alike compare equal wherever they are. Implicit conversions are ``Cast`` nodes,
placed where the C++ converts; ``int(x)``, ``float(x)``, ``bool(x)`` are ``Cast`` nodes marked explicit.

A few fields only fix how the C++ printer numbers things, so that its output does not depend on the
order it walks the IR in: the temporaries of loops and nested reductions (``tmp``) and the helper
instances a body's type inference called first (``first_helpers``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..types import DType


@dataclass(frozen=True)
class Loc:
    """File and line of a node; ``member`` is the call's position in a fused kernel (-1: not fused) and
    ``unit`` that call's workunit."""

    file: str
    line: int
    member: int = -1
    unit: str = ""

    def __str__(self) -> str:
        return f"{self.file}:{self.line}" + (f" (member {self.member})" if self.member >= 0 else "")


NOWHERE = Loc("", 0)


@dataclass(frozen=True)
class ViewType:
    dtype: DType
    ndim: int
    layout: str = "right"  # "right" (C-contiguous) | "stride"
    atomic: bool = False  # PyKokkos's Atomic trait: stores and updates of its elements are lowered to atomics
    scratch: bool = False  # a ScratchView: in its team's scratch memory, C-contiguous

    def __str__(self) -> str:
        traits = (", strided" if self.layout == "stride" else "") + (", atomic" if self.atomic else "")
        return f"{'ScratchView' if self.scratch else 'View'}{self.ndim}D[{self.dtype.name}{traits}]"


@dataclass(frozen=True)
class TeamType:
    """The team handle of a TeamPolicy kernel."""

    def __str__(self) -> str:
        return "team"


TEAM = TeamType()


@dataclass(frozen=True)
class StructType:
    """A ``@pk.classtype`` value: a struct of scalar ``fields``, (name, DType) in declaration order.

    Values are copied where C++ copies structs (assignment, return); helpers and methods take them by
    reference, as Python passes objects. The lowering accepts only programs where the two agree (see
    ``kfuse.ir.lower``), so a StructType value is never shared between two names of one function.
    """

    name: str
    fields: tuple

    def field(self, name: str):
        """The DType of field ``name``, or None."""
        return dict(self.fields).get(name)

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Node:
    loc: Loc = field(default=NOWHERE, compare=False, kw_only=True)


# --- expressions ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Const(Node):
    value: object
    type: DType


@dataclass(frozen=True)
class Name(Node):
    id: str
    type: object


@dataclass(frozen=True)
class Load(Node):
    """One element of a View parameter, ``view[indices]``; ``text`` is the user's spelling, ``user_view``
    the View's name in the user's workunit (a fused kernel renames it)."""

    view: str
    indices: tuple
    type: DType
    text: str = field(default="", compare=False)
    user_view: str = field(default="", compare=False)


@dataclass(frozen=True)
class Extent(Node):
    view: str
    dim: object  # an integer expression
    type: DType = DType.int64


@dataclass(frozen=True)
class BinOp(Node):
    op: str  # Python's operator: + - * / // % ** & | ^ << >>, with Python's semantics
    left: object
    right: object
    type: DType


@dataclass(frozen=True)
class UnaryOp(Node):
    op: str  # - + not ~
    operand: object
    type: DType


@dataclass(frozen=True)
class Compare(Node):
    """``left op right`` (op: < <= > >= == !=); a chain ``a < b < c`` is an ``and`` of two Compares."""

    op: str
    left: object
    right: object
    type: DType = DType.bool


@dataclass(frozen=True)
class BoolOp(Node):
    op: str  # and | or; on non-bools the deciding operand, as in Python
    values: tuple
    type: DType


@dataclass(frozen=True)
class Cast(Node):
    """``value`` converted to ``type``; ``explicit``: the user wrote it (``float(x)``), else a promotion."""

    value: object
    type: DType
    explicit: bool = field(default=False, compare=False)


@dataclass(frozen=True)
class Call(Node):
    """A math function or builtin by its canonical name (``sqrt``, ``abs``, ``min``, ``round``, ...)."""

    func: str
    args: tuple
    type: DType


@dataclass(frozen=True)
class Ternary(Node):
    test: object
    body: object
    orelse: object
    type: DType


@dataclass(frozen=True)
class HelperCall(Node):
    """A call of ``Kernel.helpers[instance]`` (a ``@pk.function`` specialised on its argument types)."""

    name: str
    instance: int
    args: tuple
    type: object


@dataclass(frozen=True)
class Atomic(Node):
    """``pk.<func>(view, [indices], *args)``; ``type`` is None unless it returns the old value."""

    func: str
    view: str
    indices: tuple
    args: tuple
    type: object
    text: str = field(default="", compare=False)
    user_view: str = field(default="", compare=False)


@dataclass(frozen=True)
class New(Node):
    """``Cls(args)``: a new classtype value, zero-filled, then ``Kernel.helpers[init]`` (its ``__init__``)
    run on it with ``args``."""

    init: int
    args: tuple
    type: StructType


@dataclass(frozen=True)
class Field(Node):
    """``value.name``: a field of a classtype value."""

    value: object
    name: str
    type: DType


@dataclass(frozen=True)
class TeamQuery(Node):
    team: str
    what: str  # league_rank | team_rank | team_size | league_size
    type: DType = DType.int64


@dataclass(frozen=True)
class Nested(Node):
    """Nested parallelism in a team kernel: ``pk.<kind>(pk.<range>(team, *bounds), body)``; an MD range
    (``TeamThreadMDRange``...) has one extent per index of its body as ``bounds``."""

    kind: str  # parallel_for | parallel_reduce | parallel_scan
    range: str  # TeamThreadRange | ThreadVectorRange | TeamVectorRange, or one of their MDRange forms
    team: str
    bounds: tuple
    body: str  # the Lambda's name
    type: object
    tmp: int = field(default=0, compare=False)  # a reduction's temporary, numbered with its body's loops


# --- statements ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Assign(Node):
    """``name = value`` (``op``: ``name op= value``); the value is converted to the local's ``type``."""

    name: str
    type: DType
    value: object
    op: str | None = None


@dataclass(frozen=True)
class Accumulate(Node):
    """A reduction's or scan's accumulator updated, ``acc op= value`` (``op`` None: assigned)."""

    name: str
    type: DType
    value: object
    op: str | None = None


@dataclass(frozen=True)
class SetField(Node):
    """``target.name = value`` (``op``: ``op=``) on the classtype local or parameter ``target``, the value
    converted to the field's ``type``."""

    target: str
    name: str
    value: object
    type: DType
    op: str | None = None


@dataclass(frozen=True)
class Store(Node):
    """``view[indices] = value`` (``op``: ``op=``), converted to the element ``type``."""

    view: str
    indices: tuple
    value: object
    type: DType
    op: str | None = None
    text: str = field(default="", compare=False)
    user_view: str = field(default="", compare=False)


@dataclass(frozen=True)
class Eval(Node):
    """A call run for its effect (an atomic, a helper, a barrier, nested parallelism)."""

    value: object


@dataclass(frozen=True)
class Print(Node):
    format: str
    args: tuple


@dataclass(frozen=True)
class Barrier(Node):
    team: str


@dataclass(frozen=True)
class Single(Node):
    """``pk.single(pk.<per>(team), body)``: the nested def ``body`` run by one thread of the team (PerTeam)
    or once per thread, not per vector lane (PerThread); no barrier."""

    per: str  # PerTeam | PerThread
    team: str
    body: str


@dataclass(frozen=True)
class ScratchView(Node):
    """``name: pk.ScratchView<n>D[T] = pk.ScratchView<n>D(team.<space>(level), *extents)``, at the top level of
    a team kernel: every thread takes the View's bytes from the team's scratch memory of ``level`` in turn, as
    Kokkos does; ``per_thread`` (``thread_scratch``): each thread its own copy. The extents are the same for
    every thread of a team, so a View that does not fit is a fault of the whole team at once."""

    name: str
    type: ViewType
    team: str
    level: int
    per_thread: bool
    extents: tuple


@dataclass(frozen=True)
class If(Node):
    test: object
    body: tuple
    orelse: tuple


@dataclass(frozen=True)
class While(Node):
    test: object
    body: tuple


@dataclass(frozen=True)
class For(Node):
    """``for var in range(start, stop, step)``; ``scoped``: var lives only in the loop (else a hoisted local);
    ``strided``: range() was given a step, whose sign then decides the loop's test."""

    var: str
    start: object
    stop: object
    step: object
    body: tuple
    scoped: bool = True
    strided: bool = False
    tmp: int = field(default=0, compare=False)  # its temporaries' number, unique in its body


@dataclass(frozen=True)
class Break(Node):
    pass


@dataclass(frozen=True)
class Continue(Node):
    pass


@dataclass(frozen=True)
class Return(Node):
    value: object = None


@dataclass(frozen=True)
class Lambda(Node):
    """A nested def of a team kernel, the body of nested parallelism or of ``pk.single``: ``indices`` indices (one
    per dimension of its range; none for single), then accumulator and flag."""

    name: str
    params: tuple  # (name, type)
    locals: tuple  # (name, DType or StructType), hoisted
    body: tuple
    first_helpers: tuple = field(default=(), compare=False)
    indices: int = 1


# --- functions -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Function(Node):
    """A ``@pk.function`` specialised on its argument types; ``ret`` None returns nothing. ``struct``: the
    classtype whose method (``__init__`` included) this is; its first parameter is ``self``."""

    name: str
    params: tuple  # (name, type)
    ret: object
    locals: tuple
    body: tuple
    first_helpers: tuple = field(default=(), compare=False)
    struct: StructType | None = None


@dataclass(frozen=True)
class Kernel(Node):
    """A workunit (or fused kernel) for one specialisation.

    ``threads``: the thread indices (or the team handle); ``accs``: reduction/scan accumulators;
    ``flags``: the scan's last_pass; ``params``: user parameters; all (name, type). ``locals``: hoisted
    locals, (name, DType or StructType); ``helpers``: the Functions its HelperCalls index, in the order their
    bodies were lowered; ``first_helpers`` (also of Function and Lambda): the helper instances typing
    the body's locals called first, before any of its statements.
    """

    name: str
    op: str
    policy: str
    threads: tuple
    accs: tuple
    flags: tuple
    params: tuple
    locals: tuple
    body: tuple
    helpers: tuple = ()
    first_helpers: tuple = field(default=(), compare=False)

    @property
    def views(self) -> dict:
        return {n: t for n, t in self.params if isinstance(t, ViewType)}

    @property
    def scalars(self) -> dict:
        return {n: t for n, t in self.params if isinstance(t, DType)}

    @property
    def structs(self) -> tuple:
        """The classtypes whose values the kernel holds, in the order they first appear (locals, nested defs'
        locals, then its helpers' parameters, locals and results)."""
        declared = [t for _, t in self.locals]
        pending = list(self.body)
        while pending:
            s = pending.pop(0)
            if isinstance(s, Lambda):
                declared += [t for _, t in s.locals]
            pending += [inner for name in ("body", "orelse") for inner in getattr(s, name, ())]
        for fn in self.helpers:
            declared += [t for _, t in fn.params + fn.locals] + [fn.ret]
        return tuple(dict.fromkeys(t for t in declared if isinstance(t, StructType)))
