"""The counters behind ``pk.stats()``; every stage bumps its own, in the runtime in charge (kfuse/context.py)."""
from __future__ import annotations

from . import context

COUNTERS = ("ops_traced", "calls_untraced", "calls_captured", "array_ops_recorded", "array_ops_on_host", "flushes",
            "kernels_launched", "fused_kernels_launched", "escaped_calls", "printing_calls", "compiles", "cache_hits",
            "kernels_loaded", "kernels_unloaded", "unstored_arrays",
            # profitability (fuser/profit.py): group runs timed for a measurement, measurements completed,
            # decisions read from the cache folder, group runs whose members ran apart by a decision
            "profit_trials", "profit_decided", "profit_remembered", "groups_unfused",
            # GPU execution spaces (runtime/device.py): copies between a View's host memory and its device copy
            "copies_to_device", "bytes_to_device", "copies_to_host", "bytes_to_host")


def fresh() -> dict:
    return dict.fromkeys(COUNTERS, 0)


def bump(name: str, by: int = 1) -> None:
    context.current().counts[name] += by  # every name is in COUNTERS


def snapshot() -> dict:
    return dict(context.current().counts)


def reset() -> None:
    counts = context.current().counts
    for k in counts:
        counts[k] = 0
