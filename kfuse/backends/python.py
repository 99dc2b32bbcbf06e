"""The python backend: a reference interpreter of the kernel AST the C++ code generator translates.

It needs no compiler, so tests of the tracer, the fuser and the transforms can run anywhere (like tinygrad's
PYTHON device). A kernel (one workunit's specialisation, or a fused group after its passes) is typed by the
C++ translator itself: ``_Typer`` records the type it gives every expression and local and the fault site of
every checked operation. ``_Emitter`` then writes the same body as a Python function whose operations follow
the C++ ones: integers computed in the promoted 64-bit type and wrapped, float32 rounded after every
operation, conversions wherever C++ converts (typed locals, stores, helper arguments and results), IEEE
floats, integer ``//`` and ``%`` checked, every View index checked. A fault does not stop the launch: the
faulting operation yields 0, the launch runs to its end, and the first fault is raised as the compiled
kernels raise it (``errors.kernel_fault`` reads the same record).
"""
from __future__ import annotations

import ast
import itertools
import math
import sys
import time
from dataclasses import dataclass
from fractions import Fraction
from types import SimpleNamespace

import numpy as np

from .. import counters
from ..codegen.kernel import body_scope, generate, roles
from ..codegen.translate import PRINTF_SPEC, BodyTranslator, Unit
from ..errors import FAULT_FIELD_SEPARATOR, ArgumentError, kernel_fault
from ..frontend.spec import ArgType
from ..ir.pyast import assigned_names, flatten_subscript
from ..ir.typing import BINOPS, binop_type, lambda_acc_type
from ..runtime.launch import argument_range_error
from ..types import DType, dtype_of, promote
from .base import Backend, Kernel, Lowered
from .interp import DebugTeamMember, IndexFault, c_format, debug_view

F32, F64, I64, BOOL = DType.float32, DType.float64, DType.int64, DType.bool
_INT64_MIN = -(1 << 63)


# --- values: Python int/float/bool holding what the C++ variable of a DType holds -------------------------
def _int_converter(dtype: DType):
    """``static_cast<dtype>`` of an int, bool or float. Out-of-range floats are undefined behaviour in C++;
    this gives what x86 gives for 32- and 64-bit signed targets (the lowest value), else the wrapped value."""
    bits, signed = dtype.bits, dtype.is_signed
    low, high = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    mask = (1 << bits) - 1
    saturating = signed and bits >= 32

    def convert(x):
        if type(x) is float:
            if not math.isfinite(x) or saturating and not low <= x < high + 1:
                return low if saturating else 0
            x = int(x)
        if low <= x <= high:
            return int(x)
        x &= mask
        return x - mask - 1 if signed and x > high else x
    return convert


def _to_float32(x) -> float:
    return float(np.float32(x))


CONVERT = {d: _int_converter(d) for d in DType if d.is_int}
CONVERT.update({F64: float, F32: _to_float32, BOOL: bool})
_ZERO = {d: (0.0 if d.is_float else False if d is BOOL else 0) for d in DType}


# --- C semantics of the operations Python spells differently ---------------------------------------------
def _fdiv(a, b) -> float:
    """IEEE division: a zero divisor gives inf or nan, as in C++."""
    a, b = float(a), float(b)
    if b == 0.0:
        return math.nan if a == 0.0 or a != a else math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


def _fmod_py(a, b) -> float:
    """``kf_fmod_py``: fmod whose sign follows the divisor, as Python's % does."""
    r = _c_fmod(float(a), float(b))
    if r != 0 and (r < 0) != (b < 0):
        r += b
    return r


def _ipow(base: int, exp: int) -> int:
    """``kf_ipow``: int64 power by squaring, wrapping; a non-positive exponent gives 1."""
    return CONVERT[I64](pow(base, exp, 1 << 64)) if exp > 0 else 1


def _shift(a: int, b: int, left: bool) -> int:
    """x86 masks a 64-bit shift count to 6 bits (a count outside 0..63 is undefined behaviour in C++)."""
    return a << (b & 63) if left else a >> (b & 63)


def _round(x) -> int:
    """``static_cast<int64_t>(std::nearbyint(x))``: half to even, through a double."""
    x = float(x)
    if not math.isfinite(x) or not -2.0 ** 63 <= x < 2.0 ** 63:
        return _INT64_MIN
    return round(x)


def _fma(a: float, b: float, c: float) -> float:
    """``std::fma``: a * b + c rounded once (non-finite operands and zero results as the plain expression)."""
    if not all(map(math.isfinite, (a, b, c))):
        return a * b + c
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    return float(exact) if exact else a * b + c


