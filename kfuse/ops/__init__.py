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
from .elementwise import (abs, absolute, add, copy, cos, divide, exp, fill, log, logical_not, multiply, negative,
                          power, sin, sqrt, square, subtract, true_divide, where)
from .host import all, any, average, find_max, in1d, index, searchsorted, unique
from .linalg import dot, matmul, outer
from .manipulation import atleast_2d, col, expand_dims, hstack, ravel, reshape, transpose
from .reductions import amax, amin, argmax, argmin, max, mean, min, sum, var

inf, nan = math.inf, math.nan  # PyKokkos's pk.inf and pk.nan (pk.pi and pk.e are defined in kfuse/__init__.py)

__all__ = ["abs", "absolute", "add", "all", "amax", "amin", "any", "argmax", "argmin", "atleast_2d", "average", "col",
           "copy", "cos", "divide", "dot", "empty", "empty_like", "exp", "expand_dims", "fill", "find_max", "full",
           "full_like", "hstack", "in1d", "index", "inf", "linspace", "log", "logical_not", "logspace", "matmul", "max",
           "mean", "min", "multiply", "nan", "negative", "ones", "ones_like", "outer", "power", "ravel", "reshape",
           "searchsorted", "sin", "sqrt", "square", "subtract", "sum", "transpose", "true_divide", "unique", "var",
           "where", "zeros", "zeros_like"]
