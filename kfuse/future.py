"""Future: the result of a delayed reduction or scan, usable wherever the number it stands for is.

Any use that needs the value (arithmetic, comparison, ``float()``, ``repr``/``str``/f-strings, ``round``,
``math`` and NumPy functions, the number's own methods such as ``is_integer()``) asks the tracer to run
the calls it depends on; passing it to a later kernel does not need the value yet, and the tracer
records it as a dependency instead. What cannot work on a stand-in object: ``isinstance(r, float)``,
``type(r)``, ``json.dumps(r)`` and C extensions that demand an exact ``float``; use ``float(r)`` or
``pk.value(r)`` there.
"""
from __future__ import annotations

import math
import operator
import threading

import numpy as np

from .errors import InternalError, public_error
from .types import DType

_UNSET = object()


def done(dtype: DType, value) -> "Future":
    """A Future whose value is known already (a reduction run at once while fusion is on)."""
    future = Future(dtype, None)
    future.set_result(value)
    return future


class Future:
    """A scalar that will exist once the kernel call producing it has run."""

    __slots__ = ("dtype", "_value", "_resolve", "call", "failure")
    watched = None  # the thread whose reads of Futures' values are counted in ``reads`` (kfuse/capturing.py)
    reads = 0

    def __init__(self, dtype: DType, resolve, call=None):
        self.dtype = dtype
        self._value = _UNSET
        self._resolve = resolve  # callable(future) that runs what this value depends on
        self.call = call
        self.failure = None  # the tracer's Failure when the call (or one it depends on) failed

    @property
    def done(self) -> bool:
        return self._value is not _UNSET

    def set_result(self, value) -> None:
        self._value = float(value) if self.dtype.is_float else (bool(value) if self.dtype is DType.bool
                                                                  else int(value))
        self._resolve = None
        self.call = None

    def set_error(self, failure) -> None:
        self.failure = failure
        self._resolve = None

    def value(self):
        if Future.watched is not None and Future.watched == threading.get_ident():
            Future.reads += 1
        if self._value is _UNSET:
            try:  # an entry point (errors.public_error); a try costs nothing once the value is known
                if self.failure is None and self._resolve is not None:
                    self._resolve(self)
                if self.failure is not None:
                    site = getattr(self.call, "site", "") or "<unknown>"
                    raise self.failure.deferred(f"the result of the call at {site}")
                if self._value is _UNSET:  # never a made-up value: a delivery path kfuse forgot is its bug
                    site = getattr(self.call, "site", "") or "<unknown>"
                    raise InternalError(f"the result of the call at {site} was never delivered")
            except Exception as exc:
                raise public_error(exc)
        return self._value

    result = value

    def __float__(self):
        return float(self.value())

    def __int__(self):
        return int(self.value())

    def __index__(self):
        value = self.value()
        if isinstance(value, float):
            raise TypeError("a float Future cannot be used as an index")
        return int(value)

    def __bool__(self):
        return bool(self.value())

    def __complex__(self):
        return complex(self.value())

    def __round__(self, ndigits=None):
        return round(self.value(), ndigits)

    def __trunc__(self):
        return math.trunc(self.value())

    def __floor__(self):
        return math.floor(self.value())

    def __ceil__(self):
        return math.ceil(self.value())

    def __getattr__(self, name):
        """The number's own methods and attributes (``real``, ``is_integer()``, ``hex()`` ...)."""
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.value(), name)

    def __format__(self, spec):
        return format(self.value(), spec)

    def __repr__(self):
        return repr(self.value())

    def __str__(self):
        return str(self.value())

    def __hash__(self):
        return hash(self.value())

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self.value(), dtype=dtype or self.dtype.np)

    def item(self):
        return self.value()


def _unary(op):
    return lambda self: op(self.value())


def _binary(op):
    return lambda self, other: op(self.value(), other.value() if isinstance(other, Future) else other)


def _reflected(op):
    return lambda self, other: op(other.value() if isinstance(other, Future) else other, self.value())


for _name, _op in [("add", operator.add), ("sub", operator.sub), ("mul", operator.mul), ("truediv", operator.truediv),
                   ("floordiv", operator.floordiv), ("mod", operator.mod), ("pow", operator.pow),
                   ("divmod", divmod), ("and", operator.and_), ("or", operator.or_), ("xor", operator.xor),
                   ("lshift", operator.lshift), ("rshift", operator.rshift), ("matmul", operator.matmul)]:
    setattr(Future, f"__{_name}__", _binary(_op))
    setattr(Future, f"__r{_name}__", _reflected(_op))
for _name, _op in [("lt", operator.lt), ("le", operator.le), ("gt", operator.gt), ("ge", operator.ge),
                   ("eq", operator.eq), ("ne", operator.ne)]:
    setattr(Future, f"__{_name}__", _binary(_op))
for _name, _op in [("neg", operator.neg), ("pos", operator.pos), ("abs", operator.abs), ("invert", operator.invert)]:
    setattr(Future, f"__{_name}__", _unary(_op))


def value(x):
    """``pk.value(r)``: the plain number a Future stands for (anything else is returned as it is)."""
    return x.value() if isinstance(x, Future) else x
