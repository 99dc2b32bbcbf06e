"""The Kokkos backend: kernels rendered as C++ Kokkos functors, compiled by g++ (OpenMP, Serial), nvcc
(Cuda) or hipcc (HIP) through the content-keyed compile cache, loaded with ctypes.

Its parts keep their own modules: codegen/ renders, compiler/ builds and caches, runtime/launch.py loads,
packs arguments and launches, runtime/device.py keeps GPU copies coherent around a launch.
"""
from __future__ import annotations

import contextvars
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from ..codegen.kernel import GeneratedKernel, generate
from ..progress import Batch
from ..compiler import fused as fused_store
from ..compiler import cache, toolchain
from ..errors import ArgumentError
from ..frontend.spec import KernelSpec
from ..runtime import device, kokkos_runtime
from ..runtime.launch import CompiledKernel
from .base import Backend, Lowered


@dataclass(frozen=True)
class Rendered:
    generated: GeneratedKernel
    spec: KernelSpec
    writes: tuple
    fused: bool


class KokkosBackend(Backend):
    name = "kokkos"
    persistent = True

    def __init__(self):
        self._ahead: dict = {}  # Rendered -> Future of its cache.build, from compile_ahead
        # Starts Kokkos at the first launch; other threads borrow its OpenMP instance. Bound here, not
        # wrapped in a method: every eager launch calls it.
        self.enter_thread = kokkos_runtime.enter_thread

    @property
    def compile_seconds(self) -> float:
        """README's figures: 0.4 s with g++ and the precompiled header; about 7 s through nvcc_wrapper."""
        return 7.0 if toolchain.current().device else 0.4

    def check_space(self, space: str, workunit: str) -> None:
        backends = toolchain.current().backends
        if space.upper() not in backends:
            raise ArgumentError(f"workunit '{workunit}': execution space {space} is not enabled in the Kokkos "
                                f"kfuse compiles against ({toolchain.current().include_dir}; backends: "
                                f"{', '.join(backends)}); choose another space, or build a Kokkos with it "
                                "('python -m kfuse.kokkos install --cuda ...' for Cuda; 'python -m kfuse.kokkos "
                                "status' lists what kfuse sees) or set KFUSE_KOKKOS_ROOT")

    def host_access(self, view, write: bool, overwrite: bool = False) -> None:
        device.host_access(view, write, overwrite)

    def copy(self, dst, src) -> bool:
        return device.copy(dst, src)

    def synchronize(self) -> None:
        kokkos_runtime.fence()

    def translate(self, source, spec, name):
        return generate(source, spec, name)

    def render(self, lowered: Lowered, translated=None) -> Rendered:
        generated = translated or generate(lowered.source, lowered.spec, lowered.name, lowered.restrict)
        return Rendered(generated, lowered.spec, lowered.writes, lowered.fused)

    def compile_ahead(self, rendered: list) -> None:
        """Start the compiler for each kernel not in the cache yet, up to one per CPU; ``load`` takes the result
        (or raises the compile's error) when the kernel's turn comes."""
        if self._ahead:  # hints the pipeline gave up on (their groups were blocked by a failure): drop them
            self._ahead = {r: f for r, f in self._ahead.items() if not f.done()}
        todo = [r for r in dict.fromkeys(rendered) if r not in self._ahead]
        if len(todo) < 2:
            return
        cpus = len(os.sched_getaffinity(0))  # the CPUs this process may use (taskset, containers), not the host's
        pool = ThreadPoolExecutor(max_workers=min(len(todo), cpus), thread_name_prefix="kfuse-cc")
        batch = Batch(len(todo))
        for r in todo:
            # each compile bumps the counters of the runtime in charge here, so it runs in a copy of this context
            self._ahead[r] = pool.submit(contextvars.copy_context().run, cache.build, r.generated.name,
                                         r.generated.source, batch)
        pool.shutdown(wait=False)

    def built(self, rendered: Rendered) -> bool:
        return cache.built(rendered.generated.source)

    def load(self, rendered: Rendered) -> CompiledKernel:
        ahead = self._ahead.pop(rendered, None)
        artifact = ahead.result() if ahead is not None else None  # a compile error is raised here, in turn
        return CompiledKernel(rendered.generated, rendered.spec, fused=rendered.fused, writes=rendered.writes,
                              artifact=artifact)

    def stored(self, digest: str):
        entry = fused_store.load(digest)
        if entry is None:
            return None
        generated, spec, arg_index, writes = entry
        return Rendered(generated, spec, tuple(writes), True), tuple(arg_index)

    def store(self, digest: str, rendered: Rendered, arg_index: tuple) -> None:
        fused_store.store(digest, (rendered.generated, rendered.spec, arg_index, rendered.writes))


KOKKOS = KokkosBackend()  # the process's one: specialisations and their kernels are kept per backend instance
