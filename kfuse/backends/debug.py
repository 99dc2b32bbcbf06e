"""The Debug space's backend: the user's own Python function, run one thread index at a time
(kfuse/runtime/debug.py), so print() and pdb work inside kernels. Calls in this space are never fused."""
from __future__ import annotations

import time
from types import SimpleNamespace

from ..policies import MDRangePolicy, RangePolicy, TeamPolicy
from ..runtime.debug import run_debug
from .base import Backend, Kernel, Lowered


class DebugKernel(Kernel):
    fused = False

    def __init__(self, lowered: Lowered):
        self.name = lowered.name
        self._prepared = SimpleNamespace(workunit=lowered.workunit, spec=lowered.spec)
        self._seconds = 0.0

    def launch(self, bounds: tuple, args: tuple) -> tuple:
        call = SimpleNamespace(prepared=self._prepared, policy=_policy(self._prepared.spec, bounds))
        start = time.perf_counter()
        results = run_debug(call, args)
        self._seconds = time.perf_counter() - start
        return results

    @property
    def last_seconds(self) -> float:
        return self._seconds


def _policy(spec, bounds: tuple):
    """The policy whose ``policy_slots`` are ``bounds``."""
    if spec.policy == "range":
        return RangePolicy(*bounds)
    if spec.policy == "mdrange":
        return MDRangePolicy(list(bounds[:spec.rank]), list(bounds[spec.rank:]))
    return TeamPolicy(bounds[0], bounds[1])


class DebugBackend(Backend):
    name = "debug"

    def render(self, lowered: Lowered, translated=None) -> Lowered:
        return lowered

    def load(self, rendered: Lowered) -> DebugKernel:
        return DebugKernel(rendered)


DEBUG = DebugBackend()
