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
def failing_compiles(mark: str = BROKEN_MARK):
    backend = context.current().backend
    value = float(mark)
    saved = {name: backend.__dict__[name] for name in ("render", "stored") if name in backend.__dict__}
    real = backend.render

    def render(lowered, translated=None):
        if any(isinstance(n, ast.Constant) and n.value == value for n in ast.walk(lowered.source.tree)):
            raise CompileError(lowered.name, f"error: kfuse.check refuses kernels containing {mark} "
                                             "(injected failure)", "<none: injected by kfuse.check>")
        return real(lowered, translated)

    backend.render = render
    backend.stored = lambda digest: None  # a kernel kept by an earlier run must not skip the refusal
    try:
        yield
    finally:
        for name in ("render", "stored"):
            if name in saved:
                setattr(backend, name, saved[name])
            else:
                delattr(backend, name)
