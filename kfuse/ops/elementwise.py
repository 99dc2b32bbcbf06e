"""Elementwise array operations (NumPy / PyKokkos spellings), each one kernel launch.

``pk.add(a, b)`` returns a new View (or writes ``out=``); either operand may be a scalar, including
a Future from an earlier reduction, which the kernel takes as an argument so nothing waits for it.
Array operands broadcast as in NumPy (a repeated operand is first copied out by one more kernel).
Applied to plain numbers the math functions behave like their ``math`` counterparts, which keeps
``pk.sqrt(x)`` meaning the same inside a workunit run by the Debug space.
"""
from __future__ import annotations

import builtins
import math
import operator

import numpy as np

from ..future import Future
from ..types import DType, dtype_of
from ..views import View
from . import kernels as k, lazy, on_host
from .. import kernel_api
from . import _common as _ufunc_common
from ._common import (as_view, broadcast, elementwise, is_array, kernel_scalar, operand, output,
                      named_operand, new_view, result_dtype, ufunc_dtype, view_of)


# --- the common case, planned once per operand signature ----------------------------------------------
# An operation on plain contiguous Views of one shape and dtype, or on such a View and a Python float, with
# no out= or an out= of the result's shape and dtype: every decision the general path takes (NumPy's result
# dtype, broadcasting, conversions, the kernel) depends on the operands' signatures alone, so it is made once
# and the operation costs a new View and a traced call (array programs issue one per NumPy statement).
_PLANS: dict = {}


def _signature(x):
    if type(x) is View:
        return (x.dtype, x.shape, x.storage) if x.storage == "right" and x.size else False
    return float if type(x) is float else False


def _binary_plan(name, ufunc, vv, vs, sv, swap, dtype, a, b, out):
    """(kernel, operand order, result dtype, shape) for the common case, or None."""
    sa, sb, so = _signature(a), _signature(b), None if out is None else _signature(out)
    if not (sa and sb) or so is False or (sa is float and sb is float):
        return None
    if sa is not float and sb is not float and sa != sb:
        return None  # another dtype or shape: conversions or broadcasting (the general path)
    view = a if sa is not float else b
    result = ufunc_dtype(name, ufunc, a, b) if dtype is None else dtype
    if so is not None and so != (dtype_of(result), view.shape, "right"):
        return None
    if sa is not float and sb is not float:
        return vv, "vv", result, view.shape
    if sb is float:
        return vs, "vs", result, view.shape
    return (sv, "sv", result, view.shape) if sv is not None else (swap or vs, "swapped", result, view.shape)


def _run_plan(plan, a, b, out) -> View:
    wu, order, dtype, shape = plan
    target = new_view(shape, dtype) if out is None else out
    if order == "vv":
        operands = (a, b)
    elif order == "vs":
        operands = (a, kernel_scalar(b, a))
    elif order == "sv":
        operands = (kernel_scalar(a, b), b)
    else:
        operands = (b, kernel_scalar(a, b))
    return lazy.run(wu, target, operands, out is None)


def _binary(name, ufunc, vv, vs, sv, pyop, a, b, out, dtype=None, swap=None):
    """One element-wise binary operation. ``ufunc`` is NumPy's, whose result dtype (NumPy's promotion) is used
    unless ``dtype`` fixes it. ``sv`` runs scalar op View; None with ``swap`` None means commutative (run as View
    op scalar); ``swap`` is the mirrored View-op-scalar kernel (``s < b`` as ``b > s``)."""
    if dtype is None:
        small = on_host.binary(vv, a, b, out)
        if small is not None:
            return small
    key = (vv, dtype, _signature(a), _signature(b), None if out is None else _signature(out))
    plan = _PLANS.get(key)
    if plan is None and key not in _PLANS:
        plan = _PLANS[key] = _binary_plan(name, ufunc, vv, vs, sv, swap, dtype, a, b, out)
    if plan is not None:
        return _run_plan(plan, a, b, out)
    a, b = named_operand(name, "viewA", a), named_operand(name, "viewB", b)
    a_view, b_view = isinstance(a, View), isinstance(b, View)
    if not (a_view or b_view):
        if out is not None:
            return fill(out, pyop(a, b))
        return pyop(a, b)
    if dtype is None:
        dtype = ufunc_dtype(name, ufunc, a, b)
    if a_view and b_view:  # float32 against an integer View: NumPy computes (and compares) in double
        a, b = _in_double(a, b), _in_double(b, a)
    if a_view and b_view:
        shape, (a, b) = broadcast(name, a, b, out=out)
        return _into(vv, out, shape, dtype, a=a, b=b)
    if a_view:
        b = _weak_int(name, b, a, dtype)
    else:
        a = _weak_int(name, a, b, dtype)
    shape = (a if a_view else b).shape
    if a_view:
        return _into(vs, out, shape, dtype, a=a, s=kernel_scalar(b, a))
    if sv is not None:
        return _into(sv, out, shape, dtype, s=kernel_scalar(a, b), b=b)
    return _into(swap or vs, out, shape, dtype, a=b, s=kernel_scalar(a, b))


