"""Run a trace partition: plan groups (fused when fusion is on), launch them, deliver Futures."""
from __future__ import annotations

from ..errors import KfuseError
from ..runtime.dispatch import execute, raise_deferred


def run_partition(calls: list) -> None:
    for call in calls:
        try:
            value = execute(call)
        except KfuseError as exc:
            raise_deferred(call, exc)
        if call.result is not None:
            call.result.set_result(value)
