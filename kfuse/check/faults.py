"""Injected build failures: the one run-time failure a fusable kernel can have.

A kernel whose code the backend cannot build (the C++ compiler rejects it) fails when it first runs,
which with fusion on is at a flush, possibly inside a fused group. Real translator/compiler bugs are rare
and not reproducible on purpose, so :func:`failing_compiles` makes the runtime's backend refuse every
kernel containing the constant :data:`~kfuse.check.kernels.BROKEN_MARK` (only ``k_broken`` has it, alone
or fused) with a :class:`~kfuse.CompileError`, exactly as a real rejection surfaces, on any backend.
"""
from __future__ import annotations

import ast
import contextlib

from .. import context
from ..errors import CompileError
from .kernels import BROKEN_MARK


@contextlib.contextmanager
def failing_builds(refuses, message: str):
    """In the block, the runtime's backend refuses every kernel ``refuses(lowered)`` picks (a
    ``backends.base.Lowered``, alone or fused) with a CompileError carrying ``message``, as a compiler rejecting
    its code would; kernels kept by an earlier run are not looked up, so none skips the refusal."""
    backend = context.current().backend
    saved = {name: backend.__dict__[name] for name in ("render", "stored") if name in backend.__dict__}
    real = backend.render

    def render(lowered, translated=None):
        if refuses(lowered):
            raise CompileError(lowered.name, message, "<none: an injected failure>")
        return real(lowered, translated)

    backend.render = render
    backend.stored = lambda digest: None
    try:
        yield
    finally:
        for name in ("render", "stored"):
            if name in saved:
                setattr(backend, name, saved[name])
            else:
                delattr(backend, name)


def failing_compiles(mark: str = BROKEN_MARK):
    """Refuse every kernel containing the constant ``mark`` (k_broken's, alone or fused)."""
    value = float(mark)
    return failing_builds(
        lambda lowered: any(isinstance(n, ast.Constant) and n.value == value for n in ast.walk(lowered.source.tree)),
        f"error: kfuse.check refuses kernels containing {mark} (injected failure)")