def _into(wu, out, shape, dtype, **operands) -> View:
    """Run element-wise ``wu`` for a result of ``dtype`` into ``out`` (or a new View). An ``out=`` of another
    dtype receives the result converted, as in NumPy, which computes in ``dtype`` first (float32 values added
    into a float64 ``out`` are float32 sums): through a temporary, by a copy kernel that fuses."""
    target = output(out, shape, dtype)
    if target.dtype.np == dtype:
        return elementwise(wu, target, out is None, **operands)
    return copy(elementwise(wu, new_view(shape, dtype), True, **operands), out=target)


def _in_double(x: View, other: View) -> View:
    """x as float64 where NumPy computes ``x op other`` in double but C++ would not: float32 with an integer View
    (C++: float), uint64 with a signed integer View (C++: the signed one converted to unsigned, so -1 > 5). A
    copy kernel into a float64 View, which fuses with the operation."""
    kinds = {x.dtype.np.kind, other.dtype.np.kind}
    if x.dtype.np == np.float32 and not other.dtype.is_float or \
            kinds == {"u", "i"} and np.dtype(np.uint64) in (x.dtype.np, other.dtype.np):
        return copy(x, out=new_view(x.shape, np.float64))
    return x


def _weak_int(name: str, s, view: View, dtype: np.dtype):
    """A Python int next to an integer View, by NumPy 2's rules: it must fit an integer result dtype
    (OverflowError, as NumPy raises); with another result (a comparison) it is compared exactly, so one outside
    the View's range goes to the kernel as a float (uint64 against -3 would wrap as an integer)."""
    if type(s) is not int or view.dtype.np.kind not in "iu":
        return s
    info = np.iinfo(dtype if dtype.kind in "iu" else view.dtype.np)
    if info.min <= s <= info.max:
        return s
    if dtype.kind in "iu":
        raise OverflowError(f"{name}: Python integer {s} out of bounds for {dtype} (as in NumPy)")
    return float(s)


def _unary(name, ufunc, wu, scalar_fn, x, out, dtype=None):
    """``dtype`` fixes the result type, else NumPy's for ``ufunc`` (float16 as float32)."""
    if x is None:
        raise TypeError(f"{name}: view is required")
    if not is_array(x):
        if out is not None:
            raise TypeError(f"{name}: out= needs an array operand")
        return scalar_fn(named_operand(name, "view", x))
    key = (wu, dtype, _signature(x), None if out is None else _signature(out))
    plan = _PLANS.get(key)
    if plan is None and key not in _PLANS:
        plan = _PLANS[key] = _unary_plan(name, ufunc, wu, dtype, x, out)
    if plan is not None:
        return lazy.run(wu, new_view(x.shape, plan) if out is None else out, (x,), out is None)
    v = view_of(name, "view", x)
    dtype = ufunc_dtype(name, ufunc, v) if dtype is None else dtype
    return _into(wu, out, v.shape, dtype, a=v)


def _unary_plan(name, ufunc, wu, dtype, x, out):
    """The result dtype for a plain contiguous View (and an out= of its shape and that dtype), or None."""
    sx, so = _signature(x), None if out is None else _signature(out)
    if not sx or sx is float or so is False:
        return None
    result = ufunc_dtype(name, ufunc, x) if dtype is None else dtype
    if so is not None and so != (dtype_of(result), x.shape, "right"):
        return None
    return result


def _not_bool(x) -> bool:
    """A number or View that is certainly not boolean (so a sum with it is no bool either)."""
    return type(x) in (int, float) or type(x) is View and x.dtype is not DType.bool


