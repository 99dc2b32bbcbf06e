"""Kernel typing rules: the type the IR lowering gives every value.

Python's operators keep Python's meaning (``/`` is true division, integers compute in 64 bits); the
result types are what the emitted C++ computes. Locals take their annotation, else the join of every
value assigned to them, found by a small fixpoint (``infer_locals``).
"""
from __future__ import annotations

import ast

from .. import types as kt
from ..errors import KernelTypeError
from ..types import DType, promote
from .nodes import StructType, ViewType

F64, I64, BOOL = DType.float64, DType.int64, DType.bool

BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
          ast.Pow: "**", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>"}
UNARY = {ast.USub: "-", ast.UAdd: "+", ast.Not: "not", ast.Invert: "~"}
COMPARE = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
BITWISE = ("&", "|", "^", "<<", ">>")

UNARY_FLOAT_MATH = {"sqrt", "cbrt", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan",
                    "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "floor", "ceil",
                    "trunc", "erf", "erfc", "tgamma", "lgamma"}
BINARY_FLOAT_MATH = {"pow", "atan2", "fmin", "fmax", "fmod", "hypot", "copysign"}
#: The read-modify-write atomics PyKokkos and Kokkos offer as ``atomic_<op>`` and ``atomic_fetch_<op>``.
ATOMIC_OPS = ("add", "sub", "mul", "div", "mod", "max", "min", "and", "or", "xor", "lshift", "rshift")
#: Those C++ defines on integers only.
INTEGER_ATOMIC_OPS = frozenset(("mod", "and", "or", "xor", "lshift", "rshift"))
#: pk.<name> -> (Kokkos function, whether it returns the old value)
ATOMICS = {**{f"atomic_fetch_{op}": (f"atomic_fetch_{op}", True) for op in ATOMIC_OPS},
           **{f"atomic_{op}": (f"atomic_fetch_{op}", False) for op in ATOMIC_OPS},
           "atomic_exchange": ("atomic_exchange", True)}
ATOMIC_CALLS = frozenset(ATOMICS) | {"atomic_increment", "atomic_decrement", "atomic_compare_exchange"}


def atomic_op(name: str) -> str:
    """The operation of ``pk.<name>`` (``atomic_fetch_xor`` -> ``xor``)."""
    return name.removeprefix("atomic_").removeprefix("fetch_")


class Unknown(Exception):
    """A name's type is not known yet (raised while inferring locals only)."""


def annotation_dtype(value) -> DType | None:
    """The scalar DType a resolved annotation names (``float``, ``pk.int32``, ``pk.Acc[pk.double]``), if any."""
    if value is None or isinstance(value, kt._ViewAnnotation):
        return None
    if isinstance(value, kt._AccAnnotation):
        return value.dtype
    try:
        return kt.dtype_of(value)
    except TypeError:
        return None


def annotation_type(value):
    """The value type a resolved annotation names: a scalar DType or a classtype's StructType (else None)."""
    return value if isinstance(value, StructType) else annotation_dtype(value)


def join(a: DType, b: DType) -> DType:
    """The type of a value that is ``a`` or ``b`` (a ternary's, a local assigned both): equal types stay."""
    return a if a == b else promote(a, b)


def integer_operands(op: str, ta: DType, tb: DType) -> DType | None:
    """The type integer operands are converted to before ``op`` (C++ would compute int32 * int32 in 32 bits
    and uint32 - int64 in unsigned arithmetic), or None when they are not converted."""
    if ta.is_float or tb.is_float or op in ("/", "**") or (ta is BOOL and tb is BOOL):
        return None
    return promote(ta, tb)


def compare_operands(ta, tb) -> DType | None:
    """The type two integers of different types are converted to before comparing them (C++ would compare
    ``uint32(3) < -1`` as unsigned), or None."""
    if isinstance(ta, DType) and isinstance(tb, DType) and ta.is_int and tb.is_int and ta != tb:
        return promote(ta, tb)
    return None