def _ieee(python_fn, numpy_fn):
    """The C library function: Python's math raises on domain errors and overflow where C returns nan or inf."""
    def fn(*args):
        try:
            return python_fn(*args)
        except (ValueError, OverflowError):
            return float(numpy_fn(*args))
    return fn


def _gamma_pole(x):
    return math.copysign(math.inf, x) if x == 0 else math.nan if x < 0 else math.inf


def _fmin(a, b):
    return b if a != a else a if b != b else min(a, b)


def _fmax(a, b):
    return b if a != a else a if b != b else max(a, b)


_c_fmod = _ieee(math.fmod, np.fmod)
_FLOAT_MATH = {  # the canonical math names whose C++ call is std::<name> of the argument(s) in a float type
    **{name: _ieee(getattr(math, name), getattr(np, name))
       for name in ("sqrt", "cbrt", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan",
                    "sinh", "cosh", "tanh")},
    **{name: _ieee(getattr(math, name), getattr(np, "arc" + name[1:]))
       for name in ("asin", "acos", "atan", "asinh", "acosh", "atanh")},
    "erf": math.erf, "erfc": math.erfc, "tgamma": _ieee(math.gamma, _gamma_pole),
    "lgamma": _ieee(math.lgamma, lambda x: math.inf), "floor": lambda x: float(np.floor(x)),
    "ceil": lambda x: float(np.ceil(x)), "trunc": lambda x: float(np.trunc(x)),
    "pow": _ieee(math.pow, np.power), "atan2": math.atan2, "fmin": _fmin, "fmax": _fmax, "fmod": _c_fmod,
    "hypot": math.hypot, "copysign": math.copysign, "fma": _fma}
#: ``pk`` inside an emitted kernel: the math functions kernels may call, with C's results.
PK_MATH = SimpleNamespace(**_FLOAT_MATH, isnan=math.isnan, isinf=math.isinf, isfinite=math.isfinite)


# --- typing: the C++ translator, recording what it decides ----------------------------------------------
class _Record:
    """What a translator decided about one function body (a helper instance has its own; nested defs share
    their kernel's). Keys are ``id()``s of nodes of the source tree, which the render keeps alive."""

    def __init__(self):
        self.types: dict = {}  # expression or assignment target -> its DType / ArgType / "team"
        self.sites: dict = {}  # (node, "floordiv" | "mod" | "index") -> fault-site number
        self.helpers: dict = {}  # helper call -> the C++ name of the helper instance it calls
        self.locals: dict = {}  # statement list of a function body -> {local: DType} declared there
        self.scopes: dict = {}  # statement list of a function body -> {name: type} of the scalars it sees


class _Typer(BodyTranslator):
    """The C++ translator run as the type checker it is, keeping each decision for ``_Emitter``: the same
    rules then govern both backends, and a kernel the translator refuses never reaches the interpreter."""

    def __init__(self, src, unit, scope, in_helper=False, record=None):
        super().__init__(src, unit, scope, in_helper)
        self.record = record if record is not None else _Record()
        self.params = {n: s.type for n, s in scope.items()}

    def nested_translator(self, scope):
        return _Typer(self.src, self.unit, scope, in_helper=True, record=self.record)

    def function_body(self, stmts, indent="  "):
        lines = super().function_body(stmts, indent)
        self.record.scopes[id(stmts)] = {n: s.type for n, s in self.scope.items() if s.kind == "scalar"}
        return lines

    def _infer_locals(self, stmts):
        found = super()._infer_locals(stmts)
        self.record.locals[id(stmts)] = found
        return found

    def expr(self, node, statement=False):
        code, t = super().expr(node, statement)
        if not self.inferring:
            self.record.types[id(node)] = t
            func = getattr(node, "func", None)
            if isinstance(func, ast.Name) and func.id in self.src.helpers and func.id not in self.scope:
                key = (func.id, tuple(self.record.types[id(a)] for a in node.args))
                self.record.helpers[id(node)] = self.unit.instances[key][0]
        return code, t

    def binop(self, op, left, right, node):
        code, t = super().binop(op, left, right, node)
        if not self.inferring:
            self.record.types[id(node)] = t  # also an AugAssign's combined value
        return code, t

    def _store_target(self, target):
        code, t = super()._store_target(target)
        self.record.types[id(target)] = t
        return code, t

    def _site(self, kind, node, view_node=None):
        number = super()._site(kind, node, view_node)
        if not self.inferring:
            self.record.sites[(id(node), kind)] = number
        return number


