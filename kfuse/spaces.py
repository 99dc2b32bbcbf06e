"""Execution spaces: where a kernel runs."""
from __future__ import annotations

import enum


class ExecutionSpace(enum.Enum):
    """OpenMP and Serial run compiled C++; Debug runs the workunit in the Python interpreter."""

    OpenMP = "OpenMP"
    Serial = "Serial"
    Debug = "Debug"
    Cuda = "Cuda"
    HIP = "HIP"
    Default = "Default"


def _from_setting() -> ExecutionSpace:
    from . import config

    name = config.DEFAULT_SPACE.get()
    try:
        return ExecutionSpace[name]
    except KeyError:
        raise ValueError(f"KFUSE_DEFAULT_SPACE={name!r}: choose one of "
                         + ", ".join(s.name for s in ExecutionSpace if s is not ExecutionSpace.Default)) from None


_default = _from_setting()


def set_default_space(space: ExecutionSpace) -> None:
    global _default
    if not isinstance(space, ExecutionSpace):
        raise TypeError(f"set_default_space expects a pk.ExecutionSpace, got {space!r}")
    _default = ExecutionSpace.OpenMP if space is ExecutionSpace.Default else space


def get_default_space() -> ExecutionSpace:
    return _default


def resolve(space: ExecutionSpace | None) -> ExecutionSpace:
    return _default if space in (None, ExecutionSpace.Default) else space
