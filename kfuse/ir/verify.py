"""``verify(kernel)``: the IR's invariants, checked after lowering and after every transform in tests.

Every name is declared before use (parameters, hoisted locals, loop variables inside their loop), every
node's type is what the typing rules give its operands, indices are integers, one per dimension of the
View, stores go to View parameters, helper calls name an existing instance with matching arguments, classtype
fields exist with their declared types and classtype values are assigned only new values.
"""
from __future__ import annotations

from ..types import DType
from . import nodes as ir
from . import typing as rules
from .nodes import TEAM, StructType, ViewType


class VerifyError(AssertionError):
    """The IR breaks one of its invariants (a bug in a lowering or a transform)."""


def verify(kernel: ir.Kernel) -> None:
    scope = dict(kernel.threads + kernel.accs + kernel.flags + kernel.params + kernel.locals)
    names = [n for n, _ in kernel.threads + kernel.accs + kernel.flags + kernel.params + kernel.locals]
    _check(len(set(names)) == len(names), f"kernel {kernel.name}: a name is declared twice in {names}")
    _check(not any(isinstance(t, StructType) for _, t in kernel.params),
           f"kernel {kernel.name}: a classtype value is a kernel parameter")
    checker = _Checker(kernel)
    checker.block(kernel.body, scope, function=None)
    for fn in kernel.helpers:
        _check(fn.struct is None or fn.params[:1] and fn.params[0][1] == fn.struct,
               f"method {fn.name}: its first parameter is not a {fn.struct}")
        checker.block(fn.body, dict(fn.params + fn.locals), function=fn)


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise VerifyError(message)