# --- emitting: the typed body as Python ---------------------------------------------------------------------
def _name(name: str, store: bool = False):
    return ast.Name(id=name, ctx=ast.Store() if store else ast.Load())


def _call(fn: str, *args):
    func = _name(fn)
    if "." in fn:
        base, attr = fn.split(".")
        func = ast.Attribute(value=_name(base), attr=attr, ctx=ast.Load())
    return ast.Call(func=func, args=list(args), keywords=[])


def _wrap(expr, dtype: DType):
    """``expr`` converted to ``dtype`` (integer results wrap to their type)."""
    return _call(f"_kf_to_{dtype.name}", expr)


_DIVISIONS = {ast.FloorDiv: "floordiv", ast.Mod: "mod"}


class _Emitter:
    """Writes one function (a kernel, a helper instance or a nested def) from what its translator recorded.

    Every emitted expression evaluates to the value its C++ counterpart has, in the Python type of its DType.
    """

    def __init__(self, record: _Record, stmts: list, helpers: dict, accs: tuple = (), returns=False,
                 nested=False):
        self.record = record
        self.helpers = helpers  # C++ name of each helper instance -> its parameter types
        self.locals = record.locals[id(stmts)]
        self.names = record.scopes[id(stmts)]
        self.stmts = stmts
        self.accs = accs  # what a bare ``return`` returns (the accumulators)
        self.returns = returns  # a helper's return type (None: void), or False outside helpers
        self.nested = nested
        self._temps = itertools.count()
        self.lambdas: dict = {}  # nested def -> its accumulator type (None: a parallel_for body)

    def t(self, node):
        return self.record.types[id(node)]

    def function(self, name: str, params: list, source_node) -> ast.FunctionDef:
        body = []
        if self.nested:
            assigned = assigned_names(self.stmts) & set(self.names) - set(self.locals) - set(params)
            if assigned:  # C++ lambdas capture by reference: assignments reach the enclosing function's names
                body.append(ast.Nonlocal(names=sorted(assigned)))
        body += [ast.Assign(targets=[_name(n, True)], value=ast.Constant(_ZERO[t])) for n, t in self.locals.items()]
        body += self.block(self.stmts)
        if self.accs:
            body.append(self._return_accs())
        fn = ast.FunctionDef(name=name, args=ast.arguments(posonlyargs=[], args=[ast.arg(arg=p) for p in params],
                                                           vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None,
                                                           defaults=[]),
                             body=body or [ast.Pass()], decorator_list=[], returns=None, type_comment=None)
        return ast.copy_location(fn, source_node)

    def _return_accs(self):
        values = [_name(a) for a in self.accs]
        return ast.Return(value=values[0] if self.nested else ast.Tuple(elts=values, ctx=ast.Load()))

    # --- conversions ------------------------------------------------------------------------------
    @staticmethod
    def conv(expr, src, dst):
        """``expr`` (of type ``src``) as C++ converts it to ``dst``. Narrow integers are converted even from
        their own type: C++ computes their unary operations in int, so the value may lie outside until stored."""
        if not isinstance(dst, DType) or src == dst and not (dst.is_int and dst.bits < 64):
            return expr
        return _wrap(expr, dst)

    # --- statements ---------------------------------------------------------------------------------
    def block(self, stmts) -> list:
        out = []
        for stmt in stmts:
            for new in getattr(self, "s_" + type(stmt).__name__)(stmt):
                out.append(ast.copy_location(new, stmt))
        return out or [ast.Pass()]

    def s_Pass(self, node):
        return [ast.Pass()]

    def s_Break(self, node):
        return [ast.Break()]

    def s_Continue(self, node):
        return [ast.Continue()]

    def s_Return(self, node):
        if self.returns is False:
            return [self._return_accs() if self.accs else ast.Return(value=None)]
        if node.value is None:
            return [ast.Return(value=None)]
        return [ast.Return(value=self.conv(self.expr(node.value), self.t(node.value), self.returns))]

    def s_Expr(self, node):
        if isinstance(node.value, ast.Constant):
            return []  # docstring
        return [ast.Expr(value=self.expr(node.value))]

    def s_Assign(self, node):
        if len(node.targets) == 1:
            return self.store(node.targets[0], self.expr(node.value), self.t(node.value))
        temp = f"_kf_v{next(self._temps)}"
        out = [ast.Assign(targets=[_name(temp, True)], value=self.expr(node.value))]
        for target in node.targets:
            out += self.store(target, _name(temp), self.t(node.value))
        return out

    def s_AnnAssign(self, node):
        return self.store(node.target, self.expr(node.value), self.t(node.value)) if node.value is not None else []

    def s_AugAssign(self, node):
        target, tt = node.target, self.t(node.target)
        value, vt = self.expr(node.value), self.t(node.value)
        out = []
        if isinstance(target, ast.Subscript):  # the element is located once, as C++ takes its reference once
            view, indices = flatten_subscript(target)
            index = f"_kf_i{next(self._temps)}"
            out.append(ast.Assign(targets=[_name(index, True)], value=self.index_tuple(indices)))
            current = _call("_kf_ld", _name(view.id), _name(index), self.site(target, "index"))
        else:
            current = _name(target.id)
        op = BINOPS[type(node.op)]
        # C++ ``x op= v`` computes in the operands' common type; the other operators as the translator's binop
        ct = binop_type(op, tt, vt) if op in ("+", "-", "*", "&", "|", "^") else self.t(node)
        new = self.conv(self.binop(node.op, current, tt, value, vt, ct, node), ct, tt)
        if isinstance(target, ast.Subscript):
            out.append(ast.Expr(value=_call("_kf_st", _name(view.id), _name(index), new,
                                            self.site(target, "index"))))
        else:
            out.append(ast.Assign(targets=[_name(target.id, True)], value=new))
        return out

    def store(self, target, value, vt) -> list:
        tt = self.t(target)
        value = self.conv(value, vt, tt)
        if isinstance(target, ast.Name):
            return [ast.Assign(targets=[_name(target.id, True)], value=value)]
        view, indices = flatten_subscript(target)
        return [ast.Expr(value=_call("_kf_st", _name(view.id), self.index_tuple(indices), value,
                                     self.site(target, "index")))]

    def s_If(self, node):
        return [ast.If(test=self.expr(node.test), body=self.block(node.body),
                       orelse=self.block(node.orelse) if node.orelse else [])]

    def s_While(self, node):
        return [ast.While(test=self.expr(node.test), body=self.block(node.body), orelse=[])]

    def s_For(self, node):
        args = [self.conv(self.expr(a), self.t(a), I64) for a in node.iter.args]
        var = node.target.id
        var_t = self.names.get(var, I64)
        body = self.block(node.body)
        if var_t == I64:
            target = _name(var, True)
        else:  # a local of another type reused as the loop variable: C++ assigns the int64 counter to it
            counter = f"_kf_it{next(self._temps)}"
            target = _name(counter, True)
            body.insert(0, ast.Assign(targets=[_name(var, True)], value=self.conv(_name(counter), I64, var_t)))
        return [ast.For(target=target, iter=_call("_kf_range", *args), body=body, orelse=[])]

    def s_FunctionDef(self, node):
        params = [a.arg for a in node.args.args]
        self.lambdas[node.name] = lambda_acc_type(node)
        inner = _Emitter(self.record, node.body, self.helpers, accs=tuple(params[1:2]), nested=True)
        return [inner.function(node.name, params, node)]

    # --- expressions ----------------------------------------------------------------------------------
    def expr(self, node):
        return ast.copy_location(getattr(self, "e_" + type(node).__name__)(node), node)

    def e_Constant(self, node):
        return ast.Constant(value=node.value)

    def e_Name(self, node):
        return _name(node.id)

    def site(self, node, kind: str):
        return ast.Constant(value=self.record.sites[(id(node), kind)])

    def index_tuple(self, indices):
        return ast.Tuple(elts=[self.conv(self.expr(i), self.t(i), I64) if self.t(i) is BOOL else self.expr(i)
                               for i in indices], ctx=ast.Load())

    def e_Subscript(self, node):
        view, indices = flatten_subscript(node)
        if isinstance(view, ast.Attribute):  # V.shape[d]
            return ast.Subscript(value=ast.Attribute(value=self.expr(view.value), attr="shape", ctx=ast.Load()),
                                 slice=self.expr(indices[0]), ctx=ast.Load())
        return _call("_kf_ld", _name(view.id), self.index_tuple(indices), self.site(node, "index"))

    def e_BinOp(self, node):
        return self.binop(node.op, self.expr(node.left), self.t(node.left), self.expr(node.right),
                          self.t(node.right), self.t(node), node)

    def binop(self, op, a, ta, b, tb, result, node):
        """``a op b`` computed as C++ computes it into ``result`` (the translator's type of the operation)."""
        opt = type(op)
        if result.is_float:
            a, b = self.conv(a, ta, result), self.conv(b, tb, result)
            if opt is ast.Div:
                value = _call("_kf_fdiv", a, b)
            elif opt is ast.FloorDiv:
                value = _call("pk.floor", self.conv(_call("_kf_fdiv", a, b), F64, result))
            elif opt is ast.Mod:
                value = _call("_kf_fmod_py", a, b)
            elif opt is ast.Pow:
                value = _call("pk.pow", a, b)
            else:
                value = ast.BinOp(left=a, op=op, right=b)
            return self.conv(value, F64, result)
        if result is BOOL:  # & | ^ of two bools
            return ast.BinOp(left=a, op=op, right=b)
        a, b = self.conv(a, ta, result), self.conv(b, tb, result)
        if opt in _DIVISIONS:
            kind = _DIVISIONS[opt]
            if (id(node), kind) not in self.record.sites:  # a constant divisor other than 0 and -1
                return ast.BinOp(left=a, op=op, right=b)
            return _call("_kf_divide", a, b, ast.Constant(kind), ast.Constant(result.is_signed),
                         self.site(node, kind))
        if opt is ast.Pow:
            return _call("_kf_ipow", a, b)
        if opt in (ast.LShift, ast.RShift):
            return _wrap(_call("_kf_shift", a, b, ast.Constant(opt is ast.LShift)), result)
        return _wrap(ast.BinOp(left=a, op=op, right=b), result)

    def e_UnaryOp(self, node):
        a, t = self.expr(node.operand), self.t(node.operand)
        op = type(node.op)
        if op is ast.Not:
            return ast.UnaryOp(op=ast.Not(), operand=a)
        if op is ast.USub:
            if t is BOOL or t.is_int and not t.is_signed:  # Python negates the value, as int64
                a, t = self.conv(a, t, I64), I64
            negated = ast.UnaryOp(op=ast.USub(), operand=a)
            return _wrap(negated, t) if t.is_int and t.bits >= 32 else negated  # narrower: C++ negates in int
        if op is ast.UAdd:
            return self.conv(a, t, I64) if t is BOOL else a
        if t is BOOL:  # ~ of a bool is its negation in the translator
            return ast.UnaryOp(op=ast.Not(), operand=a)
        inverted = ast.UnaryOp(op=ast.Invert(), operand=a)
        return _wrap(inverted, t) if t in (DType.uint32, DType.uint64) else inverted

    def e_BoolOp(self, node):
        values = [self.expr(v) for v in node.values]
        result = self.t(node)
        joined = ast.BoolOp(op=node.op, values=values)
        if all(self.t(v) == result for v in node.values):
            return joined
        return _wrap(joined, result)  # the deciding operand, in the common type

    def e_Compare(self, node):
        parts, left = [], node.left
        for op, right in zip(node.ops, node.comparators):
            a, b, ta, tb = self.expr(left), self.expr(right), self.t(left), self.t(right)
            if ta != tb and (ta.is_float or tb.is_float or ta.is_int and tb.is_int):
                common = promote(ta, tb)  # C++'s conversions: an int compared with a float becomes that float
                a, b = self.conv(a, ta, common), self.conv(b, tb, common)
            parts.append(ast.Compare(left=a, ops=[op], comparators=[b]))
            left = right
        return parts[0] if len(parts) == 1 else ast.BoolOp(op=ast.And(), values=parts)

    def e_IfExp(self, node):
        t = self.t(node)
        return ast.IfExp(test=self.expr(node.test), body=self.conv(self.expr(node.body), self.t(node.body), t),
                         orelse=self.conv(self.expr(node.orelse), self.t(node.orelse), t))

    def e_Call(self, node):
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "pk":
            return self.call_pk(func.attr, node)
        if isinstance(func, ast.Attribute):
            if isinstance(self.t(func.value), ArgType):
                view = self.expr(func.value)
                if func.attr == "rank":
                    return ast.Constant(value=self.t(func.value).ndim)
                shape = ast.Attribute(value=view, attr="shape", ctx=ast.Load())
                return ast.Subscript(value=shape, slice=self.expr(node.args[0]), ctx=ast.Load())
            return ast.Call(func=ast.Attribute(value=self.expr(func.value), attr=func.attr, ctx=ast.Load()),
                            args=[], keywords=[])  # the team member's methods
        cname = self.record.helpers.get(id(node))
        if cname is not None:
            params = self.helpers[cname]
            return _call(cname, *(self.conv(self.expr(a), self.t(a), p) for a, p in zip(node.args, params)))
        return self.call_builtin(func.id, node)

    def args(self, node, to=None):
        return [self.conv(self.expr(a), self.t(a), to) if to else self.expr(a) for a in node.args]

    def call_builtin(self, name, node):
        if name in ("int", "float", "bool"):
            return self.conv(self.expr(node.args[0]), self.t(node.args[0]), self.t(node))
        if name == "abs":
            return self.absolute(node)
        if name == "round":
            return _call("_kf_round", *self.args(node))
        if name == "len":
            shape = ast.Attribute(value=self.expr(node.args[0]), attr="shape", ctx=ast.Load())
            return ast.Subscript(value=shape, slice=ast.Constant(0), ctx=ast.Load())
        code, t = self.expr(node.args[0]), self.t(node.args[0])  # min / max, pairwise in the growing type
        for a in node.args[1:]:
            common = promote(t, self.t(a))
            code = ast.Call(func=_name("_kf_" + name), args=[self.conv(code, t, common),
                                                               self.conv(self.expr(a), self.t(a), common)],
                            keywords=[])
            t = common
        return code

    def absolute(self, node):
        a, t = self.expr(node.args[0]), self.t(node.args[0])
        value = _call("abs", a)
        return value if t.is_float else _wrap(value, I64 if t is BOOL else t)  # kf_abs keeps the type

    def call_pk(self, name, node):
        t = self.t(node)
        if name in ("fabs", "abs"):
            return self.absolute(node)
        if name == "round":
            return _call("_kf_round", *self.args(node))
        if name in ("isnan", "isinf", "isfinite"):
            return _call(f"pk.{name}", *self.args(node))
        if name in _FLOAT_MATH:
            return self.conv(_call(f"pk.{name}", *self.args(node, t)), F64, t)
        if name.startswith("atomic_"):
            view, index = node.args[:2]
            vt = self.t(view).dtype
            parts = index.elts if isinstance(index, (ast.List, ast.Tuple)) else [index]
            return _call("_kf_atomic", ast.Constant(name), self.expr(view), self.index_tuple(parts),
                         self.site(node, "index"), *(self.conv(self.expr(a), self.t(a), vt) for a in node.args[2:]))
        if name == "printf":
            fmt = node.args[0].value
            convs = tuple(m.group(3) for m in PRINTF_SPEC.finditer(fmt) if m.group(3) != "%")
            return _call("_kf_printf", ast.Constant(fmt), ast.Constant(convs), *self.args(node)[1:])
        if name == "team_barrier":
            return ast.Constant(value=None)
        rng, fn = node.args  # nested parallel_for / parallel_reduce / parallel_scan over a team range
        bounds = [self.conv(self.expr(a), self.t(a), I64) for a in rng.args[1:]]
        if len(bounds) == 1:
            bounds.insert(0, ast.Constant(0))
        op = name[len("parallel_"):]
        if op == "for":
            return _call("_kf_nested_for", *bounds, _name(fn.id))
        return _call(f"_kf_nested_{op}", *bounds, _name(fn.id), ast.Constant(_ZERO[self.lambdas[fn.id]]))


