"""What a failed delayed call leaves behind: poisoned memory and Futures, reported where they are needed.

A delayed call that fails (a C++ compile error, a launch the backend refuses, a fault inside the
kernel) must not take unrelated work with it, and must never leave data silently stale. So the
failure is recorded against the bytes the call would have written; a later call that reads poisoned
bytes (or takes a failed Future) is not run and poisons what it would write, with the same root failure.
A call that only writes poisoned bytes runs: nothing it computes depends on them (an array-operations
kernel may hold independent statements, each to be kept), and the bytes stay poisoned, since a kernel
need not write every element of a View it writes. A host access to poisoned bytes, a failed Future's
value, ``pk.fence()`` and interpreter exit raise (or report) a ``DeferredError`` naming the failing
call's workunit, call site and error. A full host overwrite (``view.fill(x)``, ``view[...] = x``)
makes poisoned bytes valid again.

Poison is keyed by byte ranges (like the trace) and the lattice of the View written (views.lattice: a column
of a matrix poisons its own elements, not its neighbours' between them), and each entry lives only while the memory
it names does (a weak reference to the memory's owner), so a new array reusing freed memory is never poisoned.
"""
from __future__ import annotations

import weakref

import numpy as np

from ..errors import DeferredError, KernelFault
from ..views import lattice, meet, storage_key


class Failure:
    """The root cause: one call and the error it raised. It holds neither the call's arguments nor the error's
    traceback (kfuse's own frames, whose locals hold Views; the error's message names the workunit and line), so
    the memory it poisons dies when the program drops it, and its poison with it."""

    def __init__(self, call, error: BaseException):
        self.call = weakref.ref(call)
        self.error = error
        self.reported = False
        self._where = f"kernel '{call.prepared.name}' called at {call.site or '<unknown>'}"
        error.__traceback__ = None

    def where(self) -> str:
        return self._where

    def deferred(self, what: str) -> DeferredError:
        """The error to raise at the use that needed the lost result (marks the failure reported). A lost
        fault is also its builtin kind, so ``except ZeroDivisionError`` catches it as it does eagerly."""
        self.reported = True
        err = _deferred_class(self.error)(f"{what} depends on {self.where()}, which failed:\n{self.error}")
        err.__cause__ = self.error
        return err


def _deferred_class(error: BaseException) -> type:
    for builtin in (ZeroDivisionError, IndexError):
        if isinstance(error, KernelFault) and isinstance(error, builtin):
            return _DEFERRED_FAULTS[builtin]
    return DeferredError


class DeferredZeroDivisionError(DeferredError, ZeroDivisionError):
    """A lost result whose failing call divided by zero."""


class DeferredIndexError(DeferredError, IndexError):
    """A lost result whose failing call indexed a View out of bounds."""


_DEFERRED_FAULTS = {ZeroDivisionError: DeferredZeroDivisionError, IndexError: DeferredIndexError}


def _owner(array: np.ndarray):
    """The object whose life is the memory's life (the end of NumPy's ``base`` chain)."""
    while isinstance(array, np.ndarray) and array.base is not None:
        array = array.base
    return array


class _Strong:
    """A stand-in 'weak reference' for owners that cannot be weakly referenced (bytes, say)."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __call__(self):
        return self.obj


def _ref(obj):
    try:
        return weakref.ref(obj)
    except TypeError:
        return _Strong(obj)


class Failures:
    def __init__(self):
        # (lo, hi, Failure, owner ref, lattice, storage key); a plain list, so "anything lost?" costs nothing
        self.lost: list = []
        self._failures: list = []  # every root failure not yet reported to the program

    def __bool__(self) -> bool:
        """Whether a failure is unreported or poisons memory still alive (memory gone takes its poison along; the
        caller holds guard.lock, as for every query)."""
        return bool(self._failures) or bool(self.lost) and bool(self._live())

    # --- recording ----------------------------------------------------------------------------
    def fail(self, call, error: BaseException) -> Failure:
        failure = Failure(call, error)
        self._failures.append(failure)
        self.poison(call, failure)
        return failure

    def poison(self, call, failure: Failure) -> None:
        """Mark what ``call`` would have written (and its Future) as lost to ``failure``."""
        call.failure = failure
        access = call.prepared.access
        for (name, t), arg in zip(call.prepared.spec.params, call.args):
            if t.is_view and access[name].write and arg.bounds[0] < arg.bounds[1]:
                owner = arg.owner if hasattr(arg, "owner") else _owner(arg._array)
                self.lost.append((*arg.bounds, failure, _ref(owner), lattice(arg), storage_key(arg)))
        if call.result is not None:
            call.result.set_error(failure)

    # --- queries ------------------------------------------------------------------------------
    def _live(self):
        dead = [p for p in self.lost if p[3]() is None]
        if dead:
            self.lost = [p for p in self.lost if p[3]() is not None]
        return self.lost

    def at(self, view) -> Failure | None:
        """The failure that poisoned any byte of ``view``, if one did."""
        lo, hi = view.bounds
        if lo >= hi:
            return None
        mine = lattice(view)
        for plo, phi, failure, _, poisoned, _ in self._live():
            if meet((plo, phi), poisoned, (lo, hi), mine):
                return failure
        return None

    def blocking(self, call) -> Failure | None:
        """Why ``call`` cannot run: it reads poisoned bytes or takes a failed Future (None: it can)."""
        for _, fut in call.futures:
            if fut.failure is not None:
                return fut.failure
        if not self.lost:
            return None
        access = call.prepared.access
        for (name, t), arg in zip(call.prepared.spec.params, call.args):
            if t.is_view and access[name].read:
                found = self.at(arg)
                if found is not None:
                    return found
        return None

    def forget(self, failure: Failure) -> None:
        """``failure`` was raised at its own call, as eager execution raises it: the program knows, and its
        output is what eager leaves (untouched), so nothing stays poisoned by it."""
        failure.reported = True
        self.lost = [p for p in self.lost if p[2] is not failure]
        self._failures = [f for f in self._failures if f is not failure]

    def clear(self, lo: int, hi: int) -> None:
        """The memory [lo, hi) is an allocation handed out anew: entries inside it are gone, entries around it
        stay."""
        self.lost = [p for p in self._live() if not (lo <= p[0] and p[1] <= hi)]

    def overwritten(self, view) -> None:
        """The host overwrote every element of ``view``: entries whose bytes it covers are gone (inside its span
        where it is one contiguous block of bytes, else those of exactly its elements), others stay."""
        lo, hi = view.bounds
        whole = view.storage == "right"  # (C-contiguous: its bytes are its whole span)
        key = storage_key(view)
        self.lost = [p for p in self._live() if not (whole and lo <= p[0] and p[1] <= hi or p[5] == key)]

    # --- reporting ----------------------------------------------------------------------------
    def unreported(self) -> list:
        return [f for f in self._failures if not f.reported]

    def raise_unreported(self) -> None:
        """Raise the failures the program has not heard of yet (``pk.fence()``, ``disable_fusion``), each named."""
        pending = self.unreported()
        self._failures = []
        if pending:
            err = pending[0].deferred("pk.fence()")
            for other in pending[1:]:
                other.reported = True
                first = str(other.error).splitlines()[0] if str(other.error) else type(other.error).__name__
                err.args = (f"{err.args[0]}\nalso failed: {other.where()}: {first}",)
            raise err


def is_fault(error: BaseException) -> bool:
    """A fault raised while the kernel ran (memory may be half-written), not before it started."""
    return isinstance(error, KernelFault)