class _Checker:
    def __init__(self, kernel: ir.Kernel):
        self.kernel = kernel

    def block(self, stmts, scope: dict, function) -> None:
        scope = dict(scope)
        for s in stmts:
            self.stmt(s, scope, function)

    def stmt(self, s, scope: dict, function) -> None:
        where = f"{type(s).__name__} at {s.loc}"
        if isinstance(s, (ir.Assign, ir.Accumulate)):
            _check(scope.get(s.name) == s.type, f"{where}: '{s.name}' is not a local of type {s.type}")
            value = self.expr(s.value, scope)
            if s.op is None:
                _check(value == s.type, f"{where}: assigns a {value} to '{s.name}' of type {s.type}")
            if isinstance(s.type, StructType):
                _check(s.op is None and isinstance(s.value, (ir.New, ir.HelperCall)),
                       f"{where}: classtype '{s.name}' is assigned a value that is not new")
        elif isinstance(s, ir.SetField):
            struct = scope.get(s.target)
            _check(isinstance(struct, StructType) and struct.field(s.name) == s.type,
                   f"{where}: '{s.target}' has no field '{s.name}' of type {s.type}")
            value = self.expr(s.value, scope)
            _check(isinstance(value, DType) and (s.op is not None or value == s.type),
                   f"{where}: sets field '{s.name}' of type {s.type} to a {value}")
        elif isinstance(s, ir.Store):
            view = scope.get(s.view)
            _check(isinstance(view, ViewType), f"{where}: stores to '{s.view}', which is not a View")
            self.indices(s.indices, view, scope, where)
            value = self.expr(s.value, scope)
            _check(s.type == view.dtype, f"{where}: element type {s.type}, View holds {view.dtype}")
            if s.op is None:
                _check(value == s.type, f"{where}: stores a {value} into a View of {s.type}")
        elif isinstance(s, ir.Eval):
            self.expr(s.value, scope)
        elif isinstance(s, ir.Print):
            for a in s.args:
                _check(isinstance(self.expr(a, scope), DType), f"{where}: prints a non-scalar")
        elif isinstance(s, ir.Barrier):
            _check(scope.get(s.team) == TEAM, f"{where}: '{s.team}' is not the team")
        elif isinstance(s, ir.Single):
            _check(scope.get(s.team) == TEAM, f"{where}: '{s.team}' is not the team")
            body = scope.get(s.body)
            _check(isinstance(body, ir.Lambda) and body.indices == 0 and not body.params,
                   f"{where}: '{s.body}' is not a nested def without parameters before it")
        elif isinstance(s, ir.ScratchView):
            _check(function is None and scope.get(s.team) == TEAM, f"{where}: not in a team kernel's body")
            _check(s.type.scratch and len(s.extents) == s.type.ndim and s.level in (0, 1), f"{where}: malformed")
            for e in s.extents:
                _check(self.expr(e, scope) == DType.int64, f"{where}: extent is not an int64")
            _check(s.name not in scope, f"{where}: '{s.name}' is declared twice")
            scope[s.name] = s.type
        elif isinstance(s, (ir.If, ir.While)):
            _check(isinstance(self.expr(s.test, scope), DType), f"{where}: the condition is not a scalar")
            self.block(s.body, scope, function)
            if isinstance(s, ir.If):
                self.block(s.orelse, scope, function)
        elif isinstance(s, ir.For):
            for e in (s.start, s.stop, s.step):
                t = self.expr(e, scope)
                _check(isinstance(t, DType) and not t.is_float, f"{where}: range bound of type {t}")
            if s.scoped:
                inner = dict(scope, **{s.var: DType.int64})
            else:
                _check(s.var in scope, f"{where}: loop variable '{s.var}' is not declared")
                inner = scope
            self.block(s.body, inner, function)
        elif isinstance(s, ir.Lambda):
            self.block(s.body, dict(scope, **dict(s.params + s.locals)), function)
            scope[s.name] = s
        elif isinstance(s, ir.Return):
            if s.value is not None:
                t = self.expr(s.value, scope)
                _check(function is not None and function.ret is not None, f"{where}: returns a value")
                _check(isinstance(t, DType) or t == function.ret, f"{where}: returns a {t}")

    def indices(self, indices, view: ViewType, scope: dict, where: str) -> None:
        _check(len(indices) == view.ndim, f"{where}: {len(indices)} indices for a {view.ndim}-D View")
        for i in indices:
            t = self.expr(i, scope)
            _check(isinstance(t, DType) and not t.is_float, f"{where}: index of type {t}")

    def arguments(self, args, params, scope: dict, where: str) -> None:
        """A classtype argument goes to a parameter of its own classtype, anything else to a non-classtype."""
        for a, (name, t) in zip(args, params):
            value = self.expr(a, scope)
            _check(value == t or not isinstance(value, StructType) and not isinstance(t, StructType),
                   f"{where}: passes a {value} to parameter '{name}' of type {t}")

    def expr(self, e, scope: dict):
        """Check ``e`` and return its type."""
        where = f"{type(e).__name__} at {e.loc}"
        if isinstance(e, ir.Const):
            _check(isinstance(e.type, DType), f"{where}: constant of type {e.type}")
        elif isinstance(e, ir.Name):
            _check(e.id in scope, f"{where}: '{e.id}' is used but not declared")
            declared = scope[e.id]
            _check(declared == e.type or isinstance(declared, ir.Lambda),
                   f"{where}: '{e.id}' has type {e.type}, declared {declared}")
        elif isinstance(e, (ir.Load, ir.Atomic)):
            view = scope.get(e.view)
            _check(isinstance(view, ViewType), f"{where}: '{e.view}' is not a View")
            self.indices(e.indices, view, scope, where)
            for a in getattr(e, "args", ()):
                _check(self.expr(a, scope) == view.dtype, f"{where}: operand is not a {view.dtype}")
            want = view.dtype if isinstance(e, ir.Load) else rules.atomic_type(e.func, view.dtype)
            _check(e.type == want, f"{where}: type {e.type}, expected {want}")
        elif isinstance(e, ir.Extent):
            _check(isinstance(scope.get(e.view), ViewType), f"{where}: '{e.view}' is not a View")
            t = self.expr(e.dim, scope)
            _check(isinstance(t, DType) and not t.is_float, f"{where}: dimension of type {t}")
        elif isinstance(e, ir.BinOp):
            ta, tb = self.expr(e.left, scope), self.expr(e.right, scope)
            _check(isinstance(ta, DType) and isinstance(tb, DType), f"{where}: operands {ta}, {tb}")
            _check(e.type == rules.binop_type(e.op, ta, tb), f"{where}: type {e.type} for {ta} {e.op} {tb}")
            _check(ta == tb or rules.integer_operands(e.op, ta, tb) is None,
                   f"{where}: integer operands {ta}, {tb} are not converted")
        elif isinstance(e, ir.UnaryOp):
            t = self.expr(e.operand, scope)
            _check(isinstance(t, DType) and e.type == rules.unary_type(e.op, t), f"{where}: type {e.type} of {e.op}{t}")
        elif isinstance(e, ir.Compare):
            ta, tb = self.expr(e.left, scope), self.expr(e.right, scope)
            _check(rules.compare_operands(ta, tb) is None, f"{where}: integers {ta}, {tb} compared unconverted")
        elif isinstance(e, ir.BoolOp):
            types = [self.expr(v, scope) for v in e.values]
            _check(all(t == e.type for t in types), f"{where}: operands {types} of a {e.type}")
        elif isinstance(e, ir.Cast):
            _check(isinstance(self.expr(e.value, scope), DType), f"{where}: converts a non-scalar")
        elif isinstance(e, ir.Call):
            for a in e.args:
                _check(isinstance(self.expr(a, scope), DType), f"{where}: non-scalar argument")
        elif isinstance(e, ir.Ternary):
            self.expr(e.test, scope)
            _check(self.expr(e.body, scope) == e.type == self.expr(e.orelse, scope), f"{where}: branch types")
        elif isinstance(e, ir.HelperCall):
            _check(0 <= e.instance < len(self.kernel.helpers), f"{where}: no helper instance {e.instance}")
            fn = self.kernel.helpers[e.instance]
            _check(fn.name == e.name and len(fn.params) == len(e.args) and fn.ret == e.type,
                   f"{where}: does not match helper {fn.name}")
            self.arguments(e.args, fn.params, scope, where)
        elif isinstance(e, ir.New):
            _check(0 <= e.init < len(self.kernel.helpers), f"{where}: no helper instance {e.init}")
            fn = self.kernel.helpers[e.init]
            _check(fn.struct == e.type and fn.ret is None and len(fn.params) == len(e.args) + 1
                   and fn.params[0][1] == e.type, f"{where}: {fn.name} is not an __init__ of {e.type}")
            self.arguments(e.args, fn.params[1:], scope, where)
        elif isinstance(e, ir.Field):
            struct = self.expr(e.value, scope)
            _check(isinstance(struct, StructType) and struct.field(e.name) == e.type,
                   f"{where}: no field '{e.name}' of type {e.type} in {struct}")
        elif isinstance(e, ir.TeamQuery):
            _check(scope.get(e.team) == TEAM, f"{where}: '{e.team}' is not the team")
        elif isinstance(e, ir.Nested):
            _check(scope.get(e.team) == TEAM, f"{where}: '{e.team}' is not the team")
            body = scope.get(e.body)
            _check(isinstance(body, ir.Lambda), f"{where}: '{e.body}' is not a nested def before it")
            _check(body.indices == (len(e.bounds) if e.range.endswith("MDRange") else 1),
                   f"{where}: '{e.body}' takes {body.indices} indices")
            for b in e.bounds:
                self.expr(b, scope)
        else:
            raise VerifyError(f"not an IR expression: {e!r}")
        return e.type