# --- running ----------------------------------------------------------------------------------------------
class _Runtime:
    """The checked operations of one rendered kernel and the first fault of its current launch."""

    def __init__(self, sites: list):
        self.sites = sites
        self.fault = None  # (site, dim, a, b) of the first fault

    def record(self, site: int, dim: int, a: int, b: int) -> None:
        if self.fault is None:
            self.fault = (site, dim, a, b)

    def take_fault(self, kernel: str):
        """The exception a compiled kernel raises for the fault recorded (the same record), or None."""
        if self.fault is None:
            return None
        number, dim, a, b = self.fault
        s = self.sites[number]
        fields = (s.kind, s.workunit, s.function, s.filename, s.line, s.view, dim, a, b, s.member)
        return kernel_fault(FAULT_FIELD_SEPARATOR.join(map(str, fields)), kernel)

    def load(self, view, index: tuple, site: int):
        """An element; 0 (and a fault) for an index outside the View."""
        value = self._read(view, index, site)
        return view.dtype.type(0).item() if value is None else value

    def _read(self, view, index: tuple, site: int):
        try:
            return view[index].item()
        except IndexFault as fault:
            self._index_fault(fault, site)
            return None

    def store(self, view, index: tuple, value, site: int) -> None:
        try:
            view[index] = value
        except IndexFault as fault:
            self._index_fault(fault, site)

    def _index_fault(self, fault: IndexFault, site: int) -> None:
        f = fault.fields
        self.record(site, f["dim"], CONVERT[I64](f["index"]), f["extent"])

    def divide(self, a: int, b: int, kind: str, signed: bool, site: int) -> int:
        """``kf_floordiv_checked`` / ``kf_mod_checked`` on int64 or uint64 operands."""
        if b == 0 or signed and b == -1 and a == _INT64_MIN:
            if b == 0 or kind == "floordiv":
                self.record(site, 0, CONVERT[I64](a), CONVERT[I64](b))
            return 0
        return a // b if kind == "floordiv" else a % b

    def atomic(self, name: str, view, index: tuple, site: int, *values):
        """Kokkos' atomics, one thread at a time; the old value for the fetch variants."""
        old = self._read(view, index, site)
        if old is None:  # C++ works on the fault record's scratch element
            return view.dtype.type(0).item()
        dtype = dtype_of(view.dtype)
        op = name.replace("atomic_", "").replace("fetch_", "")
        if op == "compare_exchange":
            new = values[1] if old == values[0] else old
        else:
            v = values[0] if values else 1
            new = {"add": lambda: old + v, "sub": lambda: old - v, "increment": lambda: old + 1,
                   "decrement": lambda: old - 1, "max": lambda: v if v > old else old,
                   "min": lambda: v if v < old else old, "and": lambda: old & v, "or": lambda: old | v,
                   "exchange": lambda: v}[op]()
        self.store(view, index, CONVERT[dtype](new), site)
        return old

    @staticmethod
    def printf(fmt: str, convs: tuple, *values) -> None:
        """C printf casts integers to long long (``%u``/``%x``/``%o`` print them unsigned) and floats to double."""
        args = []
        for conv, v in zip(convs, values):
            if conv in "diouxXc":
                v = int(v)
                args.append(v + (1 << 64) if v < 0 and conv in "ouxX" else v)
            else:
                args.append(float(v))
        sys.stdout.write(c_format(fmt, args))

    @staticmethod
    def nested_for(begin: int, end: int, fn) -> None:
        for j in range(begin, end):
            fn(j)

    @staticmethod
    def nested_reduce(begin: int, end: int, fn, zero):
        acc = zero
        for j in range(begin, end):
            acc = fn(j, acc)
        return acc

    @staticmethod
    def nested_scan(begin: int, end: int, fn, zero) -> None:
        """As Kokkos runs a team's scan: a pass that accumulates, then the final pass from zero."""
        acc = zero
        for j in range(begin, end):
            acc = fn(j, acc, False)
        acc = zero
        for j in range(begin, end):
            acc = fn(j, acc, True)

    def namespace(self) -> dict:
        found = {f"_kf_to_{d.name}": CONVERT[d] for d in DType}
        found.update(pk=PK_MATH, _kf_range=range, _kf_fdiv=_fdiv, _kf_fmod_py=_fmod_py, _kf_ipow=_ipow,
                     _kf_shift=_shift, _kf_round=_round, _kf_min=min, _kf_max=max, _kf_ld=self.load,
                     _kf_st=self.store, _kf_divide=self.divide, _kf_atomic=self.atomic, _kf_printf=self.printf,
                     _kf_nested_for=self.nested_for, _kf_nested_reduce=self.nested_reduce,
                     _kf_nested_scan=self.nested_scan)
        return found


