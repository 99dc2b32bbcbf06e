"""Lower a kernel's resolved Python AST to the typed IR, once its specialisation is known.

The lowering types every value with the kernel typing rules (``typing``), which are what the emitted C++
computes, so the IR's types are the C++ program's. It raises the user's syntax and type errors, pointing
at the source they are about.

Classtype values: Python shares objects by reference, the C++ copies structs. kfuse passes them to helpers
and methods by reference (a helper changing its parameter's field changes the caller's value, as in Python)
and copies them on assignment and return. The two agree as long as no two names share one value, so the
lowering accepts only programs that cannot make them share: a classtype local is assigned only a new value
(a construction, or a helper's or method's result, which is never one of its parameters), and a parameter is
never rebound. ``q = p`` and ``return p`` (a parameter) are errors, not copies. The order of evaluation is
the other difference: C++ leaves the order of a call's arguments and an operator's operands open, so a call
that may change a classtype value must be the only use of that value in its statement.
"""
from __future__ import annotations

import ast
import copy
from dataclasses import dataclass

from ..errors import KernelTypeError, UnsupportedSyntaxError
from ..types import DType, _ScratchAnnotation
from . import nodes as ir
from . import printf
from . import typing as rules
from .access import expressions, subexpressions
from .nodes import TEAM, Loc, StructType, ViewType
from .pyast import assigned_names, flatten_subscript
from .typing import BOOL, F64, I64, Unknown

_TEAM_QUERIES = ("league_rank", "team_rank", "team_size", "league_size")
_MD_RANGES = ("TeamThreadMDRange", "ThreadVectorMDRange", "TeamVectorMDRange")
_NESTED_RANGES = ("TeamThreadRange", "ThreadVectorRange", "TeamVectorRange", *_MD_RANGES)
_SCRATCH_SPACES = ("team_scratch", "thread_scratch")
_SCRATCH_HINT = ("declare it at the top of the workunit: "
                 "s: pk.ScratchView1D[float] = pk.ScratchView1D(team.team_scratch(0), n)")
_EXPR_NAMES = {ast.List: "list literal", ast.Tuple: "tuple", ast.Slice: "slice"}


def value_type(arg_type):
    """The IR type of a kernel argument's ``ArgType`` (a View) or DType (a scalar)."""
    if getattr(arg_type, "is_view", False):
        return ViewType(arg_type.dtype, arg_type.ndim, arg_type.layout, arg_type.atomic)
    return getattr(arg_type, "dtype", arg_type)


def _kind(t) -> str:
    """The scope kind of a name holding a value of IR type ``t``."""
    return "view" if isinstance(t, ViewType) else "struct" if isinstance(t, StructType) else "scalar"


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
    scope = {n: (_kind(t), t) for n, t in params}
    scope.update({n: ("team" if t == TEAM else "scalar", t) for n, t in threads + accs + flags})
    scratch = scratch_declarations(source)
    for decl in scratch:
        if spec.policy != "team":
            raise source.error("unsupported construct: a ScratchView outside a TeamPolicy workunit", decl.node,
                               "scratch memory belongs to a team: launch the workunit with a pk.TeamPolicy")
        if decl.name in scope:
            raise source.error(f"ScratchView '{decl.name}' has the name of a parameter", decl.node,
                               cls=KernelTypeError)
        scope[decl.name] = ("view", decl.type)
    helpers = _Helpers(source.helpers)
    uniform = frozenset(n for n, t in params if isinstance(t, DType)) - assigned_names([source.tree])
    body = _Lowerer(source, source, helpers, scope, accumulators=set(acc_names), scratch=scratch,
                    uniform=uniform)
    copies = [n for n, t in params + threads + flags if not isinstance(t, ViewType) and t != TEAM]
    locals_, stmts = body.function_body(_assignable(source.tree, copies).body)
    return ir.Kernel(source.name, spec.op, spec.policy, threads, accs, flags, params, locals_, stmts,
                     tuple(helpers.functions), tuple(body.first_helpers),
                     loc=Loc(source.filename, source.tree.lineno))


_ATOMIC_UPDATES = {ast.Add: "atomic_add", ast.Sub: "atomic_sub", ast.Mult: "atomic_mul", ast.Div: "atomic_div",
                   ast.Mod: "atomic_mod", ast.BitAnd: "atomic_and", ast.BitOr: "atomic_or", ast.BitXor: "atomic_xor",
                   ast.LShift: "atomic_lshift", ast.RShift: "atomic_rshift"}


def _atomic_call(func: str, view: str, indices: list, value, where: dict) -> ast.Call:
    return ast.Call(func=ast.Attribute(value=ast.Name(id="pk", ctx=ast.Load(), **where), attr=func, ctx=ast.Load(),
                                       **where),
                    args=[ast.Name(id=view, ctx=ast.Load(), **where),
                          ast.List(elts=[copy.deepcopy(i) for i in indices], ctx=ast.Load(), **where),
                          copy.deepcopy(value)], keywords=[], **where)


