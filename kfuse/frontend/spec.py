"""The specialisation of a kernel: what its arguments are at one call, and how it is launched.

Frozen, hashable values: together with the kernel's source they are the in-memory cache key, and
they enter the disk-cache key through the generated C++.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..types import DType


@dataclass(frozen=True)
class ArgType:
    """Type of one kernel argument: a scalar of ``dtype`` or a View of ``dtype``, rank ``ndim``, ``layout``."""

    kind: str  # "view" | "scalar"
    dtype: DType
    ndim: int = 0
    layout: str = ""  # "right" (C-contiguous) | "stride"

    @property
    def is_view(self) -> bool:
        return self.kind == "view"

    def __str__(self) -> str:
        if self.is_view:
            return f"View{self.ndim}D[{self.dtype.name}{', strided' if self.layout == 'stride' else ''}]"
        return self.dtype.name


@dataclass(frozen=True)
class KernelSpec:
    """How a kernel is specialised and launched.

    ``op``: "for", "reduce" or "scan"; ``policy``: "range", "mdrange" or "team"; ``rank``: number of
    thread indices; ``params``: (name, ArgType) of the user parameters in order; ``accs``: result type
    of each reduction (a fused kernel may deliver several); ``space``: execution space name.
    """

    op: str
    policy: str
    rank: int
    params: tuple
    accs: tuple
    space: str

    def param_type(self, name: str) -> ArgType:
        for n, t in self.params:
            if n == name:
                return t
        raise KeyError(name)
