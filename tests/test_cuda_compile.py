"""The C++ kfuse writes for a CUDA device compiles with nvcc: one kernel of each form the GPU code paths print (block
reductions with their leading loads, bounds-checked or not, a single sum's too; a queued range loop; divisions checked
on the host; team scratch memory checked on the host; rows in lanes; a 2-D sum through Kokkos), compiled, not run,
against the CUDA Kokkos install named by ``KFUSE_TEST_CUDA_KOKKOS``. A machine with nvcc and no GPU can check its
CUDA code this way before a GPU is at hand (README, "Checking CUDA code without a GPU": building such a Kokkos without
a GPU driver); on a GPU machine the CUDA suite runs the same kernels. Skipped where the variable is not set."""
from __future__ import annotations

import dataclasses
import os

import pytest

import kfuse as pk
import test_lanes
import test_queued_launch
import test_reduce_blocks
from kfuse.calls import prepare
from kfuse.codegen import kernel as codegen
from kfuse.compiler import cache

CUDA_KOKKOS = os.environ.get("KFUSE_TEST_CUDA_KOKKOS")
pytestmark = [pytest.mark.backend("null"),
              pytest.mark.skipif(not CUDA_KOKKOS, reason="KFUSE_TEST_CUDA_KOKKOS names no CUDA Kokkos install")]
N = 64


def _cuda(wu, op: str, policy, **kwargs) -> str:
    prepared = prepare(wu, op, policy, (), kwargs).prepared
    return codegen.generate(prepared.source, dataclasses.replace(prepared.spec, space="Cuda"), prepared.name).source


def _sources() -> dict:
    blocks, queued, lanes = test_reduce_blocks, test_queued_launch, test_lanes
    x, y, z, w = (pk.View([N]) for _ in range(4))
    k = pk.View([N], pk.int64)
    return {
        "several sums in blocks": blocks._fused_cuda_source(),
        "leading loads before a store": blocks._with_a_sum_cuda_source(blocks.loads_then_store, x=x, y=y, z=z, w=w,
                                                                      cut=0.5),
        "a store before the reads": blocks._with_a_sum_cuda_source(blocks.stored_before_read, x=x, y=y),
        "a queued range loop": _cuda(queued.scaled, "for", N, x=x, y=y, by=2.0),
        "divisions checked on the host": _cuda(queued.halved_twice, "for", N, k=k, by=3, step=2),
        "team scratch checked on the host": queued._team_source(queued.staged, 16 * N, x=pk.View([N, N]), y=x,
                                                                width=N),
        "rows in lanes": _cuda(lanes.lanes_row, "for", 4, **lanes._matrix()),
        "a single sum in blocks": _cuda(queued.summed, "reduce", N, x=x),
        "a 2-D sum through Kokkos": _cuda(blocks.block_sum_2d, "reduce", pk.MDRangePolicy([0, 0], [8, 8]),
                                          x=pk.View([8, 8])),
    }


def test_cuda_sources_of_every_gpu_form_compile_with_nvcc(monkeypatch, tmp_path):
    monkeypatch.setenv("KFUSE_KOKKOS_ROOT", CUDA_KOKKOS)
    monkeypatch.setenv("KFUSE_CACHE_DIR", str(tmp_path))
    sources = _sources()
    with monkeypatch.context() as checked:
        checked.setenv("KFUSE_BOUNDS_CHECK", "1")
        sources["several sums in blocks, bounds checked"] = test_reduce_blocks._fused_cuda_source()
    assert all("using KfExec = Kokkos::Cuda;" in source for source in sources.values())
    for number, (form, source) in enumerate(sources.items()):
        artifact = cache.build(f"cuda_form_{number}", source)
        assert artifact.library.stat().st_size > 0, form