def add(viewA, viewB, out=None):
    """``viewA + viewB``; for two bool operands NumPy's bool sum, which is ``logical_or``."""
    if not (_not_bool(viewA) or _not_bool(viewB)):
        a, b = named_operand("add", "viewA", viewA), named_operand("add", "viewB", viewB)
        if (isinstance(a, View) or isinstance(b, View)) and ufunc_dtype("add", np.add, a, b) == np.bool_:
            return logical_or(a, b, out=out)
    return _binary("add", np.add, k.add_vv, k.add_vs, None, operator.add, viewA, viewB, out)


def subtract(viewA, viewB, out=None):
    return _binary("subtract", np.subtract, k.subtract_vv, k.subtract_vs, k.subtract_sv, operator.sub, viewA, viewB,
                   out)


def multiply(viewA, viewB, out=None):
    return _binary("multiply", np.multiply, k.multiply_vv, k.multiply_vs, None, operator.mul, viewA, viewB, out)


def divide(viewA, viewB, out=None):
    """True division (integer operands give float64, as in NumPy)."""
    return _binary("divide", np.divide, k.divide_vv, k.divide_vs, k.divide_sv, operator.truediv, viewA, viewB, out)


true_divide = divide


def power(viewA, viewB, out=None):
    """``viewA ** viewB``. An integer result with a negative exponent raises ValueError, as in NumPy. NumPy
    raises on seeing a negative value; so does kfuse, which for an integer array (or Future) exponent reads its
    values first, waiting for the kernels that write it: the price of never answering with a made-up value,
    paid only when base and exponent are both integers (a float exponent never raises)."""
    a, b = named_operand("power", "viewA", viewA), named_operand("power", "viewB", viewB)
    if _integer_power(a, b) and _has_negative(b):
        raise ValueError("power: integers to negative integer powers are not allowed (as in NumPy)")
    return _binary("power", np.power, k.power_vv, k.power_vs, k.power_sv, operator.pow, a, b, out)


def _integral(x) -> bool:
    return x.dtype.np.kind in "biu" if isinstance(x, (View, Future)) else isinstance(x, (bool, int))


def _integer_power(a, b) -> bool:
    """Whether ``a ** b`` has an integer result under NumPy's rules."""
    if isinstance(a, View) or isinstance(b, View):
        return ufunc_dtype("power", np.power, a, b).kind in "iu"
    return _integral(a) and _integral(b)


def _has_negative(b) -> bool:
    """Whether exponent ``b`` holds a negative value (a View's and a Future's values are waited for)."""
    if isinstance(b, View):
        return b.dtype.is_signed and b.size > 0 and bool((b.copy() < 0).any())
    return b.value() < 0 if isinstance(b, Future) else b < 0


def _py_floor_divide(a, b):
    if b == 0:
        return 0 if isinstance(a, int) and isinstance(b, int) else float(np.floor_divide(float(a), float(b)))
    return a // b


def floor_divide(viewA, viewB, out=None):
    """NumPy's ``//``: rounds towards minus infinity; an integer zero divisor gives 0, a float one inf/NaN."""
    a, b = named_operand("floor_divide", "viewA", viewA), named_operand("floor_divide", "viewB", viewB)
    if isinstance(a, View) or isinstance(b, View):
        kind = ufunc_dtype("floor_divide", np.floor_divide, a, b).kind
        if kind == "f":
            return _binary("floor_divide", np.floor_divide, k.floordiv_f_vv, k.floordiv_f_vs, k.floordiv_f_sv,
                           _py_floor_divide, a, b, out)
        if kind == "u":  # the signed kernels compute through int64, which wraps from 2**63
            return _binary("floor_divide", np.floor_divide, k.floordiv_u_vv, k.floordiv_u_vs, k.floordiv_u_sv,
                           _py_floor_divide, a, b, out)
    return _binary("floor_divide", np.floor_divide, k.floordiv_i_vv, k.floordiv_i_vs, k.floordiv_i_sv,
                   _py_floor_divide, a, b, out)


def _py_logaddexp(x, y):
    return float(np.logaddexp(float(x), float(y)))


def logaddexp(viewA, viewB, out=None):
    """log(exp(a) + exp(b)) computed without overflow (float results, as NumPy)."""
    return _binary("logaddexp", np.logaddexp, k.logaddexp_vv, k.logaddexp_vs, None, _py_logaddexp, viewA, viewB,
                   out)


