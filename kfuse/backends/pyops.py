"""What Python kernels (backends/python.py) call: values and operations with the compiled kernels' semantics.

A value is the Python int, float or bool holding what the C++ variable of its DType holds. Operations that
Python spells differently from C++ (true and floor division, ``%`` on floats, powers, shifts, ``round``,
the math library) are functions here, and so are the checked ones: integer ``//`` and ``%``, View elements,
atomics. A checked operation that faults records the fault (the first of a launch is kept), yields 0 and
lets the launch go on, as a compiled kernel does.
"""
from __future__ import annotations

import itertools
import math
import sys
from fractions import Fraction
from types import SimpleNamespace

import numpy as np

from ..errors import FAULT_FIELD_SEPARATOR, FAULT_SITE_END, FAULT_SITE_PART, kernel_fault
from ..ir.typing import atomic_op
from ..types import DType, dtype_of
from .interp import IndexFault, ScratchFault, c_divide, c_format

I64 = DType.int64
_INT64_MIN = -(1 << 63)


# --- conversions --------------------------------------------------------------------------------------------
def _int_converter(dtype: DType):
    """``static_cast<dtype>`` of an int, bool or float. Out-of-range floats are undefined behaviour in C++;
    this gives what x86 gives for 32- and 64-bit signed targets (the lowest value), else the wrapped value."""
    bits, signed = dtype.bits, dtype.is_signed
    low, high = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    mask = (1 << bits) - 1
    saturating = signed and bits >= 32

    def convert(x):
        if type(x) is float:
            if not math.isfinite(x) or saturating and not low <= x < high + 1:
                return low if saturating else 0
            x = int(x)
        if low <= x <= high:
            return int(x)
        x &= mask
        return x - mask - 1 if signed and x > high else x
    return convert


def _to_float32(x) -> float:
    return float(np.float32(x))


CONVERT = {d: _int_converter(d) for d in DType if d.is_int}
CONVERT.update({DType.float64: float, DType.float32: _to_float32, DType.bool: bool})
ZERO = {d: (0.0 if d.is_float else False if d is DType.bool else 0) for d in DType}


# --- C semantics of the operations Python spells differently ---------------------------------------------
def _fdiv(a, b) -> float:
    """IEEE division: a zero divisor gives inf or nan, as in C++."""
    a, b = float(a), float(b)
    if b == 0.0:
        return math.nan if a == 0.0 or a != a else math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


def _fmod_py(a, b) -> float:
    """``kf_fmod_py``: fmod whose sign follows the divisor, as Python's % does."""
    r = _c_fmod(float(a), float(b))
    if r != 0 and (r < 0) != (b < 0):
        r += b
    return r


def _ipow(base: int, exp: int) -> int:
    """``kf_ipow``: int64 power by squaring, wrapping; a non-positive exponent gives 1."""
    return CONVERT[I64](pow(base, exp, 1 << 64)) if exp > 0 else 1


def _shift(a: int, b: int, left: bool) -> int:
    """x86 masks a 64-bit shift count to 6 bits (a count outside 0..63 is undefined behaviour in C++)."""
    return a << (b & 63) if left else a >> (b & 63)


def _round(x) -> int:
    """``static_cast<int64_t>(std::nearbyint(x))``: half to even, through a double."""
    x = float(x)
    if not math.isfinite(x) or not -2.0 ** 63 <= x < 2.0 ** 63:
        return _INT64_MIN
    return round(x)


def _fma(a: float, b: float, c: float) -> float:
    """``std::fma``: a * b + c rounded once (non-finite operands and zero results as the plain expression)."""
    if not all(map(math.isfinite, (a, b, c))):
        return a * b + c
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    return float(exact) if exact else a * b + c


def _ieee(python_fn, numpy_fn):
    """The C library function: Python's math raises on domain errors and overflow where C returns nan or inf."""
    def fn(*args):
        try:
            return python_fn(*args)
        except (ValueError, OverflowError):
            return float(numpy_fn(*args))
    return fn


def _gamma_pole(x):
    return math.copysign(math.inf, x) if x == 0 else math.nan if x < 0 else math.inf


def _fmin(a, b):
    return b if a != a else a if b != b else min(a, b)


def _fmax(a, b):
    return b if a != a else a if b != b else max(a, b)