def _increment(value, view: str, indices: list):
    """(atomic fetch function, amount, operator giving the new value) when ``value`` is ``view[indices] + x``,
    ``x + view[indices]`` or ``view[indices] - x``; None otherwise."""
    if not isinstance(value, ast.BinOp) or not isinstance(value.op, (ast.Add, ast.Sub)):
        return None

    def same(node) -> bool:
        if not isinstance(node, ast.Subscript):
            return False
        base, idx = flatten_subscript(node)
        return isinstance(base, ast.Name) and base.id == view and [ast.dump(i) for i in idx] == \
            [ast.dump(i) for i in indices]

    if same(value.left):
        return ("atomic_fetch_add", value.right, ast.Add) if isinstance(value.op, ast.Add) else \
            ("atomic_fetch_sub", value.right, ast.Sub)
    if isinstance(value.op, ast.Add) and same(value.right):
        return "atomic_fetch_add", value.left, ast.Add
    return None


def _assignable(tree: ast.FunctionDef, scalars: list) -> ast.FunctionDef:
    """``tree`` with each scalar parameter it assigns (``i -= 1``, as Python allows) read through a local copy:
    in the kernel, thread indices and scalar arguments are constants."""
    stored = assigned_names(tree.body)
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


@dataclass(frozen=True)
class ScratchDeclaration:
    """A ScratchView declared at the top level of a workunit: ``name: pk.ScratchView<n>D[T] =
    pk.ScratchView<n>D(team.<space>(level), *extents)``."""

    node: ast.AnnAssign
    name: str
    type: ViewType
    team: str
    level: int
    per_thread: bool


def scratch_declarations(source) -> tuple:
    """The ScratchViews ``source`` declares (checked, once per source): at its top level, annotated with their
    element type, taking their memory from ``team.team_scratch(level)`` or ``team.thread_scratch(level)``,
    level 0 or 1, one extent per dimension."""
    found = source.__dict__.get("_kfuse_scratch")
    if found is None:
        found = source.__dict__["_kfuse_scratch"] = tuple(_scratch_declaration(source, stmt) for stmt in
                                                          source.tree.body if _is_scratch(stmt))
        names = [d.name for d in found]
        for decl in found:
            if names.count(decl.name) > 1:
                raise source.error(f"ScratchView '{decl.name}' is declared twice", decl.node, cls=KernelTypeError)
    return found


def _is_scratch(stmt) -> bool:
    return isinstance(stmt, ast.AnnAssign) and isinstance(stmt.annotation, ast.Constant) \
        and isinstance(stmt.annotation.value, _ScratchAnnotation)


def _scratch_declaration(source, node: ast.AnnAssign) -> ScratchDeclaration:
    ann = node.annotation.value
    kind = f"ScratchView{ann.rank}D"
    value = node.value
    if ann.dtype is None:
        raise source.error(f"ScratchView '{ast.unparse(node.target)}' needs its element type", node,
                           f"annotate it pk.{kind}[pk.double] (or another dtype)", cls=KernelTypeError)
    if not (isinstance(node.target, ast.Name) and isinstance(value, ast.Call) and not value.keywords
            and isinstance(value.func, ast.Attribute) and value.func.attr == kind and value.args):
        raise source.error(f"unsupported construct: a {kind} annotation on '{ast.unparse(node)}'", node,
                           _SCRATCH_HINT, cls=UnsupportedSyntaxError)
    space = value.args[0]
    if not (isinstance(space, ast.Call) and isinstance(space.func, ast.Attribute) and space.func.attr in _SCRATCH_SPACES
            and isinstance(space.func.value, ast.Name) and len(space.args) == 1 and not space.keywords):
        raise source.error(f"the memory of ScratchView '{node.target.id}' is not team.team_scratch(level) or "
                           f"team.thread_scratch(level)", space, _SCRATCH_HINT, cls=UnsupportedSyntaxError)
    level = space.args[0]
    if not (isinstance(level, ast.Constant) and type(level.value) is int and level.value in (0, 1)):
        raise source.error(f"scratch level '{ast.unparse(level)}' of ScratchView '{node.target.id}' is not 0 or 1",
                           level, "Kokkos has scratch levels 0 (small, fast) and 1 (larger)", cls=KernelTypeError)
    if len(value.args) - 1 != ann.rank:
        raise source.error(f"{kind} '{node.target.id}' needs {ann.rank} extent(s), got {len(value.args) - 1}",
                           value, cls=KernelTypeError)
    return ScratchDeclaration(node, node.target.id, ViewType(ann.dtype, ann.rank, scratch=True), space.func.value.id,
                              level.value, space.func.attr == "thread_scratch")