def _extreme(name, ufunc, fkernels, ikernels, viewA, viewB, out):
    a, b = named_operand(name, "viewA", viewA), named_operand(name, "viewB", viewB)
    wus = ikernels
    if isinstance(a, View) or isinstance(b, View):
        if ufunc_dtype(name, ufunc, a, b).kind == "f":
            wus = fkernels
    return _binary(name, ufunc, wus[0], wus[1], None, lambda x, y: ufunc(x, y).item(), a, b, out)


def maximum(viewA, viewB, out=None):
    """Element-wise larger value; NaN if either is NaN (NumPy's ``maximum``)."""
    return _extreme("maximum", np.maximum, (k.maximum_vv, k.maximum_vs), (k.maximum_i_vv, k.maximum_i_vs),
                    viewA, viewB, out)


def minimum(viewA, viewB, out=None):
    return _extreme("minimum", np.minimum, (k.minimum_vv, k.minimum_vs), (k.minimum_i_vv, k.minimum_i_vs),
                    viewA, viewB, out)


# --- comparisons and logical operations: bool Views ------------------------------------------------------
_BOOL = np.dtype(np.bool_)


def greater(viewA, viewB, out=None):
    return _binary("greater", np.greater, k.greater_vv, k.greater_vs, None, operator.gt, viewA, viewB, out, _BOOL,
                   swap=k.less_vs)


def greater_equal(viewA, viewB, out=None):
    return _binary("greater_equal", np.greater_equal, k.greater_equal_vv, k.greater_equal_vs, None, operator.ge,
                   viewA, viewB, out, _BOOL, swap=k.less_equal_vs)


def less(viewA, viewB, out=None):
    return _binary("less", np.less, k.less_vv, k.less_vs, None, operator.lt, viewA, viewB, out, _BOOL,
                   swap=k.greater_vs)


def less_equal(viewA, viewB, out=None):
    return _binary("less_equal", np.less_equal, k.less_equal_vv, k.less_equal_vs, None, operator.le, viewA, viewB,
                   out, _BOOL, swap=k.greater_equal_vs)


def equal(viewA, viewB, out=None):
    return _binary("equal", np.equal, k.equal_vv, k.equal_vs, None, operator.eq, viewA, viewB, out, _BOOL)


def not_equal(viewA, viewB, out=None):
    return _binary("not_equal", np.not_equal, k.not_equal_vv, k.not_equal_vs, None, operator.ne, viewA, viewB, out,
                   _BOOL)


def logical_and(viewA, viewB, out=None):
    """Element-wise "both non-zero" (NaN counts as true, as in NumPy), a bool View."""
    return _binary("logical_and", np.logical_and, k.logical_and_vv, k.logical_and_vs, None,
                   lambda x, y: bool(x) and bool(y), viewA, viewB, out, _BOOL)


def logical_or(viewA, viewB, out=None):
    return _binary("logical_or", np.logical_or, k.logical_or_vv, k.logical_or_vs, None,
                   lambda x, y: bool(x) or bool(y), viewA, viewB, out, _BOOL)


def logical_xor(viewA, viewB, out=None):
    return _binary("logical_xor", np.logical_xor, k.logical_xor_vv, k.logical_xor_vs, None,
                   lambda x, y: bool(x) != bool(y), viewA, viewB, out, _BOOL)


def logical_not(view=None, out=None):
    """Elementwise ``not x`` as a bool View (NumPy's dtype; PyKokkos's uint8 would index as integers, not as a
    mask). On a number, Python's ``not``."""
    return _unary("logical_not", np.logical_not, k.logical_not_k, operator.not_, view, out, dtype=_BOOL)


# --- unary math: on a View, a kernel; on a number (also inside a kernel run by the Debug space), the scalar
# function kernels call by the same name ------------------------------------------------------------------
def negative(view=None, out=None):
    return _unary("negative", np.negative, k.negative_k, operator.neg, view, out)


def absolute(view=None, out=None):
    return _unary("absolute", np.absolute, k.absolute_k, builtins.abs, view, out)


abs = absolute  # noqa: A001 - NumPy spelling


def square(view=None, out=None):
    return _unary("square", np.square, k.square_k, lambda v: v * v, view, out)


def _math(name, ufunc, wu, scalar_fn, integral_identity=False):
    """``integral_identity``: integers (and bools) are their own value, in their dtype (floor/ceil/trunc)."""
    def fn(view=None, out=None):
        if integral_identity and is_array(view):
            v = view_of(name, "view", view)
            if not v.dtype.is_float:
                return copy(v, out=out)
        return _unary(name, ufunc, wu, scalar_fn, view, out)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"NumPy's ``{ufunc.__name__}`` on a View or array (a new View, or ``out=``, of NumPy's dtype"
                  f"); on a number, ``math.{scalar_fn.__name__}``, as inside kernels.")
    return fn


