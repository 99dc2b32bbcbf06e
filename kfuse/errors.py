"""The one exception hierarchy users see.

Errors about user code carry the workunit name and a source location, and print the offending line
with a caret, so a user can fix their kernel without reading kfuse's code.
"""
from __future__ import annotations

import ast
import dis
import functools
import linecache
import os
import sysconfig
from types import TracebackType
from typing import NamedTuple

from . import config


class KfuseError(Exception):
    """Base class of every error kfuse raises on purpose."""


class SourceError(KfuseError):
    """An error located in user kernel source: file:line:col, workunit, excerpt and caret."""

    def __init__(self, message: str, *, workunit: str | None = None, filename: str | None = None,
                 node: ast.AST | None = None, line_offset: int = 0, hint: str | None = None):
        self.workunit = workunit
        self.filename = filename
        self.lineno = (getattr(node, "lineno", 0) or 0) + line_offset if node is not None else None
        self.col = getattr(node, "col_offset", 0) if node is not None else 0
        self.reason = message
        parts = []
        where = f"{filename}:{self.lineno}:{self.col + 1}" if filename and self.lineno else (filename or "<unknown>")
        parts.append(f"{where}: in workunit '{workunit}': {message}" if workunit else f"{where}: {message}")
        if filename and self.lineno:
            text = linecache.getline(filename, self.lineno).rstrip("\n")
            if text:
                parts.append("    " + text)
                parts.append("    " + " " * self.col + "^")
        if hint:
            parts.append("hint: " + hint)
        super().__init__("\n".join(parts))


class UnsupportedSyntaxError(SourceError):
    """The translator met a Python construct it cannot turn into C++."""


class KernelTypeError(SourceError):
    """Types inside a kernel do not fit together (e.g. indexing a scalar)."""


class ArgumentError(KfuseError, TypeError):
    """A kernel was called with a missing, unexpected or wrongly typed argument."""


class CompileError(KfuseError):
    """The C++ compiler rejected generated code; carries the first errors and the full log's path."""

    def __init__(self, kernel: str, first_errors: str, log_path: str):
        self.kernel = kernel
        self.log_path = log_path
        super().__init__(f"C++ compilation of kernel '{kernel}' failed:\n{first_errors}\nfull log: {log_path}")


class LaunchError(KfuseError):
    """A compiled kernel failed while running (a C++ exception inside Kokkos)."""


class DeferredError(KfuseError):
    """A delayed kernel call failed when its result was needed; names the original call site."""


class InternalError(KfuseError):
    """A bug in kfuse itself, not in the user's program: an exception kfuse's own code did not mean to raise.
    It is chained to that exception, whose traceback shows where inside kfuse it happened."""


# --- what an error looks like where it reaches the user --------------------------------------------
_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep
_LIBRARIES = tuple(sorted({os.path.abspath(sysconfig.get_paths()[k]) + os.sep
                           for k in ("stdlib", "platstdlib", "purelib", "platlib")}))
_RAISE = dis.opmap["RAISE_VARARGS"]


