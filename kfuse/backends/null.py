"""A backend that runs nothing: it type-checks kernels as the Kokkos backend does, then only records each
launch. Schedule tests use it to see which calls form which launches, in milliseconds and without a
compiler; the data it would have computed stays as it was (reductions give 0)."""
from __future__ import annotations

from dataclasses import dataclass

from .. import counters
from ..codegen.kernel import generate
from .base import Backend, Kernel, Lowered


@dataclass(frozen=True)
class Launch:
    name: str
    fused: bool
    bounds: tuple


class NullKernel(Kernel):
    def __init__(self, lowered: Lowered, launches: list):
        self.name = lowered.name
        self.fused = lowered.fused
        self._zeros = tuple(acc.np.type(0).item() for acc in lowered.spec.accs)
        self._launches = launches

    def launch(self, bounds: tuple, args: tuple) -> tuple:
        self._launches.append(Launch(self.name, self.fused, bounds))
        counters.bump("kernels_launched")
        if self.fused:
            counters.bump("fused_kernels_launched")
        return self._zeros


class NullBackend(Backend):
    name = "null"
    host_only = True

    def __init__(self):
        self.launches: list[Launch] = []

    def translate(self, source, spec, name):
        generate(source, spec, name)  # the type check the other backends do
        return None

    def render(self, lowered: Lowered, translated=None) -> Lowered:
        return lowered

    def load(self, rendered: Lowered) -> NullKernel:
        return NullKernel(rendered, self.launches)
