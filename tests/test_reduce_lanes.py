"""GPU range reductions run in lanes (kfuse/codegen/kernel.py ``_in_lanes``): each thread sums a strided set of
elements in registers and joins Kokkos's value once. The generated C++ is checked for the GPU spaces without a
compiler; the lane form itself runs here on the host (its spaces widened to OpenMP, and a lane made to take
several elements from 8 on), eager and fused, against NumPy: scalar and fused several-sum reductions, ranges
that do not start at 0, that do not divide into lanes, and empty ones."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import kfuse as pk
from kfuse.calls import prepare
from kfuse.codegen import kernel as codegen


@pk.workunit
def lane_sum(i, acc: pk.Acc[pk.double], x: pk.View1D[pk.double]):
    acc += x[i] * x[i]


@pk.workunit
def lane_count(i, acc: pk.Acc[pk.int64], x: pk.View1D[pk.double], cut: float):
    if x[i] > cut:
        acc += i


@pk.workunit
def lane_scale(i, x: pk.View1D[pk.double], by: float):
    x[i] = x[i] * by


def _cpp(wu, space: str, policy=64, op="reduce", **kwargs) -> str:
    prepared = prepare(wu, op, policy, (), kwargs).prepared
    spec = dataclasses.replace(prepared.spec, space=space)
    return codegen.generate(prepared.source, spec, prepared.name).source


@pytest.mark.backend("null")
@pytest.mark.parametrize("space", ["Cuda", "HIP"])
def test_gpu_range_reductions_are_generated_in_lanes(space):
    x = pk.View([64])
    cpp = _cpp(lane_sum, space, x=x)
    assert "for (int64_t kf_k = 0; kf_k < kf_per_lane; ++kf_k)" in cpp and "kf_lane % 32" in cpp
    assert "double kf_local = double();" in cpp and "kf_acc += kf_local;" in cpp
    assert "RangePolicy<KfExec, Kokkos::IndexType<int64_t>>(0, kf_lanes)" in cpp


@pk.workunit
def lane_sum_2d(i, j, acc: pk.Acc[pk.double], x: pk.View2D[pk.double]):
    acc += x[i][j]


@pytest.mark.backend("null")
def test_host_reductions_gpu_loops_and_gpu_2d_reductions_are_not_in_lanes():
    x = pk.View([64])
    assert "kf_lane" not in _cpp(lane_sum, "OpenMP", x=x)
    assert "kf_lane" not in _cpp(lane_scale, "Cuda", op="for", x=x, by=2.0)
    assert "kf_lane" not in _cpp(lane_sum_2d, "Cuda", policy=pk.MDRangePolicy([0, 0], [8, 8]), x=pk.View([8, 8]))


@pytest.fixture
def lanes_on_host(monkeypatch):
    """The lane form on OpenMP, a lane taking several elements once there are more than 8 lanes' worth."""
    monkeypatch.setattr(codegen, "LANE_SPACES", codegen.LANE_SPACES | {"OpenMP"})
    monkeypatch.setattr(codegen, "_LANES_BEFORE_SHARING", 3)


@pytest.fixture(params=["eager", "fused"])
def mode(request):
    if request.param == "fused":
        pk.enable_fusion()
    yield request.param
    pk.disable_fusion()


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 100, 1000, 4099])
def test_scalar_sums_in_lanes_equal_numpy(lanes_on_host, mode, n):
    values = np.random.default_rng(n).standard_normal(n)
    x = pk.from_numpy(values.copy())
    got = float(pk.parallel_reduce(n, lane_sum, x=x))
    assert got == pytest.approx(float(np.sum(values * values)), rel=1e-12, abs=1e-12)
    cut = 0.5
    want = int(np.flatnonzero(values > cut).sum())
    assert int(pk.parallel_reduce(n, lane_count, x=x, cut=cut)) == want


@pytest.mark.parametrize("begin,end", [(5, 5), (3, 4), (7, 300), (100, 1000)])
def test_a_range_not_from_zero_sums_its_own_elements(lanes_on_host, mode, begin, end):
    values = np.arange(1000, dtype=np.float64) % 17 - 8
    x = pk.from_numpy(values.copy())
    got = float(pk.parallel_reduce(pk.RangePolicy(begin, end), lane_sum, x=x))
    assert got == float(np.sum(values[begin:end] ** 2))  # small integers: exact in any order
    want = int(np.sum(np.arange(begin, end)[values[begin:end] > 0.5]))
    assert int(pk.parallel_reduce(pk.RangePolicy(begin, end), lane_count, x=x, cut=0.5)) == want


def test_a_fused_group_of_several_sums_in_lanes_equals_numpy(lanes_on_host):
    """BabelStream's shape: a loop of updates, each followed by a sum, fused into one kernel of several sums."""
    n = 1003
    values = np.random.default_rng(3).standard_normal(n)
    x = pk.from_numpy(values.copy())
    pk.enable_fusion()
    try:
        sums = []
        for k in range(5):
            pk.parallel_for(n, lane_scale, x=x, by=1.0 + k / 10)
            sums.append(pk.parallel_reduce(n, lane_sum, x=x))
        got = [float(s) for s in sums]
        assert pk.stats()["fused_kernels_launched"] >= 1
    finally:
        pk.disable_fusion()
    want, v = [], values.copy()
    for k in range(5):
        v = v * (1.0 + k / 10)
        want.append(float(np.sum(v * v)))
    np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(x), v, rtol=1e-15)
