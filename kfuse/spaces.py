"""Execution spaces: where a kernel runs."""
from __future__ import annotations

import enum
import warnings

from .errors import LaunchError
from . import guard


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
    space = _default if space in (None, ExecutionSpace.Default) else space
    if guard.forked_after_start:
        return _in_forked_child(space)
    return space


_warned_fork = False


def _in_forked_child(space: ExecutionSpace) -> ExecutionSpace:
    """See kfuse/guard.py: OpenMP cannot continue after fork(), Serial can; GPUs cannot."""
    global _warned_fork
    if space is ExecutionSpace.OpenMP:
        if not _warned_fork:
            _warned_fork = True
            warnings.warn("kfuse: this process was forked after Kokkos started; OpenMP kernels run on the Serial "
                          "backend here (use multiprocessing's 'spawn' start method for parallel children)",
                          RuntimeWarning, stacklevel=6)  # the program's parallel_* call
        return ExecutionSpace.Serial
    if space in (ExecutionSpace.Cuda, ExecutionSpace.HIP):
        raise LaunchError(f"kfuse: this process was forked after Kokkos started, and a {space.value} context "
                           "cannot be used after fork(); start child processes with multiprocessing's 'spawn' "
                           "method")
    return space
