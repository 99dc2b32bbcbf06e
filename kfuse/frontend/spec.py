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
    atomic: bool = False  # a View with PyKokkos's Atomic trait: the kernel updates its elements atomically

    @property
    def is_view(self) -> bool:
        return self.kind == "view"

    def __str__(self) -> str:
        if self.is_view:
            traits = (", strided" if self.layout == "stride" else "") + (", atomic" if self.atomic else "")
            return f"View{self.ndim}D[{self.dtype.name}{traits}]"
        return self.dtype.name

    def to_json(self) -> dict:
        data = {"kind": self.kind, "dtype": self.dtype.name, "ndim": self.ndim, "layout": self.layout}
        return {**data, "atomic": True} if self.atomic else data

    @classmethod
    def from_json(cls, data) -> ArgType:
        """Inverse of ``to_json``; ValueError for anything else (cache files are checked, never trusted)."""
        keys = ["dtype", "kind", "layout", "ndim"]
        _expect(isinstance(data, dict) and sorted(k for k in data if k != "atomic") == keys
                and data.get("atomic", False) in (True, False) and len(data) - len(keys) in (0, 1)
                and data["kind"] in ("view", "scalar") and data["dtype"] in DType.__members__
                and type(data["ndim"]) is int and data["ndim"] >= 0 and data["layout"] in ("", "right", "stride"),
                "an argument type", data)
        return cls(data["kind"], DType[data["dtype"]], data["ndim"], data["layout"], data.get("atomic", False) is True)


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

    def to_json(self) -> dict:
        return {"op": self.op, "policy": self.policy, "rank": self.rank,
                "params": [[n, t.to_json()] for n, t in self.params], "accs": [d.name for d in self.accs],
                "space": self.space}

    @classmethod
    def from_json(cls, data) -> KernelSpec:
        """Inverse of ``to_json``; ValueError for anything else (cache files are checked, never trusted)."""
        _expect(isinstance(data, dict) and sorted(data) == ["accs", "op", "params", "policy", "rank", "space"]
                and data["op"] in ("for", "reduce", "scan") and data["policy"] in ("range", "mdrange", "team")
                and type(data["rank"]) is int and data["rank"] >= 1 and isinstance(data["space"], str)
                and isinstance(data["params"], list)
                and all(isinstance(p, list) and len(p) == 2 and isinstance(p[0], str) for p in data["params"])
                and isinstance(data["accs"], list) and all(a in DType.__members__ for a in data["accs"]),
                "a kernel specialisation", data)
        return cls(data["op"], data["policy"], data["rank"],
                   tuple((n, ArgType.from_json(t)) for n, t in data["params"]),
                   tuple(DType[a] for a in data["accs"]), data["space"])


def _expect(ok: bool, what: str, data) -> None:
    if not ok:
        raise ValueError(f"not {what}: {str(data)[:200]}")
