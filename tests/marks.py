"""Markers for tests of features one toolchain has and another has not (the reason says which)."""
from __future__ import annotations

import pytest

from kfuse.compiler import toolchain

GPU_KOKKOS = bool(toolchain.current().device)  # the selected Kokkos compiles with nvcc or hipcc

#: Tests of a forked child running kernels: with a GPU-enabled Kokkos every kernel ends in a global fence that
#: reaches the GPU context the parent made, which CUDA forbids a child to use.
host_kokkos_only = pytest.mark.skipif(GPU_KOKKOS, reason="a forked child cannot use its parent's CUDA context (the "
                                      "selected Kokkos is GPU-enabled)")
#: Tests of g++'s precompiled header (nvcc and hipcc get the prelude as a plain -include: no header to damage).
uses_pch = pytest.mark.skipif(GPU_KOKKOS, reason="the selected Kokkos compiles with nvcc/hipcc: no precompiled header")
