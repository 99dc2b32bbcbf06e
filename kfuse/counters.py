"""Process-wide counters behind ``pk.stats()``; every stage bumps its own."""
from __future__ import annotations

COUNTERS = ("ops_traced", "flushes", "kernels_launched", "fused_kernels_launched", "compiles", "cache_hits")

_counts = dict.fromkeys(COUNTERS, 0)


def bump(name: str, by: int = 1) -> None:
    _counts[name] = _counts.get(name, 0) + by


def snapshot() -> dict:
    return dict(_counts)


def reset() -> None:
    for k in _counts:
        _counts[k] = 0
