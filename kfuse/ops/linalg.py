"""``matmul``, ``dot`` and ``outer`` for 1-D and 2-D arrays.

Float products on a host space (OpenMP, Serial, Debug) are NumPy's, so its BLAS: a kernel of one thread per
output element, each walking a row of ``a`` and a column of ``b``, is 3-9x slower than a blocked, vectorised
GEMM, and writing a competitive one is BLAS's job. BLAS needs the values, so such a product is a barrier:
the pending kernels that write its inputs run first (and those touching ``out=``), the product runs at once,
and nothing fuses across it; kernels after it read its result as any other View. Kernels stay for integer and
bool operands (BLAS has none; NumPy's own integer loops are serial) and for GPU spaces, where the operands'
memory lives on the device; there a product is traced and fused like any kernel (float64 accumulation).
"""
from __future__ import annotations

import numpy as np

from ..policies import MDRangePolicy
from ..dispatch import parallel_for, parallel_reduce
from ..views import View, host_barrier, overlaps
from . import kernels as k
from ._common import as_view, contiguous, flat, for_gpu, is_array, new_view, output, result_dtype, transposed
from .elementwise import _in_double, multiply


def _no_overlap(out, *inputs) -> None:
    """Each output element is a sum over many inputs, so writing into an input would corrupt later sums."""
    if out is None:
        return
    out = as_view(out)
    for v in inputs:
        if overlaps(out, v):
            raise ValueError("out= must not share memory with the inputs of matmul/dot/outer")


def _blas_applies(dtype: np.dtype) -> bool:
    """Whether a product of this result dtype is NumPy's: floats, when kernels run on the host."""
    return dtype.kind == "f" and not for_gpu()


def _host_array(v: View) -> np.ndarray:
    """v's memory once the kernels writing it have run, laid out so BLAS takes it without NumPy's slow
    fallback loop (one of the two strides must be the element size)."""
    host_barrier(v, False)
    arr = v._array
    if arr.ndim == 2 and arr.itemsize not in arr.strides:
        arr = np.ascontiguousarray(arr)
    return arr


def _blas(a: View, b: View, out, dtype: np.dtype):
    """``a @ b`` by NumPy: a number for two vectors, else a new View or ``out`` (converted to its dtype)."""
    x, y = _host_array(a), _host_array(b)
    if x.ndim == 1 and y.ndim == 1:
        return float(np.dot(x, y))
    if out is None:  # into a result from the pool (no page faults; a loop of products reuses its memory)
        target = new_view(x.shape[:-1] + y.shape[1:], dtype)
        np.matmul(x, y, out=target._array)
        return target
    result = np.matmul(x, y)
    target = output(out, result.shape, dtype)
    host_barrier(target, True, True)
    target._array[...] = result
    return target


def _shapes(a: View, b: View) -> None:
    if a.shape[-1] != b.shape[0]:
        raise ValueError(f"matmul: shapes {a.shape} and {b.shape} do not align")


def _inner(a: View, b: View):
    if not (a.dtype.is_float or b.dtype.is_float):  # integers (and bools) give an int, as NumPy's dot
        return parallel_reduce(a.shape[0], k.dot_int_k, a=a, b=b)
    return parallel_reduce(a.shape[0], k.dot_k, a=a, b=b)


def matmul(a, b, out=None):
    """NumPy ``a @ b`` for 1-D/2-D operands (1-D @ 1-D is the inner product, a number, or a Future from a
    kernel)."""
    a, b = as_view(a), as_view(b)
    if a.ndim not in (1, 2) or b.ndim not in (1, 2):
        raise ValueError("matmul takes 1-D and 2-D arrays")
    if a.dtype is b.dtype:
        dtype = a.dtype.np
    else:
        a, b = _in_double(a, b), _in_double(b, a)  # float32 with integers: NumPy computes in double
        dtype = result_dtype(a, b)
    if a.ndim == 1 and b.ndim == 1:
        if a.shape[0] != b.shape[0]:
            raise ValueError(f"dot: lengths {a.shape[0]} and {b.shape[0]} differ")
        return _blas(a, b, None, dtype) if _blas_applies(dtype) else _inner(a, b)
    _no_overlap(out, a, b)
    _shapes(a, b)
    if _blas_applies(dtype):
        return _blas(a, b, out, dtype)
    if a.ndim == 1:  # x @ B == B^T x
        a, b = transposed(b), a
    if b.ndim == 1:
        target = output(out, (a.shape[0],), dtype)
        if a.shape[0]:
            parallel_for(a.shape[0], k.matvec_k, out=target, a=a, x=b)
        return target
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
    """``out[i][j] = a[i] * b[j]`` over the flattened inputs (one elementwise kernel: it fuses, BLAS gains
    nothing here)."""
    a, b = flat(contiguous(as_view(a))), flat(contiguous(as_view(b)))
    _no_overlap(out, a, b)
    target = output(out, (a.size, b.size), result_dtype(a, b))
    if target.size:
        parallel_for(MDRangePolicy([0, 0], list(target.shape)), k.outer_k, out=target, a=a, b=b)
    return target