@dataclass(frozen=True)
class Rendered:
    """A kernel as Python: its function (thread index(es), accumulators, last_pass, parameters) and runtime."""

    lowered: Lowered
    function: object
    runtime: _Runtime
    python: str  # the emitted source, for reading (ast.unparse)


class PythonKernel(Kernel):
    def __init__(self, rendered: Rendered):
        self.rendered = rendered
        self.name = rendered.lowered.name
        self.fused = rendered.lowered.fused
        self._seconds = 0.0

    def launch(self, bounds: tuple, args: tuple) -> tuple:
        lowered, runtime = self.rendered.lowered, self.rendered.runtime
        spec = lowered.spec
        error = argument_range_error(spec, self.name, self.fused, bounds, args)
        if error is not None:
            raise error
        values = [debug_view(a, n) if t.is_view else CONVERT[t.dtype](a) for a, (n, t) in zip(args, spec.params)]
        runtime.fault = None
        start = time.perf_counter()
        with np.errstate(all="ignore"):
            results = _run(self.rendered.function, spec, _points(spec, bounds), values)
        self._seconds = time.perf_counter() - start
        results = tuple(float(r) if d.is_float else int(r) for r, d in zip(results, spec.accs))
        fault = runtime.take_fault(self.name)
        if fault is not None:
            fault.results = results  # the launch ran to its end
            raise fault
        counters.bump("kernels_launched")
        if self.fused:
            counters.bump("fused_kernels_launched")
        return results

    @property
    def last_seconds(self) -> float:
        return self._seconds


