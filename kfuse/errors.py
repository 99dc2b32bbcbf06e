"""The one exception hierarchy users see.

Errors about user code carry the workunit name and a source location, and print the offending line
with a caret, so a user can fix their kernel without reading kfuse's code.
"""
from __future__ import annotations

import ast
import linecache


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


class KernelFault(LaunchError):
    """A thread of a kernel faulted (integer division by zero, an index outside a View). The launch runs to
    its end and reports the first fault, naming the workunit, the source line and the values involved,
    where C++ alone would kill the interpreter or read and write outside the array."""

    def __init__(self, reason: str, *, workunit: str, filename: str, lineno: int, kernel: str | None = None,
                 function: str | None = None):
        self.reason = reason
        self.workunit = workunit
        self.filename = filename
        self.lineno = lineno
        self.kernel = kernel
        self.function = function
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


FAULT_FIELD_SEPARATOR = "\x1f"


def kernel_fault(record: str, kernel: str) -> KernelFault:
    """The exception for a fault record a kernel's C entry wrote: kind, workunit, function, file, line, View,
    dimension and two values, separated by FAULT_FIELD_SEPARATOR (the C++ side is kf_describe_fault)."""
    kind, workunit, function, filename, line, view, dim, a, b = record.split(FAULT_FIELD_SEPARATOR)
    where = dict(workunit=workunit, filename=filename, lineno=int(line), kernel=kernel, function=function or None)
    if kind == "index":
        return KernelIndexError(view, int(dim), int(a), int(b), **where)
    return KernelZeroDivisionError(int(a), int(b), "//" if kind == "floordiv" else "%", **where)