def user_facing(fn):
    """Decorate a public entry point with :func:`public_error` (costs one Python call when nothing is raised)."""
    @functools.wraps(fn)
    def kfuse_entry(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            raise public_error(exc)
    return kfuse_entry


def public_error(exc: Exception) -> BaseException:
    """What an entry point raises when ``exc`` escapes it: ``raise public_error(exc)`` in its ``except`` clause.

    So that the user sees their own call and kfuse's message: a KfuseError loses kfuse's own frames
    (KFUSE_DEBUG=1 keeps them); an exception kfuse's code did not raise on purpose (an AttributeError, a
    RecursionError, a failed assertion) becomes an InternalError chained to it. Anything else is the same
    exception with the same traceback: exceptions of the user's own code that kfuse ran (a Debug-space
    workunit, a user object's method), errors kfuse raises on purpose as built-in types (a bad policy's
    TypeError), OSError and MemoryError. KeyboardInterrupt and SystemExit are not caught at all.
    """
    if isinstance(exc, KfuseError) and not config.DEBUG.get():
        return _hide_internal_frames(exc)
    if not isinstance(exc, KfuseError) and _is_internal(exc):
        kind = type(exc).__qualname__ if type(exc).__module__ == "builtins" else \
            f"{type(exc).__module__}.{type(exc).__qualname__}"
        error = InternalError(f"kfuse failed internally with {kind}: {exc}\nThis is a bug in kfuse, not in your "
                              "program; please report it with the traceback above.")
        error.__cause__ = exc
        return error
    # unchanged: drop the entry point's own frame, which ``raise`` adds back
    return exc.with_traceback(exc.__traceback__.tb_next if exc.__traceback__ else None)


def _in_kfuse(filename: str) -> bool:
    return os.path.abspath(filename).startswith(_PACKAGE)


def _in_users_code(filename: str) -> bool:
    """Neither kfuse, nor Python's or installed libraries, nor generated code (``<string>``, ``<frozen ...>``)."""
    return not filename.startswith("<") and not _in_kfuse(filename) and \
        not os.path.abspath(filename).startswith(_LIBRARIES)


def _entries(tb: TracebackType | None):
    while tb is not None:
        yield tb
        tb = tb.tb_next


def _is_internal(exc: Exception) -> bool:
    """Whether an exception that escaped an entry point is kfuse's bug rather than the user's or the system's."""
    if isinstance(exc, (OSError, MemoryError)):
        return False
    entries = list(_entries(exc.__traceback__))
    if any(_in_users_code(tb.tb_frame.f_code.co_filename) for tb in entries):
        return False
    innermost = entries[-1]
    code = innermost.tb_frame.f_code
    on_purpose = _in_kfuse(code.co_filename) and code.co_code[innermost.tb_lasti] == _RAISE
    return isinstance(exc, AssertionError) or not on_purpose


def _hide_internal_frames(exc: KfuseError) -> KfuseError:
    """``exc`` with only the user's own frames left in its traceback (kfuse's, and those of the libraries
    kfuse called, dropped) and in those of the exceptions it was chained to; an InternalError's cause
    keeps every frame, since it is the bug to report."""
    seen: set = set()
    pending: list = [exc]
    while pending:
        error = pending.pop()
        if id(error) in seen:
            continue
        seen.add(id(error))
        kept = [tb for tb in _entries(error.__traceback__) if _in_users_code(tb.tb_frame.f_code.co_filename)]
        rebuilt = None
        for tb in reversed(kept):
            rebuilt = TracebackType(rebuilt, tb.tb_frame, tb.tb_lasti, tb.tb_lineno)
        error.__traceback__ = rebuilt
        if not isinstance(error, InternalError):
            pending += [e for e in (error.__cause__, error.__context__) if e is not None]
    return exc


class KernelFault(LaunchError):
    """A thread of a kernel faulted (integer division by zero, an index outside a View). The launch runs to
    its end and reports the first fault, naming the workunit, the source line and the values involved,
    where C++ alone would kill the interpreter or read and write outside the array."""

    def __init__(self, reason: str, *, workunit: str, filename: str, lineno: int, kernel: str | None = None,
                 function: str | None = None, member: int | None = None):
        self.reason = reason
        self.member = member  # the faulting call's position in a fused kernel (None: not fused, or unknown)
        self.workunit = workunit
        self.filename = filename
        self.lineno = lineno
        self.kernel = kernel
        self.function = function
        self.others, self.others_known = (), True  # other members that faulted in the launch (kernel_fault)
        where = f"in workunit '{workunit}'"
        if function:
            where = f"in function '{function}' called from workunit '{workunit}'"
        if kernel and kernel != workunit:
            where += f" (fused kernel '{kernel}')"
        parts = [f"{filename}:{lineno}: {where}: {reason}"]
        text = linecache.getline(filename, lineno).strip()
        if text:
            parts.append("    " + text)
        super().__init__("\n".join(parts))


class KernelZeroDivisionError(KernelFault, ZeroDivisionError):
    """Integer ``//`` or ``%`` by zero inside a kernel (also ``INT_MIN // -1``, which C++ traps on alike)."""

    def __init__(self, dividend: int, divisor: int, operator: str, **where):
        self.dividend = dividend
        self.divisor = divisor
        if divisor == 0:
            reason = f"integer {'division' if operator == '//' else 'modulo'} by zero ({dividend} {operator} 0)"
        else:
            reason = f"integer overflow: {dividend} {operator} {divisor} does not fit the integer type"
        super().__init__(reason, **where)


class KernelIndexError(KernelFault, IndexError):
    """A View index outside ``0 <= index < extent`` (checked under KFUSE_BOUNDS_CHECK=1 and in the Debug space)."""

    def __init__(self, view: str, dim: int, index: int, extent: int, **where):
        self.view = view
        self.dim = dim
        self.index = index
        self.extent = extent
        reason = f"index {index} is out of range for dimension {dim} of View '{view}' (extent {extent})"
        if index < 0:
            reason += "; negative indices are errors in kernels (no wrap-around)"
        super().__init__(reason, **where)


class KernelScratchError(KernelFault):
    """A ScratchView that does not fit the scratch memory its TeamPolicy sets (``set_scratch_size``), or with a
    negative extent. ``kind``: "scratch" (``level``, ``needed`` bytes per team counting the ScratchViews before it,
    ``available`` bytes), "scratch_extent" (``dim``, ``extent``) or "scratch_refused" (Kokkos gave it no memory)."""

    def __init__(self, kind: str, view: str, dim: int, value: int, limit: int, **where):
        self.kind = kind
        self.view = view
        if kind == "scratch":
            self.level, self.needed, self.available = dim, value, limit
            reason = (f"ScratchView '{view}' does not fit in level-{dim} scratch memory: with the ScratchViews before "
                      f"it the team needs {value} bytes, its TeamPolicy sets {limit}; give more with "
                      f"set_scratch_size({dim}, pk.PerTeam(...)), e.g. the sum of pk.ScratchView1D[T].shmem_size(n) "
                      "of the team's ScratchViews")
        elif kind == "scratch_extent":
            self.dim, self.extent = dim, value
            reason = f"ScratchView '{view}' got the negative extent {value} in dimension {dim}"
        else:
            self.level = dim
            reason = f"Kokkos gave ScratchView '{view}' no level-{dim} scratch memory"
        super().__init__(reason, **where)


FAULT_FIELD_SEPARATOR = "\x1f"
FAULT_SITE_END, FAULT_SITE_PART = "\x1e", "\x1d"  # the other faulted sites' field: each site's end, its parts


class OtherFault(NamedTuple):
    """A fault site of another member of a fused kernel that faulted in the same launch (its values were not kept:
    the record holds the first fault's). ``sure``: this site faulted; else one of the kernel's sites from the 64th
    on did, which may be this one."""

    sure: bool
    member: int
    kind: str
    workunit: str
    filename: str
    lineno: int


def kernel_fault(record: str, kernel: str) -> KernelFault:
    """The exception for a fault record a kernel's C entry wrote: kind, workunit, function, file, line, View,
    dimension, two values, the fused member and the other members' faulted sites, separated by
    FAULT_FIELD_SEPARATOR (C++: kf_describe_fault). ``others``: those sites (``OtherFault``); ``others_known``: the
    list is whole (the record fitted its buffer)."""
    kind, workunit, function, filename, line, view, dim, a, b, member, others = record.split(FAULT_FIELD_SEPARATOR)
    where = dict(workunit=workunit, filename=filename, lineno=int(line), kernel=kernel, function=function or None,
                 member=int(member) if int(member) >= 0 else None)
    if kind == "index":
        fault = KernelIndexError(view, int(dim), int(a), int(b), **where)
    elif kind.startswith("scratch"):
        fault = KernelScratchError(kind, view, int(dim), int(a), int(b), **where)
    else:
        fault = KernelZeroDivisionError(int(a), int(b), "//" if kind == "floordiv" else "%", **where)
    sites = others.split(FAULT_SITE_END)
    fault.others_known = sites[-1] == ""  # each site ends with the separator: a cut record's last does not
    fault.others = tuple(OtherFault(sure == "1", int(m), k, wu, f, int(n))
                         for sure, m, k, wu, f, n in (site.split(FAULT_SITE_PART) for site in sites[:-1]))
    return fault