def _points(spec, bounds: tuple):
    if spec.policy == "range":
        return ((i,) for i in range(bounds[0], bounds[1]))
    if spec.policy == "mdrange":
        return itertools.product(*(range(b, e) for b, e in zip(bounds[:spec.rank], bounds[spec.rank:])))
    return ((DebugTeamMember(r, bounds[0]),) for r in range(bounds[0]))


def _run(fn, spec, points, values: list) -> tuple:
    if spec.op == "for":
        for p in points:
            fn(*p, *values)
        return ()
    zeros = tuple(_ZERO[d] for d in spec.accs)
    if spec.op == "reduce":
        accs = zeros
        for p in points:
            accs = fn(*p, *accs, *values)
        return accs
    points = list(points)  # scan: a first pass accumulates, a second pass with last_pass=True writes
    acc = zeros
    for p in points:
        acc = fn(*p, *acc, False, *values)
    total = acc
    acc = zeros
    for p in points:
        acc = fn(*p, *acc, True, *values)
    return total


def _compile(functions: list, filename: str, namespace: dict) -> None:
    """Compile emitted functions under their source's file name, so tracebacks show the user's lines."""
    module = ast.fix_missing_locations(ast.Module(body=functions, type_ignores=[]))
    for node in ast.walk(module):  # a fused body's lines come from several members, in no order: point at starts
        if hasattr(node, "end_lineno"):
            node.end_lineno, node.end_col_offset = node.lineno, node.col_offset
    exec(compile(module, filename, "exec"), namespace)  # noqa: S102 - code emitted from the kernel's AST


