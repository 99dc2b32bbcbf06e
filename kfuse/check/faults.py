"""Injected compile failures: the one run-time failure a fusable kernel can have.

A kernel whose C++ the compiler rejects fails when it first runs, which with fusion on is at a flush,
possibly inside a fused group. Real translator/compiler bugs are rare and not reproducible on
purpose, so :func:`failing_compiles` makes the compiler refuse every source containing
:data:`~kfuse.check.kernels.BROKEN_MARK` (only ``k_broken`` has it, alone or fused) with a
:class:`~kfuse.CompileError`, exactly as a real rejection surfaces.
"""
from __future__ import annotations

import contextlib

from ..compiler import cache
from ..errors import CompileError
from .kernels import BROKEN_MARK


@contextlib.contextmanager
def failing_compiles(mark: str = BROKEN_MARK):
    real = cache.build

    def build(name: str, source: str, *args, **kwargs):
        if mark in source:
            raise CompileError(name, f"error: kfuse.check refuses sources containing {mark} (injected failure)",
                               "<none: injected by kfuse.check>")
        return real(name, source, *args, **kwargs)

    cache.build = build
    try:
        yield
    finally:
        cache.build = real
