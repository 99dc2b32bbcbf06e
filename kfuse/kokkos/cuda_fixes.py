"""Source changes a Kokkos 4 needs before it builds with CUDA here, applied idempotently.

CUDA 13 changed two runtime calls Kokkos 4.6 makes in ``core/src/Cuda/Kokkos_Cuda_Instance.hpp``:
``cudaGraphAddDependencies`` takes an edge-data argument (kfuse passes ``nullptr``) and ``cudaMemPrefetchAsync``
takes a ``cudaMemLocation`` and a flags argument. Each fix wraps the old call in ``#if CUDART_VERSION >= 13000``,
so the patched source still builds with CUDA 12. A source that already makes the new call (patched before, or a
Kokkos release that supports CUDA 13) is left alone, as is one without the old call. ``set_default_arch`` makes
``bin/nvcc_wrapper`` compile for the GPU at hand when kfuse passes no ``-arch``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .sources import SourceError

INSTANCE = Path("core/src/Cuda/Kokkos_Cuda_Instance.hpp")
WRAPPER = Path("bin/nvcc_wrapper")


@dataclass(frozen=True)
class Fix:
    name: str
    old: str        # regex of the pre-CUDA-13 statement; groups: indent, then the call's arguments in order
    done: str       # regex that finds the CUDA 13 form already in the file
    new: str        # the CUDA 13 statement; {0}.. are the old call's arguments


FIXES = (
    Fix("cudaGraphAddDependencies edge data",
        r"([ \t]*)return cudaGraphAddDependencies\(\s*(\w+),\s*(\w+),\s*(\w+),\s*(\w+)\s*\);",
        r"cudaGraphAddDependencies(_v2)?\([^;]*nullptr",
        "return cudaGraphAddDependencies({0}, {1}, {2}, nullptr, {3});"),
    Fix("cudaMemPrefetchAsync location",
        r"([ \t]*)return cudaMemPrefetchAsync\(\s*(\w+),\s*(\w+),\s*(\w+),\s*(\w+)\s*\);",
        r"cudaMemPrefetchAsync(_v2)?\([^;]*cudaMemLocation",
        "return cudaMemPrefetchAsync({0}, {1}, cudaMemLocation{{cudaMemLocationTypeDevice, {2}}}, 0, {3});"),
)


def apply(source: Path) -> dict:
    """Patch ``source`` in place; returns fix name -> "applied", "already present" or "not needed" (the old call
    is not in this Kokkos)."""
    path = source / INSTANCE
    text = path.read_text() if path.exists() else ""
    outcome = {}
    for fix in FIXES:
        if re.search(fix.done, text):
            outcome[fix.name] = "already present"
            continue
        text, count = re.subn(fix.old, lambda m: _guarded(fix, m), text)
        outcome[fix.name] = "applied" if count else "not needed"
    if "applied" in outcome.values():
        path.write_text(text)
    return outcome


def _guarded(fix: Fix, match: re.Match) -> str:
    indent, args = match.group(1), match.groups()[1:]
    return (f"#if CUDART_VERSION >= 13000\n{indent}{fix.new.format(*args)}\n#else\n{match.group(0)}\n#endif")


def set_default_arch(source: Path, arch: str) -> None:
    """Make ``arch`` (e.g. "sm_90") the architecture bin/nvcc_wrapper compiles for by default."""
    path = source / WRAPPER
    text, count = re.subn(r'^default_arch="[^"]*"', f'default_arch="{arch}"', path.read_text(), count=1,
                          flags=re.M)
    if not count:
        raise SourceError(f"{path} has no default_arch=\"...\" line to set")
    path.write_text(text)
