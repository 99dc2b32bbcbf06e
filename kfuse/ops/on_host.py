"""Small element-wise operations computed by NumPy on the host, at once.

Whatever its size, an operation run as a kernel costs tens of microseconds of Python (a binding, a launch; with
fusion on, a recorded step and its share of the group's analysis), where NumPy's loop over a few hundred elements
takes one. So an operation with at most KFUSE_HOST_ELEMENTS result elements, whose kernel would run on the host
anyway (the default space is not a GPU's), is computed by NumPy straight into its result's memory when nothing
is pending (no trace entry, recorded operation, matched rerun or standing failure): nothing it reads can be
waiting for a kernel and nothing pending can read what it writes, so running it now is what its kernel run now
would do. The same rule holds eager and fused, so fusion never sees a different program.

Only operations whose NumPy loop gives their kernel's values bit for bit come here: IEEE's correctly rounded
``+ - * /`` and ``sqrt``, negation, absolute value, squares, comparisons, logical operations, copies and fills, on
operands of one dtype (a float32 kernel that computes in double and rounds gives float32's correctly rounded
result). Not ``exp``, ``log``, ``power``...: NumPy's and the C++ library's last bits differ, and a program must
not compute differently at 4,096 elements than at 4,097. Everything else goes to the kernel.
"""
from __future__ import annotations

import numpy as np

from .. import config, context, guard, views
from ..future import Future
from ..runtime import device
from ..types import DType
from ..views import View
from . import _common, kernels as k

try:  # NumPy 2's own mechanism behind np.errstate, which costs a microsecond to build and enter each time
    from numpy._core.umath import _extobj_contextvar, _make_extobj
    _QUIET = _make_extobj(all="ignore")
except ImportError:  # pragma: no cover - another NumPy
    _extobj_contextvar = None

_HOST_BACKENDS = ("kokkos", "python")  # backends whose kernels compute (the null backend records launches only)
_NUMBERS = frozenset({DType.float64, DType.float32, DType.int64, DType.int32})
_FLOATS = frozenset({DType.float64, DType.float32})
_COMPARED = _NUMBERS | {DType.bool}  # operand dtypes of comparisons and logical operations here
_FLOAT32_MAX = float(np.finfo(np.float32).max)
_INFINITIES = (float("inf"), float("-inf"))
_EXACT_COPIES = frozenset({(DType.float32, DType.float64), (DType.int32, DType.int64), (DType.int32, DType.float64),
                           (DType.bool, DType.float64), (DType.bool, DType.int64)})  # (from, to): every value exact


def _copy(a, out):
    np.copyto(out, a, casting="unsafe")


def _fill(value, out):
    out[...] = value


# workunit -> (NumPy's function of (operands..., out), what the result dtype must be): "same" (operands' dtype,
# one of _NUMBERS), "float" (operands' dtype, float32 or float64), "bool" (of operands of one dtype), "copy",
# "fill"
_RULES = {
    k.add_vv: (np.add, "same"), k.add_vs: (np.add, "same"),
    k.subtract_vv: (np.subtract, "same"), k.subtract_vs: (np.subtract, "same"), k.subtract_sv: (np.subtract, "same"),
    k.multiply_vv: (np.multiply, "same"), k.multiply_vs: (np.multiply, "same"),
    k.negative_k: (np.negative, "same"), k.square_k: (np.multiply, "square"),
    k.divide_vv: (np.divide, "float"), k.divide_vs: (np.divide, "float"), k.divide_sv: (np.divide, "float"),
    k.sqrt_k: (np.sqrt, "float"), k.absolute_k: (np.absolute, "float"),
    k.greater_vv: (np.greater, "bool"), k.greater_vs: (np.greater, "bool"),
    k.greater_equal_vv: (np.greater_equal, "bool"), k.greater_equal_vs: (np.greater_equal, "bool"),
    k.less_vv: (np.less, "bool"), k.less_vs: (np.less, "bool"),
    k.less_equal_vv: (np.less_equal, "bool"), k.less_equal_vs: (np.less_equal, "bool"),
    k.equal_vv: (np.equal, "bool"), k.equal_vs: (np.equal, "bool"),
    k.not_equal_vv: (np.not_equal, "bool"), k.not_equal_vs: (np.not_equal, "bool"),
    k.logical_and_vv: (np.logical_and, "bool"), k.logical_and_vs: (np.logical_and, "bool"),
    k.logical_or_vv: (np.logical_or, "bool"), k.logical_or_vs: (np.logical_or, "bool"),
    k.logical_xor_vv: (np.logical_xor, "bool"), k.logical_xor_vs: (np.logical_xor, "bool"),
    k.logical_not_k: (np.logical_not, "bool"),
    k.copy_k: (_copy, "copy"), k.fill_k: (_fill, "fill"),
}


def ran(wu, target: View, operands: tuple) -> bool:
    """Whether ``target[i] = wu(operands...)`` (lazy.run's arguments) was computed here, now."""
    rule = _RULES.get(wu)
    if rule is None or target.size > config.HOST_ELEMENTS.get() or type(target) is not View or \
            target.ndim > 2 and target.storage != "right":
        return False  # (the kernels refuse to write a strided View of rank 3: so does every size)
    function, kind = rule
    arrays = _arrays(kind, target, operands)
    if arrays is None:
        return False
    rt = context.current()
    with guard.lock:
        return _host_idle(rt) and _apply(rt, function, kind, arrays, operands, target)