_c_fmod = _ieee(math.fmod, np.fmod)
_FLOAT_MATH = {  # the canonical math names whose C++ call is std::<name> of the argument(s) in a float type
    **{name: _ieee(getattr(math, name), getattr(np, name))
       for name in ("sqrt", "cbrt", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan",
                    "sinh", "cosh", "tanh")},
    **{name: _ieee(getattr(math, name), getattr(np, "arc" + name[1:]))
       for name in ("asin", "acos", "atan", "asinh", "acosh", "atanh")},
    "erf": math.erf, "erfc": math.erfc, "tgamma": _ieee(math.gamma, _gamma_pole),
    "lgamma": _ieee(math.lgamma, lambda x: math.inf), "floor": lambda x: float(np.floor(x)),
    "ceil": lambda x: float(np.ceil(x)), "trunc": lambda x: float(np.trunc(x)),
    "pow": _ieee(math.pow, np.power), "atan2": math.atan2, "fmin": _fmin, "fmax": _fmax, "fmod": _c_fmod,
    "hypot": math.hypot, "copysign": math.copysign, "fma": _fma}
#: The math functions kernels may call, with C's results.
PK_MATH = SimpleNamespace(**_FLOAT_MATH, isnan=math.isnan, isinf=math.isinf, isfinite=math.isfinite)