def binop_type(op: str, ta: DType, tb: DType) -> DType:
    both_int = not ta.is_float and not tb.is_float
    if op in ("&", "|", "^") and ta is BOOL and tb is BOOL:
        return BOOL
    if op == "/" and both_int:
        return F64
    if op == "**" and both_int:
        return I64
    return promote(ta, tb)


def unary_type(op: str, t: DType) -> DType:
    if op == "not":
        return BOOL
    if op == "-" and (t is BOOL or (t.is_int and not t.is_signed)):  # Python negates the value
        return I64
    if op == "+" and t is BOOL:
        return I64
    return t


def boolop_type(types) -> DType:
    """``a and b``: bool if all are; else the operands' join (Python yields the deciding operand)."""
    if all(t is BOOL for t in types):
        return BOOL
    result = types[0]
    for t in types[1:]:
        result = join(result, t)
    return result


def abs_type(t: DType) -> DType:
    return t if t.is_float else promote(t, t)


def promote_all(types) -> DType:
    """The promoted type of several values (min/max of them, a helper's several returns)."""
    result = types[0]
    for t in types[1:]:
        result = promote(result, t)
    return result


def math_type(name: str, types) -> DType:
    """Result of ``pk.<name>`` (math) on arguments of ``types``."""
    if name in ("fabs", "abs"):
        return abs_type(types[0])
    if name in ("isnan", "isinf", "isfinite"):
        return BOOL
    if name == "round":
        return I64
    if name in UNARY_FLOAT_MATH:
        return types[0] if types[0].is_float else F64
    if name in BINARY_FLOAT_MATH:
        t = promote(types[0], types[1])
        return t if t.is_float else F64
    return F64  # fma


def is_math(name: str) -> bool:
    return name in UNARY_FLOAT_MATH or name in BINARY_FLOAT_MATH or \
        name in ("fabs", "abs", "isnan", "isinf", "isfinite", "round", "fma")


def atomic_type(name: str, element: DType) -> DType | None:
    """What ``pk.<name>`` returns on an element of type ``element`` (None: nothing)."""
    if name == "atomic_compare_exchange":
        return element
    if name in ATOMICS and ATOMICS[name][1]:
        return element
    return None


def helper_params(name: str, src, arg_types: tuple, node, caller) -> list:
    """(name, type) of helper ``name``'s parameters called with ``arg_types``: a scalar parameter takes the
    type it is annotated with (Views keep theirs); a classtype value goes only where that classtype (or no
    annotation) is declared."""
    params = src.tree.args.args
    if len(params) != len(arg_types):
        raise caller.error(f"helper '{name}' takes {len(params)} arguments, {len(arg_types)} given", node)
    typed = []
    for a, t in zip(params, arg_types):
        want = annotation_type(src.annotations.get(a.arg))
        if (isinstance(want, StructType) or isinstance(t, StructType)) and want not in (None, t):
            raise caller.error(f"'{name}' parameter '{a.arg}' is declared {want.name}, but is given a "
                               f"{type_name(t)}", node, cls=KernelTypeError)
        typed.append((a.arg, want if want is not None and not isinstance(t, ViewType) else t))
    return typed


def type_name(t) -> str:
    """A type as messages name it (``float64``, ``Particle``, ``View1D[float64]``)."""
    return t.name if isinstance(t, (DType, StructType)) else str(t)


def helper_return(src, return_types: list):
    """A helper's return type: its annotation, else the promoted type of the values it returns (a classtype
    returns that classtype)."""
    ret = annotation_type(src.annotations.get("return"))
    if ret is None and return_types:  # the lowering made every return a scalar, or all one classtype
        ret = return_types[0] if isinstance(return_types[0], StructType) else promote_all(return_types)
    return ret


def lambda_acc_type(node: ast.FunctionDef, indices: int) -> DType | None:
    """The accumulator type of a nested def with ``indices`` index parameters (the parameter after them), or None
    for a plain for body."""
    params = node.args.args
    if len(params) <= indices:
        return None
    acc = params[indices].annotation
    return annotation_dtype(acc.value if acc is not None else None) or F64


