"""How many references an object has besides the one list slot kfuse reads it from.

Reference counts answer "does anything else still hold this?" exactly (kfuse/tracer/liveness.py: memory only a
running partition reaches; kfuse/buffers.py: a free pooled array). ``sys.getrefcount`` adds references of its own that
differ between Python versions, so the count is calibrated once, on an object only a list slot holds.
"""
from __future__ import annotations

import sys


def _count(objects: list, i: int) -> int:
    return sys.getrefcount(objects[i])


_LIST_SLOT_ONLY = _count([object()], 0)


def others(objects: list, i: int) -> int:
    """The references to ``objects[i]`` other than its slot in ``objects``."""
    return _count(objects, i) - _LIST_SLOT_ONLY