def render_python(lowered: Lowered) -> Rendered:
    """Type ``lowered`` with the C++ translator and emit it, with its helper instances, as Python functions."""
    src, spec = lowered.source, lowered.spec
    unit = Unit(src.helpers, bounds_check=True, body_class=_Typer)  # every index gets a fault site
    typer = _Typer(src, unit, body_scope(src, spec))
    typer.function_body(src.tree.body)
    helpers = {cname: [body.params[a.arg] for a in body.src.tree.args.args] for cname, body in unit.bodies.items()}
    runtime = _Runtime(unit.fault_sites)
    namespace = runtime.namespace()
    emitted = []
    for cname, ret in unit.instances.values():
        body = unit.bodies[cname]
        tree = body.src.tree
        fn = _Emitter(body.record, tree.body, helpers, returns=ret).function(cname, [a.arg for a in tree.args.args],
                                                                             tree)
        _compile([fn], body.src.filename, namespace)
        emitted.append(fn)
    _, acc_names, _ = roles(src, spec)
    kernel = _Emitter(typer.record, src.tree.body, helpers, accs=tuple(acc_names)).function(
        src.tree.name, [a.arg for a in src.tree.args.args], src.tree)
    _compile([kernel], src.filename, namespace)
    emitted.append(kernel)
    return Rendered(lowered, namespace[src.tree.name], runtime, "\n\n".join(ast.unparse(f) for f in emitted))


class PythonBackend(Backend):
    """Kernels run by the Python interpreter (host spaces only); the C++ translator still type-checks them."""

    name = "python"
    persistent = False
    transforms = frozenset({"args", "loops", "memory"})  # restrict only means something to a C++ compiler

    def check_space(self, space: str, workunit: str) -> None:
        if space not in ("OpenMP", "Serial"):
            raise ArgumentError(f"workunit '{workunit}': execution space {space} is not available to the python "
                                "backend, which runs kernels on the host; use pk.OpenMP or pk.Serial")

    def translate(self, source, spec, name):
        generate(source, spec, name)  # raises the C++ backend's syntax and type errors at the user's call
        return None

    def render(self, lowered: Lowered, translated=None) -> Rendered:
        return render_python(lowered)

    def load(self, rendered: Rendered) -> PythonKernel:
        return PythonKernel(rendered)


PYTHON = PythonBackend()  # the process's one: specialisations and their kernels are kept per backend instance
