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

from ..views import View
from . import kernels as k
from ._common import (as_view, broadcast, copy2d, elementwise, is_array, kernel_scalar, operand, output,
                      result_dtype)


def _binary(name, vv, vs, sv, pyop, a, b, out, floating=False):
    """``sv`` is None for commutative operations: scalar op View runs as View op scalar."""
    a, b = operand(a), operand(b)
    a_view, b_view = isinstance(a, View), isinstance(b, View)
    if not (a_view or b_view):
        if out is not None:
            return fill(out, pyop(a, b))
        return pyop(a, b)
    if a_view and b_view:
        shape, (a, b) = broadcast(name, a, b)
        target = output(out, shape, result_dtype(a, b, floating=floating))
        return elementwise(vv, target, a=a, b=b)
    target = output(out, (a if a_view else b).shape, result_dtype(a, b, floating=floating))
    if a_view:
        return elementwise(vs, target, a=a, s=kernel_scalar(b, a))
    if sv is None:
        return elementwise(vs, target, a=b, s=kernel_scalar(a, b))
    return elementwise(sv, target, s=kernel_scalar(a, b), b=b)


def _unary(wu, scalar_fn, x, out, floating, dtype=None):
    """``dtype`` fixes the result type (else NumPy's rule for ``x``, float64 for integers when ``floating``)."""
    if not is_array(x):
        if out is not None:
            raise TypeError("out= needs an array operand")
        return scalar_fn(x)
    v = as_view(x)
    dtype = result_dtype(v, floating=floating) if dtype is None else dtype
    return elementwise(wu, output(out, v.shape, dtype), a=v)


def add(a, b, out=None):
    return _binary("add", k.add_vv, k.add_vs, None, operator.add, a, b, out)


def subtract(a, b, out=None):
    return _binary("subtract", k.subtract_vv, k.subtract_vs, k.subtract_sv, operator.sub, a, b, out)


def multiply(a, b, out=None):
    return _binary("multiply", k.multiply_vv, k.multiply_vs, None, operator.mul, a, b, out)


def divide(a, b, out=None):
    """True division (integer operands give float64, as in NumPy)."""
    return _binary("divide", k.divide_vv, k.divide_vs, k.divide_sv, operator.truediv, a, b, out, floating=True)


true_divide = divide


def power(a, b, out=None):
    return _binary("power", k.power_vv, k.power_vs, k.power_sv, operator.pow, a, b, out)


def negative(x, out=None):
    return _unary(k.negative_k, operator.neg, x, out, False)


def absolute(x, out=None):
    return _unary(k.absolute_k, builtins.abs, x, out, False)


abs = absolute  # noqa: A001 - NumPy spelling


def square(x, out=None):
    return _unary(k.square_k, lambda v: v * v, x, out, False)


def sqrt(x, out=None):
    return _unary(k.sqrt_k, math.sqrt, x, out, True)


def exp(x, out=None):
    return _unary(k.exp_k, math.exp, x, out, True)


def log(x, out=None):
    return _unary(k.log_k, math.log, x, out, True)


def sin(x, out=None):
    return _unary(k.sin_k, math.sin, x, out, True)


def cos(x, out=None):
    return _unary(k.cos_k, math.cos, x, out, True)


def logical_not(x, out=None):
    """Elementwise ``not x`` as a bool View (NumPy's dtype; PyKokkos's uint8 would index as integers, not as a
    mask). On a number, Python's ``not``."""
    return _unary(k.logical_not_k, operator.not_, x, out, False, dtype=np.bool_)


def where(cond, a, b, out=None):
    """``a`` where ``cond`` is true (non-zero), else ``b``; ``a``/``b`` may be scalars."""
    cond = as_view(cond)
    a, b = operand(a), operand(b)
    shape, (cond, a, b) = broadcast("where", cond, a, b)
    target = output(out, shape, result_dtype(a, b))
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
    target = output(out, v.shape, v.dtype.np)
    if v.ndim == 2 and "stride" in (v.layout, target.layout):
        return copy2d(target, v)
    return elementwise(k.copy_k, target, a=v)


def fill(view, value):
    """Set every element of ``view`` to ``value`` (a number or a Future) by a kernel; returns ``view``."""
    target = as_view(view)
    return elementwise(k.fill_k, target, value=kernel_scalar(operand(value), target))