sqrt = _math("sqrt", np.sqrt, k.sqrt_k, math.sqrt)
exp = _math("exp", np.exp, k.exp_k, math.exp)
exp2 = _math("exp2", np.exp2, k.exp2_k, kernel_api.exp2)
expm1 = _math("expm1", np.expm1, k.expm1_k, math.expm1)
log = _math("log", np.log, k.log_k, math.log)
log2 = _math("log2", np.log2, k.log2_k, math.log2)
log10 = _math("log10", np.log10, k.log10_k, math.log10)
log1p = _math("log1p", np.log1p, k.log1p_k, math.log1p)
sin = _math("sin", np.sin, k.sin_k, math.sin)
cos = _math("cos", np.cos, k.cos_k, math.cos)
tan = _math("tan", np.tan, k.tan_k, math.tan)
sinh = _math("sinh", np.sinh, k.sinh_k, math.sinh)
cosh = _math("cosh", np.cosh, k.cosh_k, math.cosh)
tanh = _math("tanh", np.tanh, k.tanh_k, math.tanh)


floor = _math("floor", np.floor, k.floor_k, math.floor, integral_identity=True)
ceil = _math("ceil", np.ceil, k.ceil_k, math.ceil, integral_identity=True)
trunc = _math("trunc", np.trunc, k.trunc_k, math.trunc, integral_identity=True)

isnan = _math("isnan", np.isnan, k.isnan_k, math.isnan)
isinf = _math("isinf", np.isinf, k.isinf_k, math.isinf)
isfinite = _math("isfinite", np.isfinite, k.isfinite_k, math.isfinite)
for _f in (isnan, isinf, isfinite):
    _f.__doc__ = f"NumPy's ``{_f.__name__}`` as a bool View; on a number, ``math.{_f.__name__}``."


def reciprocal(view=None, out=None):
    """``1 / x`` in x's dtype (NumPy's: integers give C's integer quotient, so 0 except for 1 and -1)."""
    if is_array(view):
        v = view_of("reciprocal", "view", view)
        dtype = ufunc_dtype("reciprocal", np.reciprocal, v)
        wu = k.reciprocal_f_k if dtype.kind == "f" else k.reciprocal_i_k
        return _unary("reciprocal", np.reciprocal, wu, None, v, out, dtype)
    return _unary("reciprocal", np.reciprocal, None, lambda x: np.reciprocal(x).item(), view, out)


def sign(view=None, out=None):
    """-1, 0 or 1 by the sign of each element (NaN stays NaN), in its dtype; bools are refused, as in NumPy."""
    return _unary("sign", np.sign, k.sign_k, lambda x: np.sign(x).item(), view, out)


def round(view=None, decimals=0, out=None):  # noqa: A001 - NumPy/PyKokkos spelling
    """NumPy's ``round``: to ``decimals`` places, halves to even (2.5 -> 2.0, -0.5 -> -0.0); integers unchanged
    for ``decimals >= 0``. On a number, Python's ``round`` (also halves to even)."""
    try:
        decimals = operator.index(decimals)
    except TypeError:
        raise TypeError(f"round: decimals must be an int, got {type(decimals).__name__}") from None
    if not is_array(view):
        if view is None:
            raise TypeError("round: view is required")
        if out is not None:
            raise TypeError("round: out= needs an array operand")
        return builtins.round(view, decimals) if decimals else builtins.round(view)
    v = view_of("round", "view", view)
    dtype = ufunc_dtype("round", np.rint, v) if v.dtype.np == np.bool_ else v.dtype.np
    if np.dtype(dtype).kind != "f":
        if decimals < 0:
            raise ValueError("round: decimals < 0 for an integer view is not supported")
        return copy(v, out=out)
    if decimals >= 0:
        return _into(k.round_k, out, v.shape, dtype, a=v, scale=10.0 ** decimals)
    return _into(k.round_neg_k, out, v.shape, dtype, a=v, scale=10.0 ** -decimals)


around = round


