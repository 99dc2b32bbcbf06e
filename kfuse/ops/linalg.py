"""``matmul``, ``dot`` and ``outer`` for 1-D and 2-D arrays (float64 accumulation, one kernel each)."""
from __future__ import annotations

from ..policies import MDRangePolicy
from ..dispatch import parallel_for, parallel_reduce
from ..views import View, overlaps
from . import kernels as k
from ._common import as_view, contiguous, flat, is_array, output, result_dtype, transposed
from .elementwise import _in_double, multiply


def _no_overlap(out, *inputs) -> None:
    """Each output element is a sum over many inputs, so writing into an input would corrupt later sums."""
    if out is None:
        return
    out = as_view(out)
    for v in inputs:
        if overlaps(out, v):
            raise ValueError("out= must not share memory with the inputs of matmul/dot/outer")


def _inner(a: View, b: View):
    if a.shape[0] != b.shape[0]:
        raise ValueError(f"dot: lengths {a.shape[0]} and {b.shape[0]} differ")
    if not (a.dtype.is_float or b.dtype.is_float):  # integers (and bools) give an int, as NumPy's dot
        return parallel_reduce(a.shape[0], k.dot_int_k, a=a, b=b)
    return parallel_reduce(a.shape[0], k.dot_k, a=a, b=b)


def matmul(a, b, out=None):
    """NumPy ``a @ b`` for 1-D/2-D operands (1-D @ 1-D is the inner product, a number or Future)."""
    a, b = as_view(a), as_view(b)
    if a.ndim not in (1, 2) or b.ndim not in (1, 2):
        raise ValueError("matmul takes 1-D and 2-D arrays")
    a, b = _in_double(a, b), _in_double(b, a)  # float32 with integers: NumPy computes in double
    if a.ndim == 1 and b.ndim == 1:
        return _inner(a, b)
    _no_overlap(out, a, b)
    dtype = result_dtype(a, b)
    if a.ndim == 1:  # x @ B == B^T x
        a, b = transposed(b), a
    if b.ndim == 1:
        if a.shape[1] != b.shape[0]:
            raise ValueError(f"matmul: shapes {a.shape} and {b.shape} do not align")
        target = output(out, (a.shape[0],), dtype)
        if a.shape[0]:
            parallel_for(a.shape[0], k.matvec_k, out=target, a=a, x=b)
        return target
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"matmul: shapes {a.shape} and {b.shape} do not align")
    target = output(out, (a.shape[0], b.shape[1]), dtype)
    if target.size:
        parallel_for(MDRangePolicy([0, 0], list(target.shape)), k.matmul_k, out=target, a=a, b=b)
    return target


def dot(a, b, out=None):
    """NumPy ``dot`` for scalars, 1-D and 2-D operands."""
    if not is_array(a) or not is_array(b):
        return multiply(a, b, out=out)
    return matmul(a, b, out=out)


def outer(a, b, out=None):
    """``out[i][j] = a[i] * b[j]`` over the flattened inputs."""
    a, b = flat(contiguous(as_view(a))), flat(contiguous(as_view(b)))
    _no_overlap(out, a, b)
    target = output(out, (a.size, b.size), result_dtype(a, b))
    if target.size:
        parallel_for(MDRangePolicy([0, 0], list(target.shape)), k.outer_k, out=target, a=a, b=b)
    return target
