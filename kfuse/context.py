"""Which runtime the calls of this thread of control go to.

A runtime (``engine.Runtime``) owns the trace, the plan and kernel caches, the counters, the settings
overridden in the program and the default space. The process has one, installed by ``kfuse/__init__.py``;
``using(runtime)`` runs a block (this thread or task only) on another one, and ``installed(runtime)``
swaps the process's own (tests give each test a fresh runtime this way, so threads a test starts use it
too: a new thread does not inherit the context variables of the thread that started it).

This module imports nothing of kfuse, so every layer may ask it for the runtime in charge.
"""
from __future__ import annotations

import contextlib
import contextvars

_current: contextvars.ContextVar = contextvars.ContextVar("kfuse_runtime")
_process = None


def current():
    """The runtime in charge here: this context's own, else the process's."""
    return _current.get(_process)


def install(runtime) -> None:
    """Make ``runtime`` the process's runtime (kfuse/__init__.py does this once at import)."""
    global _process
    _process = runtime


@contextlib.contextmanager
def using(runtime):
    """Run the block's kfuse calls on ``runtime`` (in this thread or asyncio task only)."""
    token = _current.set(runtime)
    try:
        yield runtime
    finally:
        _current.reset(token)


@contextlib.contextmanager
def installed(runtime):
    """Run the block with ``runtime`` as the process's runtime, then put the previous one back."""
    previous = _process
    install(runtime)
    try:
        yield runtime
    finally:
        install(previous)