# --- checked operations ------------------------------------------------------------------------------------
class Runtime:
    """The checked operations of one rendered kernel (``sites``: its fault sites) and the first fault of
    its current launch."""

    def __init__(self, sites: list):
        self.sites = sites
        self.fault = None  # (site, dim, a, b) of the first fault
        self.faulted = 0  # bit k: site k faulted (bit 63: a site >= 63), as the C++ record's ``sites``

    def record(self, site: int, dim: int, a: int, b: int) -> None:
        self.faulted |= 1 << min(site, 63)
        if self.fault is None:
            self.fault = (site, dim, a, b)

    def take_fault(self, kernel: str):
        """The exception a compiled kernel raises for the fault recorded (the same record), or None."""
        if self.fault is None:
            return None
        number, dim, a, b = self.fault
        s = self.sites[number]
        fields = (s.kind, s.workunit, s.function, s.filename, s.line, s.view, dim, a, b, s.member)
        others = "".join(FAULT_SITE_PART.join(map(str, (int(k < 63), o.member, o.kind, o.workunit, o.filename, o.line)))
                         + FAULT_SITE_END for k, o in enumerate(self.sites)
                         if o.member != s.member and self.faulted >> min(k, 63) & 1)
        return kernel_fault(FAULT_FIELD_SEPARATOR.join(map(str, (*fields, others))), kernel)

    def load(self, view, index: tuple, site: int):
        """An element; 0 (and a fault) for an index outside the View."""
        value = self._read(view, index, site)
        return view.dtype.type(0).item() if value is None else value

    def _read(self, view, index: tuple, site: int):
        try:
            return view[index].item()
        except IndexFault as fault:
            self._index_fault(fault, site)
            return None

    def store(self, view, value, index: tuple, site: int) -> None:
        """``view[index] = value``, the value given first as C++17 evaluates an assignment's right side first."""
        try:
            view[index] = value
        except IndexFault as fault:
            self._index_fault(fault, site)

    def _index_fault(self, fault: IndexFault, site: int) -> None:
        f = fault.fields
        self.record(site, f["dim"], CONVERT[I64](f["index"]), f["extent"])

    def divide(self, a: int, b: int, kind: str, signed: bool, site: int) -> int:
        """``kf_floordiv_checked`` / ``kf_mod_checked`` on int64 or uint64 operands."""
        if b == 0 or signed and b == -1 and a == _INT64_MIN:
            if b == 0 or kind == "floordiv":
                self.record(site, 0, CONVERT[I64](a), CONVERT[I64](b))
            return 0
        return a // b if kind == "floordiv" else a % b

    def atomic(self, name: str, view, index: tuple, site: int, *values, divide_site: int | None = None):
        """Kokkos' atomics, one thread at a time; the old value for the fetch variants. An integer division's
        zero divisor is a fault at ``divide_site`` that leaves the element as it was (kf_atomic_fetch_divmod)."""
        old = self._read(view, index, site)
        if old is None:  # C++ works on the fault record's scratch element
            return view.dtype.type(0).item()
        dtype = dtype_of(view.dtype)
        op = atomic_op(name)
        if divide_site is not None and values[0] == 0:
            self.record(divide_site, 0, CONVERT[I64](old), 0)
            return old
        if op == "compare_exchange":
            new = values[1] if old == values[0] else old
        else:
            v = values[0] if values else 1
            new = {"add": lambda: old + v, "sub": lambda: old - v, "increment": lambda: old + 1,
                   "decrement": lambda: old - 1, "max": lambda: v if v > old else old,
                   "min": lambda: v if v < old else old, "and": lambda: old & v, "or": lambda: old | v,
                   "xor": lambda: old ^ v, "mul": lambda: old * v, "div": lambda: c_divide(old, v),
                   "mod": lambda: old - v * c_divide(old, v), "lshift": lambda: _shift(old, v, True),
                   "rshift": lambda: _shift(old, v, False), "exchange": lambda: v}[op]()
        self.store(view, CONVERT[dtype](new), index, site)
        return old

    @staticmethod
    def printf(fmt: str, convs: tuple, *values) -> None:
        """C printf of arguments cast as the C++ casts them: integers to long long (``%u``/``%x``/``%o``
        print it unsigned), floats to double."""
        args = []
        for conv, v in zip(convs, values):
            if conv in "diouxXc":
                v = CONVERT[I64](v)
                args.append(v + (1 << 64) if v < 0 and conv in "ouxX" else v)
            else:
                args.append(float(v))
        sys.stdout.write(c_format(fmt, args))

    @staticmethod
    def nested_for(begin: int, end: int, fn) -> None:
        for j in range(begin, end):
            fn(j)

    @staticmethod
    def nested_reduce(begin: int, end: int, fn, zero):
        acc = zero
        for j in range(begin, end):
            acc = fn(j, acc)
        return acc

    @staticmethod
    def nested_md_for(extents: tuple, fn) -> None:
        """A TeamThreadMDRange (or its vector forms): every index tuple, row-major."""
        for index in itertools.product(*map(range, extents)):
            fn(*index)

    @staticmethod
    def nested_md_reduce(extents: tuple, fn, zero):
        acc = zero
        for index in itertools.product(*map(range, extents)):
            acc = fn(*index, acc)
        return acc

    def scratch(self, team, level: int, per_thread: bool, dtype: str, extents: tuple, name: str, site: int,
                extent_site: int):
        """A ScratchView's memory from ``team`` (a ``DebugTeamMember``), or None with the fault recorded."""
        try:
            return team.scratch_view(level, per_thread, np.dtype(dtype), extents, name)
        except ScratchFault as fault:
            f = fault.fields
            self.record(extent_site if f["kind"] == "scratch_extent" else site, f["dim"], f["value"], f["limit"])
            return None

    @staticmethod
    def nested_scan(begin: int, end: int, fn, zero) -> None:
        """As Kokkos runs a team's scan: a pass that accumulates, then the final pass from zero."""
        acc = zero
        for j in range(begin, end):
            acc = fn(j, acc, False)
        acc = zero
        for j in range(begin, end):
            acc = fn(j, acc, True)

    def namespace(self) -> dict:
        """The globals of the kernel's Python code: every name it calls starts with ``_kf_``."""
        found = {f"_kf_to_{d.name}": CONVERT[d] for d in DType}
        found.update(_kf_pk=PK_MATH, _kf_range=range, _kf_abs=abs, _kf_min=min, _kf_max=max, _kf_fdiv=_fdiv,
                     _kf_fmod_py=_fmod_py, _kf_ipow=_ipow, _kf_shift=_shift, _kf_round=_round, _kf_ld=self.load,
                     _kf_st=self.store, _kf_divide=self.divide, _kf_atomic=self.atomic, _kf_printf=self.printf,
                     _kf_nested_for=self.nested_for, _kf_nested_reduce=self.nested_reduce,
                     _kf_nested_scan=self.nested_scan, _kf_nested_md_for=self.nested_md_for,
                     _kf_nested_md_reduce=self.nested_md_reduce, _kf_scratch=self.scratch, _kf_new=_new)
        return found


def _new(cls, init, *args):
    """A classtype construction: a zero-filled value of ``cls``, then its ``__init__`` instance run on it."""
    value = cls()
    init(value, *args)
    return value