def _nested_uses(source) -> dict:
    """How the workunit uses each nested def, by name: the number of indices its users pass it (1 for a
    TeamThreadRange, n for an MDRange of n extents, 0 for pk.single)."""
    found = source.__dict__.get("_kfuse_nested_uses")
    if found is None:
        found = source.__dict__["_kfuse_nested_uses"] = {}
        for node in ast.walk(source.tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and len(node.args) == 2
                    and isinstance(node.args[1], ast.Name)):
                continue
            rng = node.args[0]
            if node.func.attr == "single":
                indices = 0
            elif node.func.attr in ("parallel_for", "parallel_reduce", "parallel_scan") and isinstance(rng, ast.Call) \
                    and isinstance(rng.func, ast.Attribute) and rng.func.attr in _NESTED_RANGES:
                indices = len(rng.args) - 1 if rng.func.attr in _MD_RANGES else 1
            else:
                continue
            found.setdefault(node.args[1].id, {}).setdefault(indices, node)
    return found


def _team_varying(e, uniform: set):
    """The part of a ScratchView extent ``e`` that may differ between the threads of a team, or None: constants,
    the names in ``uniform``, View extents, league_rank()/league_size()/team_size() and arithmetic on them do not."""
    if isinstance(e, ir.Const):
        return None
    if isinstance(e, ir.Name):
        return None if e.id in uniform else e
    if isinstance(e, ir.TeamQuery):
        return e if e.what == "team_rank" else None
    if isinstance(e, ir.Extent):
        return _team_varying(e.dim, uniform)
    if isinstance(e, (ir.BinOp, ir.Compare)):
        parts = (e.left, e.right)
    elif isinstance(e, (ir.UnaryOp, ir.Cast)):
        parts = (e.operand if isinstance(e, ir.UnaryOp) else e.value,)
    elif isinstance(e, (ir.Call, ir.BoolOp)):
        parts = e.args if isinstance(e, ir.Call) else e.values
    elif isinstance(e, ir.Ternary):
        parts = (e.test, e.body, e.orelse)
    else:
        return e
    return next((v for v in (_team_varying(p, uniform) for p in parts) if v is not None), None)


class _Helpers:
    """The ``@pk.function`` instances a kernel calls, numbered in the order their first calls are lowered."""

    def __init__(self, sources: dict):
        self.sources = sources  # name -> KernelSource
        self.instances: dict = {}  # (name, argument types) -> (index, return type)
        self.functions: list = []
        self.changes: list = []  # per instance: the positions of the classtype parameters it may change
        self._active: set = set()

    def instance(self, name: str, arg_types: tuple, node, caller, kernel) -> tuple:
        """(index, return type) of the instance of ``name`` (a helper, ``Cls`` for a classtype's __init__ or
        ``Cls.method``) for ``arg_types``, lowered at its first call."""
        key = (name, arg_types)
        if key in self.instances:
            return self.instances[key]
        src = self.sources[name]
        if name in self._active:
            raise caller.error(f"'{src.name}' calls itself; recursion is not supported in kernels", node)
        typed = rules.helper_params(src.name, src, arg_types, node, caller)
        self._active.add(name)
        scope = {n: (_kind(t), t) for n, t in typed}
        body = _Lowerer(src, kernel, self, scope, in_helper=True)
        locals_, stmts = body.function_body(src.tree.body)
        ret = rules.helper_return(src, body.return_types)
        self._active.discard(name)
        self.instances[key] = (len(self.functions), ret)
        changed = self.changed(stmts)
        self.changes.append(tuple(i for i, (n, _) in enumerate(typed) if n in changed))
        self.functions.append(ir.Function(src.name, tuple(typed), ret, locals_, stmts, tuple(body.first_helpers),
                                          src.struct, loc=Loc(src.filename, src.tree.lineno)))
        return self.instances[key]

    def changed_args(self, e) -> list:
        """The arguments of call ``e`` (a HelperCall or New) that name a classtype value the call may change."""
        if isinstance(e, ir.HelperCall):
            return [e.args[i] for i in self.changes[e.instance] if isinstance(e.args[i], ir.Name)]
        if isinstance(e, ir.New):  # its __init__'s first parameter is the new value
            return [e.args[i - 1] for i in self.changes[e.init] if i and isinstance(e.args[i - 1], ir.Name)]
        return []

    def changed(self, stmts) -> set:
        """The classtype values ``stmts`` may change: fields set, or values given to calls that change them."""
        names: set = set()
        for s in stmts:
            if isinstance(s, ir.SetField):
                names.add(s.target)
            for e in (x for top in expressions(s) for x in subexpressions(top)):
                names.update(a.id for a in self.changed_args(e))
            for inner in (getattr(s, "body", ()), getattr(s, "orelse", ())):
                names |= self.changed(inner)
        return names


