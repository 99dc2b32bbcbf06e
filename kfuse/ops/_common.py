"""Operand handling shared by the array operations: Views vs scalars, result types, output Views, layouts.

Elementwise kernels run over Views of operands broadcast to one shape (NumPy's rules). A C-contiguous View of
any rank is handed to them as a flat 1-D View over the same memory (the tracer follows byte ranges, so
dependencies stay exact); the flat View is cached per View so repeated operations on one array see one flat
View. Strided Views of rank 1 and 2 are read and written in place (kfuse/ops/lazy.py); strided ones of higher
rank, which the kernels do not take, are refused.
None of this touches the data on the host, so nothing here forces pending kernels to run.
"""
from __future__ import annotations

import operator
import weakref

import numpy as np

from .. import buffers, context, views
from ..policies import MDRangePolicy
from ..runtime import device
from ..spaces import on_device
from ..dispatch import parallel_for
from ..future import Future
from ..types import DType, dtype_of
from ..views import View
from . import expressions, kernels, lazy

_flat_views: "weakref.WeakKeyDictionary[View, View]" = weakref.WeakKeyDictionary()
_ON_DEVICE: dict = {}  # ExecutionSpace -> whether its kernels run on a GPU


def is_array(x) -> bool:
    """Views, NumPy arrays (not 0-d) and lists are arrays; numbers and Futures are scalars."""
    if isinstance(x, np.ndarray):
        return x.ndim > 0
    return isinstance(x, (View, list, tuple))


def as_view(x) -> View:
    """The View for an array operand (NumPy arrays are wrapped without copying)."""
    if isinstance(x, View):
        return x
    return View.from_numpy(x if isinstance(x, np.ndarray) else np.asarray(x))


def as_scalar(x):
    """A scalar operand as a Python number (or the Future standing for one)."""
    if isinstance(x, Future):
        return x
    if isinstance(x, (np.generic, np.ndarray)):
        return x.item()
    if isinstance(x, (bool, int, float)):
        return x
    raise TypeError(f"expected a View, an array or a number, got {type(x).__name__}")


def host_values(name: str, param: str, x) -> np.ndarray:
    """The values of operand ``param`` of ``name`` as a NumPy array for a host computation: a View's are copied
    through its host barrier (pending kernels that write it run first), anything else goes through np.asarray."""
    values = x.copy() if isinstance(x, View) else np.asarray(x)
    try:
        dtype_of(values.dtype)
    except TypeError:
        raise TypeError(f"{name}: {param} must be a View, an array or a number of a kfuse dtype, got "
                        f"{type(x).__name__} of {values.dtype}") from None
    return values


def view_of(name: str, param: str, x) -> View:
    """``as_view`` for any operand (numbers too), with an error naming ``name`` and ``param`` for values of no
    kfuse dtype. NumPy arrays are shared, as ``pk.array`` shares them."""
    return x if isinstance(x, View) else View.from_numpy(host_values(name, param, x))


def axes(name: str, axis, ndim: int):
    """``axis`` (None, an int or a tuple of ints) checked against ``ndim`` dimensions, negatives normalised."""
    if axis is None:
        return None
    items = axis if isinstance(axis, tuple) else (axis,)
    try:
        items = tuple(operator.index(a) for a in items)
    except TypeError:
        raise TypeError(f"{name}: axis must be an int or a tuple of ints, got {axis!r}") from None
    for a in items:
        if not -ndim <= a < ndim:
            raise ValueError(f"{name}: axis {a} is out of range for a {ndim}-D array")
    normal = tuple(a % ndim for a in items)
    if len(set(normal)) != len(normal):
        raise ValueError(f"{name}: axis {axis!r} repeats an axis")
    return normal if isinstance(axis, tuple) else normal[0]


def operand(x):
    return as_view(x) if is_array(x) else as_scalar(x)


def named_operand(name: str, param: str, x):
    """``operand`` with errors that name the function and the parameter: a View (arrays and lists become Views of a
    kfuse dtype) or a number (or Future)."""
    if is_array(x):
        return view_of(name, param, x)
    try:
        return as_scalar(x)
    except TypeError:
        raise TypeError(f"{name}: {param} must be a View, an array or a number, got {type(x).__name__}") from None


