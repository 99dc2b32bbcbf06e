"""NumPy-style array operations built from kfuse workunits, so they are traced and fused like user kernels.

``pk.add(a, b)``, ``pk.sqrt(x)``, ``pk.sum(x, axis=0)``, ``pk.zeros(shape)`` ...: operations on Views (or
NumPy arrays) return new Views or write ``out=``; whole-array reductions return numbers (Futures while
fusion is on). Array operands broadcast as in NumPy. PyKokkos's array-API
functions (``pk.unique``, ``pk.reshape``, ``pk.hstack`` ...) keep PyKokkos's names with NumPy's semantics:
shape functions in manipulation.py, those that need the values first in host.py.
"""
import math

from .creation import (empty, empty_like, full, full_like, linspace, logspace, ones, ones_like, zeros,
                       zeros_like)
from .elementwise import (abs, absolute, add, around, ceil, copy, copyto, cos, cosh, divide, equal, exp, exp2, expm1,
                          fill, floor, floor_divide, greater, greater_equal, isfinite, isinf, isnan, less, less_equal,
                          log, log1p, log2, log10, logaddexp, logical_and, logical_not, logical_or, logical_xor,
                          maximum, minimum, multiply, negative, not_equal, power, reciprocal, result_type, round,
                          sign, sin, sinh, sqrt, square, subtract, tan, tanh, true_divide, trunc, where)
from .host import all, any, average, find_max, in1d, index, searchsorted, unique
from .linalg import dot, matmul, outer
from .manipulation import atleast_2d, col, expand_dims, hstack, ravel, reshape, transpose
from .mathops import (acos, acosh, arccos, arccosh, arcsin, arcsinh, arctan, arctan2, arctanh, asin, asinh, atan,
                      atan2, atanh, cbrt, copysign, fmax, fmin, fmod, hypot, logaddexp2, mod, positive, remainder)
from .reductions import amax, amin, argmax, argmin, max, mean, min, prod, sum, var

inf, nan = math.inf, math.nan  # PyKokkos's pk.inf and pk.nan (pk.pi and pk.e are defined in kfuse/__init__.py)

__all__ = ["abs", "absolute", "acos", "acosh", "add", "all", "amax", "amin", "any", "arccos", "arccosh", "arcsin",
           "arcsinh", "arctan", "arctan2", "arctanh", "argmax", "argmin", "around", "asin", "asinh", "atan", "atan2",
           "atanh", "atleast_2d", "average", "cbrt", "ceil", "col", "copy", "copysign", "copyto", "cos", "cosh",
           "divide", "dot", "empty", "empty_like", "equal", "exp", "exp2", "expand_dims", "expm1", "fill",
           "find_max", "floor", "floor_divide", "fmax", "fmin", "fmod", "full", "full_like", "greater",
           "greater_equal", "hstack", "hypot", "in1d", "index", "inf", "isfinite", "isinf", "isnan", "less",
           "less_equal", "linspace", "log", "log10", "log1p", "log2", "logaddexp", "logaddexp2", "logical_and",
           "logical_not", "logical_or", "logical_xor", "logspace", "matmul", "max", "maximum", "mean", "min",
           "minimum", "mod", "multiply", "nan", "negative", "not_equal", "ones", "ones_like", "outer", "positive",
           "power", "prod", "ravel", "reciprocal", "remainder", "reshape", "result_type", "round", "searchsorted",
           "sign", "sin", "sinh", "sqrt", "square", "subtract", "sum", "tan", "tanh", "transpose", "true_divide",
           "trunc", "unique", "var", "where", "zeros", "zeros_like"]
