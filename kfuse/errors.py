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
