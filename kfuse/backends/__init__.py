"""Backends: what runs a lowered kernel (base.py says what each must do)."""
from __future__ import annotations

NAMES = ("kokkos", "python", "null")


def named(name: str):
    """The backend called ``name`` (KFUSE_BACKEND): the process's one, or a fresh null backend."""
    if name == "kokkos":
        from .kokkos import KOKKOS

        return KOKKOS
    if name == "python":
        from .python import PYTHON

        return PYTHON
    if name == "null":
        from .null import NullBackend

        return NullBackend()
    raise ValueError(f"KFUSE_BACKEND={name!r}: choose one of {', '.join(NAMES)}")
