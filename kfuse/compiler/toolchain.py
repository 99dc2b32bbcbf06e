"""Which Kokkos and which C++ compiler kernels are built with, and the exact command lines.

Kernels compile against the headers and link the ``libkokkoscore.so`` of the Kokkos that ``kfuse.kokkos``
selects (``KFUSE_KOKKOS_ROOT``, this Python environment's, or a per-user build), so every kernel shares one
Kokkos runtime. A
precompiled header of Kokkos + kfuse's prelude cuts a cold kernel compile from about 1.1 s to 0.4 s
here (measured with g++ 12 -O3).
"""
from __future__ import annotations

import functools
import hashlib
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .. import config
from ..errors import KfuseError
from ..kokkos import installs, provision

PRELUDE = Path(__file__).resolve().parent.parent / "codegen" / "kfuse_prelude.hpp"


@dataclass(frozen=True)
class Toolchain:
    cxx: str
    cxx_version: str
    include_dir: str
    lib_dir: str
    kokkos_version: str
    backends: tuple
    opt_flags: tuple
    arch: str = ""

    @property
    def device(self) -> str:
        """The GPU backend this Kokkos was built with ("CUDA", "HIP") or "" for a host-only Kokkos."""
        return next((b for b in ("CUDA", "HIP") if b in self.backends), "")

    @property
    def uses_pch(self) -> bool:
        """g++ precompiled headers; nvcc and hipcc get the prelude as a plain -include."""
        return not self.device

    @property
    def compile_flags(self) -> list[str]:
        common = [*self.opt_flags, "-std=c++17", "-w", f"-I{self.include_dir}"]
        if self.device == "CUDA":  # through Kokkos's nvcc_wrapper: host flags are forwarded to the host compiler
            arch = [f"-arch={self.arch}"] if self.arch else []
            # -fmad=false: no multiply-add contraction, so a fused kernel (where a product and a sum meet in one
            # body) rounds exactly like the unfused kernels, and like the host.
            return [*common, *arch, "--expt-relaxed-constexpr", "--expt-extended-lambda", "-fmad=false",
                    "-fopenmp", "-Xcompiler", "-fPIC", "-Xcompiler", "-fno-tree-slp-vectorize"]
        if self.device == "HIP":  # generated, not tested here (no AMD GPU)
            arch = [f"--offload-arch={self.arch}"] if self.arch else []
            return [*common, *arch, "-fopenmp", "-fPIC"]
        return [*common, *self._gcc_only, "-fopenmp", "-fPIC"]

    @property
    def _gcc_only(self) -> list[str]:
        """g++ 12's basic-block (SLP) vectoriser drops a float32 rounding: a value stored to a float32 View and
        summed as a double was summed unrounded (the fuzzer's case 1362 of seed 24863: to_f32, fsum, to_f32, fsum
        fused; -O3 and -O2 wrong, -O1, -O3 -fno-tree-slp-vectorize and -O3 without __restrict__ right). Loop
        vectorisation stays on. Through nvcc (a CUDA Kokkos compiles host kernels too) the host g++ gets it with
        -Xcompiler."""
        is_gcc = "g++" in self.cxx_version or "GCC" in self.cxx_version
        return ["-fno-tree-slp-vectorize"] if is_gcc else []

    @property
    def link_flags(self) -> list[str]:
        return [f"-L{self.lib_dir}", "-lkokkoscore", f"-Wl,-rpath,{self.lib_dir}"]

    @property
    def fingerprint(self) -> str:
        """Everything about the toolchain that changes a binary, for the cache key."""
        return "|".join([self.cxx, self.cxx_version, self.include_dir, self.lib_dir, self.kokkos_version,
                         ",".join(self.backends), " ".join(self.compile_flags), " ".join(self.link_flags)])


def _compiler_for(base: Path, backends: tuple, cxx: str) -> str:
    """Kokkos built for a GPU must be compiled with its GPU compiler: nvcc_wrapper (installed with Kokkos)
    or hipcc. An explicit KFUSE_CXX other than the default wins."""
    if cxx != config.CXX.default:
        return cxx
    if "CUDA" in backends:
        wrapper = base / "bin" / "nvcc_wrapper"
        return str(wrapper) if wrapper.exists() else "nvcc_wrapper"
    if "HIP" in backends:
        return "hipcc"
    return cxx


@functools.lru_cache(maxsize=None)
def _detect(kokkos: installs.Install, cxx: str, opt: str, arch: str) -> Toolchain:
    cxx = _compiler_for(Path(kokkos.root), kokkos.backends, cxx)
    compiler = shutil.which(cxx)
    if compiler is None:
        raise KfuseError(f"C++ compiler '{cxx}' not found (g++ with OpenMP is a system requirement of kfuse: install "
                         "it with the system's package manager, or set KFUSE_CXX)")
    first = subprocess.run([compiler, "--version"], capture_output=True, text=True).stdout.splitlines()
    return Toolchain(cxx=compiler, cxx_version=first[0] if first else "?", include_dir=kokkos.include_dir,
                     lib_dir=kokkos.lib_dir, kokkos_version=kokkos.version, backends=kokkos.backends,
                     opt_flags=tuple(opt.split()), arch=arch)


def current() -> Toolchain:
    return _detect(provision.selected(), config.CXX.get(), config.OPT_FLAGS.get(), config.GPU_ARCH.get())


def pch_key(tc: Toolchain) -> str:
    return hashlib.sha256((tc.fingerprint + PRELUDE.read_text()).encode()).hexdigest()[:20]