def kernel_scalar(s, like: View):
    """A scalar as passed to a kernel: ints become floats next to float Views (one specialisation), rounded to
    float32 next to a float32 View."""
    if type(s) is float and like.dtype is DType.float64 or isinstance(s, Future):
        return s
    if like.dtype.np == np.float32 and isinstance(s, (bool, int, float)):
        return float(np.float32(s))  # NumPy's weak scalar takes the View's float32 precision (x > 0.1 compares to 0.1f)
    if like.dtype.is_float and isinstance(s, (bool, int)):
        return float(s)
    return int(s) if isinstance(s, bool) else s


def _np_operand(x):
    """What ``np.result_type`` needs to apply NumPy's rules (Python scalars are 'weak')."""
    if isinstance(x, View):
        return x.dtype.np
    if isinstance(x, Future):
        return 0.0 if x.dtype.is_float else (False if x.dtype.np == np.bool_ else 0)
    return x


def result_dtype(*operands, floating: bool = False) -> np.dtype:
    """NumPy's result type of an operation on ``operands``; ``floating`` for true division and math."""
    dtype = np.result_type(*(_np_operand(x) for x in operands))
    if floating and dtype.kind != "f":
        return np.dtype(np.float64)
    return dtype


def _run_pending() -> bool:
    """Run the pending trace (the result pool is full of the intermediates it holds); whether there was any."""
    rt = context.current()
    if not rt.trace.entries:  # recorded operations (ops/lazy.py) stay: their dropped results are never touched
        return False
    rt.flush_all()
    return True


def for_gpu() -> bool:
    """Whether new arrays are for a GPU (the runtime's default space is one): they are first written, or filled,
    there."""
    space = context.current().default_space
    gpu = _ON_DEVICE.get(space)
    if gpu is None:
        gpu = _ON_DEVICE[space] = on_device(space.value)
    return gpu


def new_view(shape, dtype) -> View:
    """A result's View: uninitialised memory (a kernel writes it next), on a GPU not copied over before that."""
    array, ptr = buffers.empty(shape, dtype, make_room=_run_pending)
    if for_gpu():
        device.undefined(array)
    else:
        device.defined(array)
    view = View.result(array, dtype_of(array.dtype), ptr)
    views.note_undefined(array)
    return view


def output(out, shape: tuple, dtype, name: str | None = None) -> View:
    """``out`` checked against the result shape (errors name the function ``name``), or a new View."""
    if out is None:
        return new_view(shape, dtype)
    out = as_view(out)
    if out.shape != tuple(shape):
        where = f"{name}: " if name else ""
        raise ValueError(f"{where}out= has shape {out.shape}, the result has shape {tuple(shape)}")
    return out


def broadcast(name: str, *operands, out=None) -> tuple:
    """NumPy broadcasting of the View operands (other operands pass unchanged): the result shape, and the
    operands with each View as a View of that shape. For a result in new memory (``out`` None) of rank 1 or 2
    a repeated View is read where it is, through a zero-stride View (GaussianNB's ``X - theta[c]`` then reads
    ``theta[c]``'s row, not a copy of it the size of X); into an ``out=``, which may share its memory, it is copied
    out to the full shape in new memory first, so the writes cannot race with the reads (a kernel reading it
    through a zero-stride View for ranks 1 and 2, a host copy above)."""
    shapes = [x.shape for x in operands if isinstance(x, View)]
    if all(s == shapes[0] for s in shapes):  # the common case, without NumPy's general rule (microseconds a call)
        return shapes[0], list(operands)
    try:
        shape = np.broadcast_shapes(*shapes)
    except ValueError:
        raise ValueError(f"{name}: operands of shapes {', '.join(map(str, shapes))} cannot be broadcast "
                         "together") from None
    in_place = out is None and len(shape) <= 2
    return shape, [_repeated(x, shape, in_place) if isinstance(x, View) and x.shape != shape else x
                   for x in operands]


def _repeated(v: View, shape: tuple, in_place: bool = False) -> View:
    if len(shape) > 2:
        return View.wrap(np.ascontiguousarray(np.broadcast_to(v.copy(), shape)))
    spread = v.repeated(shape)
    return spread if in_place else elementwise(kernels.copy_k, new_view(shape, v.dtype.np), True, a=spread)


def transposed(v: View) -> View:
    """A View of the transpose sharing v's memory (a strided View)."""
    return View.wrap(v._array.T)