def where(cond, a, b, out=None):
    """``a`` where ``cond`` is true (non-zero, NaN included), else ``b``, all three broadcast together; ``a``/``b``
    may be scalars. The dtype is NumPy's promotion of ``a`` and ``b``."""
    cond = view_of("where", "cond", cond)
    a, b = named_operand("where", "a", a), named_operand("where", "b", b)
    dtype = result_dtype(a, b)
    if isinstance(a, View) and isinstance(b, View) and dtype == np.float64:  # C++'s ?: may pick another type
        a, b = _in_double(a, b), _in_double(b, a)
    shape, (cond, a, b) = broadcast("where", cond, a, b, out=out)
    target = output(out, shape, dtype)
    a_view, b_view = isinstance(a, View), isinstance(b, View)
    if a_view and b_view:
        return elementwise(k.where_vv, target, cond=cond, a=a, b=b)
    if a_view:
        return elementwise(k.where_vs, target, cond=cond, a=a, s=kernel_scalar(b, target))
    if b_view:
        return elementwise(k.where_sv, target, cond=cond, s=kernel_scalar(a, target), b=b)
    return elementwise(k.where_ss, target, cond=cond, s=kernel_scalar(a, target), t=kernel_scalar(b, target))


def copy(x, out=None):
    """A new contiguous View with the elements of ``x`` (or ``x`` copied into ``out``).

    ``pk.copy(a.T)`` is a transpose into new memory: a strided 2-D source or target is copied by one
    2-D kernel.
    """
    v = as_view(x)
    return elementwise(k.copy_k, output(out, v.shape, v.dtype.np), a=v)


def fill(view, value):
    """Set every element of ``view`` to ``value`` (a number or a Future) by a kernel; returns ``view``."""
    target = as_view(view)
    return elementwise(k.fill_k, target, value=kernel_scalar(operand(value), target))


def copyto(viewA, viewB, casting="same_kind"):
    """Copy ``viewB`` (a View, an array or a number) into ``viewA``, broadcasting it to ``viewA``'s shape and
    converting to its dtype under NumPy's ``casting`` rule (PyKokkos's argument names; NumPy's dst, src)."""
    if not isinstance(viewA, View):
        raise TypeError(f"copyto: viewA must be a View, got {type(viewA).__name__}")
    if casting not in ("no", "equiv", "safe", "same_kind", "unsafe"):
        raise ValueError(f"copyto: casting must be 'no', 'equiv', 'safe', 'same_kind' or 'unsafe', got {casting!r}")
    src = named_operand("copyto", "viewB", viewB)
    from_type = src.dtype.np if isinstance(src, View) else _ufunc_common._dtype_key(src)
    if isinstance(from_type, type):  # a Python number: NumPy checks its value's kind only
        from_type = np.result_type(_ufunc_common._WEAK.get(from_type, from_type), viewA.dtype.np) \
            if casting != "unsafe" else viewA.dtype.np
    if not np.can_cast(from_type, viewA.dtype.np, casting):
        raise TypeError(f"copyto: cannot cast viewB from {from_type} to viewA's {viewA.dtype.np} under casting="
                        f"{casting!r}")
    if not isinstance(src, View):
        return fill(viewA, src) and None
    try:
        shape = src.shape if src.shape == viewA.shape else np.broadcast_shapes(viewA.shape, src.shape)
    except ValueError:
        shape = None
    if shape != viewA.shape:
        raise ValueError(f"copyto: viewB of shape {src.shape} cannot be broadcast to viewA's shape {viewA.shape}")
    if src.shape != viewA.shape:
        src = _ufunc_common._repeated(src, viewA.shape)
    elif on_host.ran(k.copy_k, viewA, (src,)):
        return None
    copy(src, out=viewA)
    return None


def result_type(*arrays_and_dtypes) -> np.dtype:
    """NumPy's ``result_type`` over Views, arrays, dtypes (``pk.float32``, ``np.int64``, ...) and numbers, which
    count as NumPy 2's "weak" Python scalars: the dtype binary operations here give their operands."""
    if not arrays_and_dtypes:
        raise TypeError("result_type: needs at least one array or dtype")
    items = []
    for x in arrays_and_dtypes:
        if isinstance(x, View):
            items.append(x.dtype.np)
        elif isinstance(x, DType):
            items.append(x.np)
        elif isinstance(x, Future):
            items.append(_ufunc_common._WEAK[_ufunc_common._dtype_key(x)])
        else:
            items.append(x)
    try:
        dtype = np.result_type(*items)
    except TypeError as e:
        raise TypeError(f"result_type: {e}") from None
    return np.dtype(np.float32) if dtype == np.float16 else dtype