def binary(vv, a, b, out) -> View | None:
    """``a op b`` (the operation whose View-op-View kernel is ``vv``) computed here, now: its result View, or
    None. The common case decided before the array operations' general path (broadcasting, conversions):
    Views of one shape and dtype, or one View and a Python number exact in its dtype."""
    rule = _RULES.get(vv)
    if rule is None:
        return None
    function, kind = rule
    if type(a) is View:
        view, other = a, b
    elif type(b) is View:
        view, other = b, a
    else:
        return None
    if view._array is None or view._array.size > config.HOST_ELEMENTS.get():
        return None  # (first: most large operations are decided here)
    if type(other) is View:
        if other.shape != view.shape or other.dtype is not view.dtype:
            return None
    elif not (type(other) is float and view.dtype is DType.float64 or isinstance(other, (int, float)) and
              _exact_scalar(other, view.dtype, kind == "bool")):
        return None
    if view.dtype not in (_FLOATS if kind == "float" else _COMPARED if kind == "bool" else _NUMBERS):
        return None
    dtype = DType.bool if kind == "bool" else view.dtype
    if out is not None and (type(out) is not View or out.shape != view.shape or out.dtype is not dtype or
                            out.ndim > 2 and out.storage != "right"):
        return None  # (the general path converts, broadcasts, or refuses what the kernels refuse)
    arrays = (a._array if type(a) is View else a, b._array if type(b) is View else b)
    rt = context.current()
    with guard.lock:
        if not _host_idle(rt):
            return None
        target = _common.new_view(view.shape, dtype.np) if out is None else out
        return target if _apply(rt, function, kind, arrays, (a, b), target) else None


def _host_idle(rt) -> bool:
    """Whether the host may go first: kernels run on the host and the operation may run now (``may_run_now``: a
    captured function's replay repeats kernels) (the caller holds guard.lock)."""
    return rt.backend.name in _HOST_BACKENDS and not _common.for_gpu() and rt.may_run_now()


def _apply(rt, function, kind: str, arrays, operands: tuple, target: View) -> bool:
    """Compute ``target`` from ``arrays`` (the caller holds guard.lock, the host may go first); False where NumPy
    refuses to write ``target`` (a read-only array, which the kernel writes)."""
    if device.keeps_state():  # (else the accesses below have nothing to do: a microsecond per operation)
        if views.constant:  # the host writes this memory: contents kfuse knew are gone
            views.touched((target,))
        for x in operands:
            if type(x) is View:
                rt.backend.host_access(x, False)
        rt.backend.host_access(target, True)
    try:
        _quietly(function, kind, arrays, target._array)
    except ValueError:  # NumPy checks before it writes: nothing was written
        if not target._array.flags.writeable:
            return False
        raise
    rt.counts["array_ops_on_host"] += 1
    return True


def _quietly(function, kind: str, arrays, out: np.ndarray) -> None:
    """The operation, quiet as its kernel is (NumPy warns of overflow, division by zero, NaN)."""
    if _extobj_contextvar is None:
        with np.errstate(all="ignore"):
            _compute(function, kind, arrays, out)
        return
    token = _extobj_contextvar.set(_QUIET)
    try:
        _compute(function, kind, arrays, out)
    finally:
        _extobj_contextvar.reset(token)


def _compute(function, kind: str, arrays, out: np.ndarray) -> None:
    if kind == "square":
        function(arrays[0], arrays[0], out=out)
    elif kind in ("copy", "fill"):
        function(arrays[0], out)
    else:
        function(*arrays, out=out)


def _arrays(kind: str, target: View, operands: tuple) -> list | None:
    """The operands as NumPy takes them, or None where NumPy's values could differ from the kernel's."""
    out, dtype, arrays = target.dtype, None, []
    for x in operands:
        if type(x) is View:
            if x.shape != target.shape or x._array is None or dtype not in (None, x.dtype):
                return None
            dtype = x.dtype
            arrays.append(x._array)
        elif isinstance(x, (Future, np.ndarray)) or not isinstance(x, (int, float)):
            return None
        else:
            arrays.append(x)
    if kind == "fill":
        return arrays if _exact_scalar(arrays[0], out) else None
    if kind == "copy":
        return arrays if dtype is out or (dtype, out) in _EXACT_COPIES else None
    if kind == "bool":
        if out is not DType.bool or dtype not in _COMPARED:
            return None
        return arrays if all(isinstance(x, np.ndarray) or _exact_scalar(x, dtype, compared=True) for x in arrays) \
            else None
    if dtype is not out or out not in (_FLOATS if kind == "float" else _NUMBERS):
        return None
    return arrays if all(isinstance(x, np.ndarray) or _exact_scalar(x, out) for x in arrays) else None


def _exact_scalar(s, dtype: DType, compared: bool = False) -> bool:
    """Whether NumPy uses the Python number ``s`` next to ``dtype`` as the kernel does: the kernel takes floats
    as doubles and ints as int64, NumPy (NEP 50) in the View's dtype; they agree where ``s`` is exact in it. A
    comparison of an integer View with a float is made in double by both."""
    if isinstance(s, bool):
        return False
    if dtype in _FLOATS:
        return dtype is DType.float64 or s in _INFINITIES or -_FLOAT32_MAX <= s <= _FLOAT32_MAX and \
            float(np.float32(s)) == s
    if dtype is DType.bool:
        return False
    if isinstance(s, float):
        return compared
    info = np.iinfo(dtype.np)
    return info.min <= s <= info.max
