"""NumPy-style array operations built from kfuse workunits, so they are traced and fused like user kernels.

``pk.add(a, b)``, ``pk.sqrt(x)``, ``pk.sum(x, axis=0)``, ``pk.zeros(shape)`` ...: operations on Views (or
NumPy arrays) return new Views or write ``out=``; whole-array reductions return numbers (Futures while
fusion is on). Operands must have equal shapes or be scalars (no broadcasting).
"""
from .creation import empty, empty_like, full, full_like, ones, ones_like, zeros, zeros_like
from .elementwise import (abs, absolute, add, copy, cos, divide, exp, fill, log, multiply, negative, power, sin,
                          sqrt, square, subtract, true_divide, where)
from .linalg import dot, matmul, outer
from .reductions import amax, amin, argmax, argmin, max, mean, min, sum, var

__all__ = ["abs", "absolute", "add", "amax", "amin", "argmax", "argmin", "copy", "cos", "divide", "dot", "empty",
           "empty_like", "exp", "fill", "full", "full_like", "log", "matmul", "max", "mean", "min", "multiply",
           "negative", "ones", "ones_like", "outer", "power", "sin", "sqrt", "square", "subtract", "sum",
           "true_divide", "var", "where", "zeros", "zeros_like"]