class _Lowerer:
    """Lowers one function body (workunit, helper or nested def) given the names it starts with.

    ``scope``: name -> (kind, type), kind "scalar" | "view" | "team" | "lambda" (type: the FunctionDef
    and its accumulator type)."""

    def __init__(self, src, kernel, helpers: _Helpers, scope: dict, in_helper: bool = False,
                 accumulators: frozenset = frozenset(), struct_params: frozenset | None = None, scratch: tuple = (),
                 uniform: frozenset = frozenset(), undeclared: set | None = None):
        self.src = src
        self.kernel = kernel  # the workunit's KernelSource (src is a helper's inside a helper)
        self.helpers = helpers
        self.scope = dict(scope)
        self.in_helper = in_helper
        # classtype values the caller passed (by reference): never rebound, never returned
        self.struct_params = frozenset(n for n, (k, _) in scope.items() if k == "struct") \
            if struct_params is None else struct_params
        self.accumulators = accumulators
        # the workunit's ScratchView declarations by place (the body lowered may be a copy of its tree), and the
        # scalar parameters it never assigns (the same for all threads)
        self.scratch = {(d.node.lineno, d.node.col_offset): d for d in scratch}
        self.uniform = uniform
        # ScratchViews not declared yet where the statements being lowered are (shared with nested defs)
        self.undeclared = {d.name for d in scratch} if undeclared is None else undeclared
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
            self.scope.update({n: ("lambda", self._signature(d)) for n, d in lambdas.items()})
            self.scope.update({n: (_kind(t), t) for n, t in types.items()})
            try:
                return self.expr(value).type
            finally:
                self.scope = saved

        self.inferring = True
        try:
            found, self.loop_vars = rules.infer_locals(stmts, self.scope, type_of, self)
        finally:
            self.inferring = False
        for name, t in found.items():
            self.scope[name] = (_kind(t), t)
        return tuple(found.items()), self.block(stmts)

    def _signature(self, node: ast.FunctionDef) -> tuple:
        """(number of index parameters, accumulator type or None) of a nested def, from how the workunit uses it."""
        uses = _nested_uses(self.src).get(node.name, {})
        if len(uses) > 1:
            counts = sorted(uses)
            last = max(uses.values(), key=lambda call: (call.lineno, call.col_offset))
            raise self.type_error(f"nested def '{node.name}' is given {counts[0]} and {counts[1]} indices by its uses",
                                  last, "give each use its own nested def")
        indices = next(iter(uses), 1)
        return indices, rules.lambda_acc_type(node, indices)

    def block(self, stmts) -> tuple:
        out: list = []
        for stmt in stmts:
            method = getattr(self, "stmt_" + type(stmt).__name__, None)
            if method is None:
                raise self.unsupported(f"'{type(stmt).__name__}' statement", stmt)
            self._statements.append(stmt)
            try:
                lowered_stmts = method(stmt)
                for s in lowered_stmts:
                    self._check_order(s, stmt)
                out.extend(lowered_stmts)
            finally:
                self._statements.pop()
        return tuple(out)

    def _check_order(self, s, node) -> None:
        """A call that may change a classtype value is that value's only use in statement ``s``: Python
        evaluates left to right, C++ in an order it leaves open (an augmented field assignment reads its
        field after its value)."""
        uses: dict = {}
        changed: set = set()
        if isinstance(s, ir.SetField) and s.op is not None:
            uses[s.target] = 1
        for e in (x for top in expressions(s) for x in subexpressions(top)):
            if isinstance(e, ir.Name) and isinstance(e.type, StructType):
                uses[e.id] = uses.get(e.id, 0) + 1
            changed.update(a.id for a in self.helpers.changed_args(e))
        for name in sorted(changed):
            if uses[name] > 1:
                raise self.unsupported(f"'{name}' is used again in the statement where a call may change it",
                                       node, f"C++ may evaluate the parts of a statement in another order than "
                                             f"Python; make the call changing '{name}' a statement of its own")

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
        t = value.type
        if not isinstance(t, (DType, StructType)):
            raise self.unsupported("returning a View from a helper", node)
        declared = rules.annotation_type(self.src.annotations.get("return"))
        for other in ([declared] if declared is not None else []) + self.return_types[:1]:
            if t != other and (isinstance(t, StructType) or isinstance(other, StructType)):
                raise self.type_error(f"'{ast.unparse(node.value)}' is a {rules.type_name(t)}, but "
                                      f"'{self.src.name}' returns a {rules.type_name(other)}", node)
        if isinstance(t, StructType):
            self._fresh(value, node, returning=True)
        self.return_types.append(t)
        return [ir.Return(value, loc=self.loc(node))]

    def _fresh(self, value, node, returning: bool = False) -> None:
        """Reject a classtype value that another name may share (see the module docstring): only a new value
        is assigned, and only a new value or a local is returned."""
        if isinstance(value, (ir.New, ir.HelperCall)) or returning and value.id not in self.struct_params:
            return
        if returning:
            what = f"returning parameter '{value.id}' hands the caller back the object it passed"
        else:
            what = f"'{ast.unparse(node)}' makes '{ast.unparse(node.targets[0])}' a second name for the object " \
                   f"'{value.id}' names"
        raise self.unsupported(f"{what} (Python shares objects), while kfuse copies classtype values", node,
                               f"construct a new value ({value.type}(...)) and copy the fields you need into it")

    def stmt_Expr(self, node):
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return []  # docstring
        if not isinstance(node.value, ast.Call):
            raise self.unsupported("an expression statement with no effect", node)
        effect = self.call(node.value, statement=True)
        statement = isinstance(effect, (ir.Print, ir.Barrier, ir.Single))
        return [effect if statement else ir.Eval(effect, loc=self.loc(node))]

    def _target(self, target):
        """(kind, what, indices, type) of an assignment target: a local or accumulator (``what``: its name),
        a classtype value's field (``what``: (its name, the field)) or a View element (``what``: its Load)."""
        if isinstance(target, ast.Name):
            sym = self.scope.get(target.id)
            if sym is None:
                raise self.type_error(f"assignment to unknown name '{target.id}'", target)
            if target.id in self.struct_params:
                raise self.unsupported(f"assigning to classtype parameter '{target.id}'", target,
                                       "in Python this rebinds the name only, while kfuse would overwrite the "
                                       "caller's value; use a new local")
            if sym[0] not in ("scalar", "struct"):
                raise self.unsupported(f"assigning to {sym[0]} '{target.id}'", target)
            return ("acc" if target.id in self.accumulators else "local"), target.id, (), sym[1]
        if isinstance(target, ast.Attribute):
            owner = self.scope.get(target.value.id) if isinstance(target.value, ast.Name) else None
            if owner is None or owner[0] != "struct":
                raise self.unsupported(f"assignment target '{ast.unparse(target)}'", target,
                                       "fields are set on a classtype local or parameter, 'p.x = ...'")
            return "field", (target.value.id, target.attr), (), self._field_type(owner[1], target.attr, target)
        if isinstance(target, ast.Subscript):
            load = self.subscript(target)
            if isinstance(load, ir.Load):
                return "store", load, load.indices, load.type
        raise self.unsupported(f"assignment target '{ast.unparse(target)}'", target)

    def _assign(self, target, value, node, op=None):
        kind, what, indices, t = self._target(target)
        if op is not None and isinstance(t, StructType):
            raise self.type_error(f"arithmetic on classtype value '{ast.unparse(target)}'", node)
        if not isinstance(value.type, DType) and (op is not None or not isinstance(t, StructType)):
            raise self.type_error(f"'{ast.unparse(node.value)}' is a {rules.type_name(value.type)}, not a scalar, "
                                  f"in '{ast.unparse(node)}'", node)
        if isinstance(t, StructType) and value.type != t:
            raise self.type_error(f"assigning a {rules.type_name(value.type)} to '{ast.unparse(target)}', a {t}",
                                  node)
        if kind == "store":  # where the element is, as a load of it would be
            return ir.Store(what.view, indices, value, t, op, text=ast.unparse(target), user_view=what.user_view,
                            loc=what.loc)
        if kind == "field":
            return ir.SetField(what[0], what[1], value, t, op, loc=self.loc(node))
        cls = ir.Accumulate if kind == "acc" else ir.Assign
        return cls(what, t, value, op, loc=self.loc(node))

    def stmt_Assign(self, node):
        atomic = self._atomic_form(node)
        if atomic is not None:
            return getattr(self, "stmt_" + type(atomic).__name__)(atomic)
        value = self.expr(node.value)
        out = []
        if isinstance(value.type, StructType):
            if len(node.targets) > 1:
                raise self.unsupported("assigning one classtype value to several names", node,
                                       "they would share it in Python; construct one value per name")
            self._fresh(value, node)
        for target in node.targets:
            t = self._target(target)[3]
            out.append(self._assign(target, _convert(value, t), node))
        return out

    def stmt_AnnAssign(self, node):
        if (node.lineno, node.col_offset) in self.scratch:
            return self.scratch_view(node)
        if _is_scratch(node):
            raise self.unsupported("a ScratchView declared inside a block, nested def or helper", node, _SCRATCH_HINT)
        if node.value is None:
            return []
        return self.stmt_Assign(ast.Assign(targets=[node.target], value=node.value, lineno=node.lineno,
                                           col_offset=node.col_offset))

    def stmt_AugAssign(self, node):
        atomic = self._atomic_form(node)
        if atomic is not None:
            return getattr(self, "stmt_" + type(atomic).__name__)(atomic)
        t = self._target(node.target)[3]
        op = rules.BINOPS.get(type(node.op))
        if op in ("+", "-", "*", "&", "|", "^"):
            return [self._assign(node.target, self.expr(node.value), node, op)]
        current = self._current(node.target)
        return [self._assign(node.target, _convert(self.binop(node.op, current, self.expr(node.value), node), t),
                             node)]

    def _atomic_form(self, node):
        """The statement that writes a View with PyKokkos's Atomic trait as Kokkos would make it atomic, or None.

        ``v[i] op= x`` is ``pk.atomic_<op>``; ``v[i] = v[i] + x`` (or ``- x``), the read-modify-write an Atomic
        View is declared for, is one atomic fetch-add whose other targets (``n = v[i] = v[i] + 1``) get the new
        value: what its author means, where Kokkos's separate atomic load and store would let threads race;
        any other store is an atomic exchange."""
        targets = [node.target] if isinstance(node, ast.AugAssign) else node.targets
        atomic = [t for t in targets if isinstance(t, ast.Subscript) and self._atomic_view(t)]
        if not atomic:
            return None
        if len(atomic) > 1:
            raise self.unsupported("storing into two elements of Atomic Views in one statement", node)
        target = atomic[0]
        view, indices = flatten_subscript(target)
        where = dict(lineno=node.lineno, col_offset=node.col_offset)
        if isinstance(node, ast.AugAssign):
            func = _ATOMIC_UPDATES.get(type(node.op))
            if func is None:
                raise self.unsupported(f"'{ast.unparse(node)}' on an Atomic View (no atomic form)", node)
            return ast.Expr(value=_atomic_call(func, view.id, indices, node.value, where), **where)
        others = [t for t in targets if t is not target]
        step = _increment(node.value, view.id, indices)
        if step is None:
            call = _atomic_call("atomic_exchange", view.id, indices, node.value, where)
            if others:
                raise self.unsupported(f"'{ast.unparse(node)}': a store into an Atomic View that is also assigned "
                                       "to other names", node, "assign them in their own statements")
            return ast.Expr(value=call, **where)
        func, amount, sign = step
        call = _atomic_call(func, view.id, indices, amount, where)
        if not others:
            return ast.Expr(value=call, **where)
        new_value = ast.BinOp(left=call, op=sign(), right=copy.deepcopy(amount), **where)
        return ast.Assign(targets=others, value=new_value, **where)

    def _atomic_view(self, target) -> bool:
        view, _ = flatten_subscript(target)
        sym = self.scope.get(view.id) if isinstance(view, ast.Name) else None
        return sym is not None and isinstance(sym[1], ViewType) and sym[1].atomic

    def _current(self, target):
        if isinstance(target, ast.Name):
            return ir.Name(target.id, self.scope[target.id][1], loc=self.loc(target))
        if isinstance(target, ast.Attribute):
            return self.expr(target)
        return self.subscript(target)

    def condition(self, node):
        """A test (if, while, conditional expression): a scalar, whose truth C++ tests as Python does."""
        test = self.expr(node)
        if not isinstance(test.type, DType):
            raise self.type_error(f"condition '{ast.unparse(node)}' is a {rules.type_name(test.type)}, not a "
                                  "scalar", node)
        return test

    def stmt_If(self, node):
        test = self.condition(node.test)
        return [ir.If(test, self.block(node.body), self.block(node.orelse), loc=self.loc(node))]

    def stmt_While(self, node):
        if node.orelse:
            raise self.unsupported("while ... else", node)
        test = self.condition(node.test)
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
        if self.scope.get(var, ("scalar",))[0] != "scalar":
            raise self.type_error(f"loop variable '{var}' is a {self.scope[var][1]}", node.target)
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
        """A nested def inside a team workunit: the body of nested parallelism (its indices, then accumulator
        and flag) or of pk.single (no parameters)."""
        params = node.args.args
        indices, acc_type = self._signature(node)
        if not params and indices:
            raise self.unsupported("a nested function without an index parameter", node)
        if not indices <= len(params) <= (indices + 2 if indices else 0):
            what = f"{indices} index(es), then the accumulator and last_pass flag if any" if indices else \
                "none (pk.single calls its body without arguments)"
            raise self.type_error(f"nested def '{node.name}' takes {len(params)} parameters; its use passes {what}",
                                  node)
        scope = dict(self.scope)
        typed = [(a.arg, I64) for a in params[:indices]]
        if len(params) > indices:
            typed.append((params[indices].arg, acc_type))
        if len(params) > indices + 1:
            typed.append((params[indices + 1].arg, BOOL))
        scope.update({n: ("scalar", t) for n, t in typed})
        inner = _Lowerer(self.src, self.kernel, self.helpers, scope, in_helper=True,
                         struct_params=self.struct_params, undeclared=self.undeclared)
        locals_, body = inner.function_body(node.body)
        if inner.return_types:
            raise self.unsupported("returning a value from a nested parallel body", node)
        self.scope[node.name] = ("lambda", (indices, acc_type))
        return [ir.Lambda(node.name, tuple(typed), locals_, body, tuple(inner.first_helpers), indices=indices,
                          loc=self.loc(node))]

    def stmt_Nonlocal(self, node):
        """``nonlocal x`` in a nested def (Python has checked that an enclosing function binds x): assigning x then
        sets that x, as every assignment to an enclosing name does in kernels (C++ lambdas capture by reference)."""
        return []

    def scratch_view(self, node):
        """A ScratchView declaration (``scratch_declarations``): its extents must be the same for every thread of
        the team, since every thread takes the View's bytes from the team's scratch memory in turn."""
        decl = self.scratch[node.lineno, node.col_offset]
        team = self.expr(node.value.args[0].func.value)
        if team.type != TEAM:
            raise self.type_error(f"'{decl.team}' is not the team member", node.value.args[0])
        extents = []
        for a in node.value.args[1:]:
            value = self.expr(a)
            if not (isinstance(value.type, DType) and not value.type.is_float):
                raise self.type_error(f"extent '{ast.unparse(a)}' of ScratchView '{decl.name}' is not an integer", a)
            varying = _team_varying(value, self.uniform)
            if varying is not None:
                raise self.unsupported(
                    f"ScratchView '{decl.name}' with extent '{ast.unparse(a)}', which may differ between the threads "
                    f"of a team", a, "every thread takes a ScratchView's bytes from the team's memory: use constants, "
                    "scalar arguments the kernel does not assign, View extents, league_rank(), league_size() and "
                    "team_size()")
            extents.append(_convert(value, I64))
        self.undeclared.discard(decl.name)
        return [ir.ScratchView(decl.name, decl.type, team.id, decl.level, decl.per_thread, tuple(extents),
                               loc=self.loc(node))]

    # --- expressions -----------------------------------------------------------------------
    def expr(self, node):
        if isinstance(node, ast.Call):
            value = self.call(node)
            if isinstance(value, (ir.Print, ir.Barrier, ir.Single)):
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
        if node.id in self.undeclared and not self.inferring:
            raise self.type_error(f"ScratchView '{node.id}' is used before its declaration", node)
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
            for value, part in ((left, node.left), (right, comparator)):
                if isinstance(value.type, StructType):
                    raise self.type_error(f"comparing classtype value '{ast.unparse(part)}'", node,
                                          "compare its fields")
            t = rules.compare_operands(left.type, right.type)
            parts.append(ir.Compare(rules.COMPARE[type(op)], _convert(left, t), _convert(right, t), loc=self.loc(node)))
            left = right
        return parts[0] if len(parts) == 1 else ir.BoolOp("and", tuple(parts), BOOL, loc=self.loc(node))

    def expr_IfExp(self, node):
        test = self.condition(node.test)
        body, orelse = self.expr(node.body), self.expr(node.orelse)
        if isinstance(body.type, StructType) or isinstance(orelse.type, StructType):
            raise self.unsupported("a conditional expression choosing a classtype value", node,
                                   "use an if statement")
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
        value = self.expr(node.value)
        if not isinstance(value.type, StructType):
            raise self.unsupported(f"attribute '{ast.unparse(node)}'", node)
        return ir.Field(value, node.attr, self._field_type(value.type, node.attr, node), loc=self.loc(node))

    def _field_type(self, struct: StructType, name: str, node):
        t = struct.field(name)
        if t is None:
            what = f"'{name}' of classtype {struct} is a method; call it" \
                if f"{struct.name}.{name}" in self.helpers.sources else f"classtype {struct} has no field '{name}'"
            raise self.type_error(what, node,
                                  f"its fields: {', '.join(f for f, _ in struct.fields) or 'none'} (declared in "
                                  "__init__ as 'self.name: type = value')")
        return t

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
                struct = self.helpers.sources[func.id].struct
                if struct is None:
                    return self.call_helper(func.id, args, node)
                index, ret = self._instance(func.id, (struct, *(a.type for a in args)), node)
                if ret is not None:
                    raise self.type_error(f"{struct}.__init__ returns a value", node)
                return ir.New(index, args, struct, loc=self.loc(node))
            return self.call_builtin(func.id, node)
        raise self.unsupported(f"call to '{ast.unparse(func)}'", node)

    def _instance(self, name: str, arg_types: tuple, node) -> tuple:
        known = len(self.helpers.functions)
        index, ret = self.helpers.instance(name, arg_types, node, self.src, self.kernel)
        if self.inferring and index >= known:
            self.first_helpers.append(index)
        return index, ret

    def call_helper(self, name: str, args: tuple, node):
        """A call of helper ``name`` (``Cls.method`` for a method, ``self`` its first argument)."""
        index, ret = self._instance(name, tuple(a.type for a in args), node)
        return ir.HelperCall(self.helpers.functions[index].name, index, args, ret, loc=self.loc(node))

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
        if isinstance(target.type, StructType):
            name = f"{target.type.name}.{func.attr}"
            if name not in self.helpers.sources:
                if target.type.field(func.attr) is not None:
                    raise self.type_error(f"field '{func.attr}' of classtype {target.type} is not a method", node)
                raise self.type_error(f"classtype {target.type} has no method '{func.attr}'", node,
                                      "kernels call the methods defined in the class body (def name(self, ...))")
            return self.call_helper(name, (target, *(self.expr(a) for a in node.args)), node)
        if target.type == TEAM:
            if func.attr in _TEAM_QUERIES:
                return ir.TeamQuery(target.id, func.attr, loc=loc)
            if func.attr == "team_barrier":
                return ir.Barrier(target.id, loc=loc)
            if func.attr in _SCRATCH_SPACES:
                raise self.unsupported(f"'{ast.unparse(node)}' outside a ScratchView declaration", node, _SCRATCH_HINT)
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
        if name == "single":
            return self.call_single(node, statement)
        if name.startswith("ScratchView"):
            raise self.unsupported(f"pk.{name}(...) that is not the value of an annotated declaration", node,
                                   _SCRATCH_HINT)
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
        for value, a in zip(values, args[2:]):
            if not isinstance(value.type, DType):
                raise self.type_error(f"argument '{ast.unparse(a)}' is not a scalar", a)
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

    def _nested_body(self, fn, indices: int, what: str, hint: str):
        """The name and accumulator type of the nested def ``fn`` that a call passes ``indices`` indices."""
        sym = self.scope.get(fn.id) if isinstance(fn, ast.Name) else None
        if sym is None or sym[0] != "lambda":
            raise self.unsupported(f"{what} body that is not a nested def", fn, hint)
        if sym[1][0] != indices:
            raise self.type_error(f"nested def '{fn.id}' takes {sym[1][0]} index(es); {what} passes {indices}", fn)
        return fn.id, sym[1][1]

    def call_nested(self, name, node, statement):
        if len(node.args) != 2:
            raise self.type_error(f"nested pk.{name} takes (range, function)", node)
        rng, fn = node.args
        if not (isinstance(rng, ast.Call) and isinstance(rng.func, ast.Attribute) and rng.func.attr in _NESTED_RANGES):
            raise self.unsupported(f"pk.{name} inside a kernel outside TeamThreadRange/ThreadVectorRange", node,
                                   "nested parallelism needs a TeamPolicy workunit")
        kind = rng.func.attr
        if not rng.args:
            raise self.type_error(f"{kind} needs the team member first", rng)
        team = self.expr(rng.args[0])
        if team.type != TEAM:
            raise self.type_error(f"{kind} needs the team member first", rng)
        bounds = tuple(self.expr(a) for a in rng.args[1:])
        md = kind in _MD_RANGES
        if md and not 2 <= len(bounds) <= 8:
            raise self.type_error(f"{kind}(member, n0, n1, ...) takes 2 to 8 extents", rng)
        if not md and not 1 <= len(bounds) <= 2:
            raise self.type_error(f"{kind}(member, end) or (member, begin, end)", rng)
        for value, a in zip(bounds, rng.args[1:]):
            if not (isinstance(value.type, DType) and not value.type.is_float):
                raise self.type_error(f"{kind} bound '{ast.unparse(a)}' is not an integer", a)
        body, acc_type = self._nested_body(fn, len(bounds) if md else 1, f"nested pk.{name}",
                                           "define the body with 'def inner(j, ...):' inside the workunit")
        if name == "parallel_scan" and md:
            raise self.unsupported(f"pk.parallel_scan over a {kind}", node, "Kokkos scans one-dimensional ranges")
        if name == "parallel_scan" and not statement:
            raise self.unsupported("using the result of a nested parallel_scan", node,
                                   "call it as a statement; the body's last_pass writes the prefix sums")
        if name != "parallel_reduce":
            return ir.Nested(name, kind, team.id, bounds, body, None, loc=self.loc(node))
        self._tmp += 1
        return ir.Nested(name, kind, team.id, bounds, body, acc_type or F64, self._tmp, loc=self.loc(node))

    def call_single(self, node, statement):
        """``pk.single(pk.PerTeam(team), body)`` or ``pk.single(pk.PerThread(team), body)``, ``body`` a nested def
        without parameters (PyKokkos has no value-returning form)."""
        hint = "write pk.single(pk.PerTeam(team_member), body) or pk.single(pk.PerThread(team_member), body)"
        if len(node.args) != 2:
            raise self.type_error("pk.single takes (pk.PerTeam(team_member) or pk.PerThread(team_member), body)", node)
        per, fn = node.args
        if not (isinstance(per, ast.Call) and isinstance(per.func, ast.Attribute) and per.func.attr in
                ("PerTeam", "PerThread") and len(per.args) == 1):
            raise self.type_error(f"pk.single's first argument '{ast.unparse(per)}' is not pk.PerTeam(team_member) "
                                  "or pk.PerThread(team_member)", per, hint)
        team = self.expr(per.args[0])
        if team.type != TEAM:
            raise self.type_error(f"pk.single needs the team member of a TeamPolicy workunit, got "
                                  f"'{ast.unparse(per.args[0])}'", per, "launch the workunit with a pk.TeamPolicy")
        if not statement:
            raise self.type_error(f"'{ast.unparse(node)}' has no value", node,
                                  "assign results inside the body (nonlocal names) or write them to a View")
        body, _ = self._nested_body(fn, 0, "pk.single", "define the body with 'def body():' inside the workunit")
        return ir.Single(per.func.attr, team.id, body, loc=self.loc(node))


def _convert(value, t):
    """``value`` as type ``t``: a Cast where the types differ (None or a non-scalar: unchanged)."""
    if isinstance(t, DType) and isinstance(value.type, DType) and value.type != t:
        return ir.Cast(value, t, loc=value.loc)
    return value