def read_outside_its_loops(stmts, name: str) -> bool:
    """Whether ``name`` is read anywhere but inside the body of a ``for`` loop that assigns it."""
    def visit(node, inside: bool) -> bool:
        if isinstance(node, ast.For) and isinstance(node.target, ast.Name) and node.target.id == name:
            return visit(node.iter, inside) or any(visit(s, True) for s in node.body + node.orelse)
        if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load):
            return not inside
        return any(visit(child, inside) for child in ast.iter_child_nodes(node))
    return any(visit(s, False) for s in stmts)


def infer_locals(stmts, known, type_of, fail) -> tuple[dict, set]:
    """Types of the names a body assigns, joined over every assignment (fixpoint), and the loop variables
    that live only inside their loops.

    ``known``: names already in scope (parameters); ``type_of(value, types, lambdas)``: the type of an
    expression given local ``types`` and the body's nested defs by name, raising ``Unknown`` for a name
    not typed yet; ``fail``: gives the errors (``unsupported``, ``type_error``).
    """
    fixed: dict = {}
    types: dict = {}
    assigns = []
    lambdas: dict = {}  # nested defs: a local may hold what their nested reduce returns

    def collect(body):
        for stmt in body:
            if isinstance(stmt, ast.FunctionDef):
                lambdas[stmt.name] = stmt
                continue
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.annotation.value, kt._ScratchAnnotation):
                continue  # a scratch View, declared by the lowering
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                dtype = annotation_type(stmt.annotation.value)
                if dtype is None:
                    raise fail.unsupported(f"local annotation {stmt.annotation.value!r}", stmt,
                                           "annotate locals with int, float, bool, pk.<dtype> or a @pk.classtype")
                fixed[stmt.target.id] = dtype
            elif isinstance(stmt, ast.Assign):
                for target in stmt.targets:
                    if isinstance(target, ast.Name):
                        assigns.append((target.id, stmt.value))
                    elif isinstance(target, (ast.Tuple, ast.List)):
                        raise fail.unsupported("tuple assignment", stmt, "assign each variable separately")
            elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
                assigns.append((stmt.target.id, ast.BinOp(left=stmt.target, op=stmt.op, right=stmt.value)))
            elif isinstance(stmt, ast.For) and isinstance(stmt.target, ast.Name):
                if stmt.target.id not in known:
                    types.setdefault(stmt.target.id, I64)
            for field in ("body", "orelse"):
                collect(getattr(stmt, field, []) or [])

    collect(stmts)
    # A loop variable lives in its loop, unless it is read after the loop (Python keeps its last value).
    loop_only = {n for n in types if not read_outside_its_loops(stmts, n)}
    for name in fixed:
        loop_only.discard(name)
    pending = [(n, v) for n, v in assigns if n not in fixed and n not in known]
    for name in {n for n, _ in pending}:
        loop_only.discard(name)
    for _ in range(6):
        changed = False
        current = {**types, **fixed}
        for name, value in pending:
            try:
                t = type_of(value, current, lambdas)
            except Unknown:
                continue
            if t is None:
                raise fail.type_error(f"'{ast.unparse(value)}' has no value to assign to '{name}'", value)
            if not isinstance(t, (DType, StructType)):
                raise fail.unsupported(f"assigning a View or team handle to local '{name}'", value,
                                       "index the View directly where it is used")
            old = types.get(name, t)
            if old != t and (isinstance(t, StructType) or isinstance(old, StructType)):
                raise fail.type_error(f"local '{name}' is assigned a {type_name(old)} and a {type_name(t)}", value)
            new = t if name not in types or name in loop_only else join(types[name], t)
            if types.get(name) != new:
                types[name] = new
                changed = True
            loop_only.discard(name)
        if not changed:
            break
    unresolved = {n for n, _ in pending} - set(types) - set(fixed)
    if unresolved:
        name = sorted(unresolved)[0]
        node = next(v for n, v in pending if n == name)
        raise fail.type_error(f"cannot infer the type of local '{name}'", node, "annotate it, e.g. 'x: float = 0.0'")
    result = {n: t for n, t in types.items() if n not in loop_only}
    result.update(fixed)
    return result, loop_only