def contiguous(v: View) -> View:
    """v itself if C-contiguous, else a contiguous copy made by a kernel."""
    if v.storage == "right" or v.ndim == 1:
        return v
    if v.ndim != 2:
        raise ValueError("kfuse array operations take strided Views of rank 1 or 2 only")
    return copy2d(new_view(v.shape, v.dtype.np), v)


def copy2d(out: View, a: View) -> View:
    """out[i][j] = a[i][j] in one kernel, whatever the two layouts (this is how strided data moves)."""
    if out.size:
        parallel_for(MDRangePolicy([0, 0], list(out.shape)), kernels.copy2d_k, out=out, a=a)
    return out


def flat(v: View) -> View:
    """A 1-D View over all elements of v, in C order (v must be contiguous or 1-D)."""
    if v.ndim == 1:
        return v
    f = _flat_views.get(v)
    if f is None:
        f = _flat_views[v] = View._part(v._array.reshape(-1), v)
    return f


def _in_place(v: View) -> bool:
    """Whether an element-wise kernel takes ``v`` as it is."""
    return type(v) is View and (v.ndim <= 2 or v.storage == "right")


def _contiguous_target(target: View) -> View:
    """Where a kernel writes a result meant for ``target``: target itself, or a contiguous temporary."""
    if target.storage == "right" or target.ndim == 1:
        return target
    if target.ndim != 2:
        raise ValueError("kfuse array operations take strided Views of rank 1 or 2 only")
    return new_view(target.shape, target.dtype.np)


def elementwise(wu, target: View, fresh: bool = False, **operands) -> View:
    """Run ``wu(i, out, **operands)`` over every element of ``target`` (View operands of its shape) and return
    ``target``. Plain Views, contiguous or of rank 1 or 2, are used as they are (kfuse/ops/lazy.py: a strided
    2-D one makes the kernel 2-D); others go through contiguous copies. ``fresh``: ``target`` is a new result
    (``new_view``), which no operand and no NumPy array reaches."""
    if target.size == 0:
        return target
    args = tuple(operands[name] for name in wu.parsed.param_names[2:])
    if _in_place(target) and all(_in_place(v) for v in args if isinstance(v, View)) \
            and expressions.template(wu) is not None:
        lazy.run(wu, target, args, fresh)
        return target
    dest = _contiguous_target(target)
    flat_args = {k: flat(contiguous(v)) if isinstance(v, View) else v for k, v in operands.items()}
    parallel_for(dest.size, wu, out=flat(dest), **flat_args)
    if dest is not target:
        copy2d(target, dest)
    return target


def _dtype_key(x):
    if isinstance(x, View):
        return x.dtype.np
    if isinstance(x, Future):  # weak, as a Python number (a float32 View minus its mean stays float32)
        return float if x.dtype.is_float else (bool if x.dtype.np == np.bool_ else int)
    if isinstance(x, (np.generic, np.ndarray)):
        return x.dtype
    return type(x)  # a Python scalar: "weak" in NumPy's promotion


_WEAK = {bool: False, int: 0, float: 0.0}
_UFUNC_DTYPES: dict = {}


def ufunc_dtype(name: str, ufunc, *operands) -> np.dtype:
    """The dtype NumPy's ``ufunc`` gives for these operands (Views, arrays, Python numbers, Futures), found by
    applying it to empty arrays of their dtypes (Python numbers as zeros, which NumPy 2 treats as weak). NumPy's
    float16 (math on bool/int8) is float32 here, kfuse having no float16. A TypeError names ``name`` where NumPy
    has no loop for the dtypes (``subtract`` of bools, ``sign`` of bools)."""
    key = (ufunc, tuple(_dtype_key(x) for x in operands))
    dtype = _UFUNC_DTYPES.get(key)
    if dtype is None:
        args = [np.empty(0, k) if isinstance(k, np.dtype) else _WEAK.get(k, k) for k in key[1]]
        try:
            with np.errstate(all="ignore"):
                dtype = np.asarray(ufunc(*args)).dtype
        except TypeError:
            kinds = ", ".join(str(k) if isinstance(k, np.dtype) else k.__name__ for k in key[1])
            raise TypeError(f"{name}: not defined for operands of type {kinds} (as in NumPy)") from None
        if dtype == np.float16:
            dtype = np.dtype(np.float32)
        dtype_of(dtype)
        _UFUNC_DTYPES[key] = dtype
    return dtype
