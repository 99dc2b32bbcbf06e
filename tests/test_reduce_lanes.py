"""GPU range reductions of several sums (a fused group's) run in lanes (kfuse/codegen/kernel.py ``_in_lanes``):
each thread sums a strided set of elements in registers and joins Kokkos's value once. Which kernels do is checked
on their specs without a compiler; the lane form itself runs here on the host (its spaces widened to OpenMP, and a
lane made to take several elements from 8 on), against NumPy: ranges that do not start at 0, that do not divide
into lanes, and empty ones."""
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


@pk.workunit
def lane_sum_2d(i, j, acc: pk.Acc[pk.double], x: pk.View2D[pk.double]):
    acc += x[i][j]


def _spec(wu, op="reduce", policy=64, **kwargs):
    return prepare(wu, op, policy, (), kwargs).prepared.spec


@pytest.mark.backend("null")
def test_only_gpu_range_reductions_of_several_sums_run_in_lanes():
    x = pk.View([64])
    one = _spec(lane_sum, x=x)
    several = dataclasses.replace(one, accs=one.accs * 3)
    for space in ("Cuda", "HIP"):
        assert codegen._in_lanes(dataclasses.replace(several, space=space))
        assert not codegen._in_lanes(dataclasses.replace(one, space=space))  # a single sum stays Kokkos's
    assert not codegen._in_lanes(dataclasses.replace(several, space="OpenMP"))
    loop = dataclasses.replace(_spec(lane_scale, op="for", x=x, by=2.0), space="Cuda")
    assert not codegen._in_lanes(loop)
    grid = _spec(lane_sum_2d, policy=pk.MDRangePolicy([0, 0], [8, 8]), x=pk.View([8, 8]))
    assert not codegen._in_lanes(dataclasses.replace(grid, accs=grid.accs * 2, space="Cuda"))


@pytest.fixture
def lanes_on_host(monkeypatch, tmp_path):
    """The lane form on OpenMP, a lane taking several elements once there are more than 8 lanes' worth; the C++
    written to ``tmp_path``."""
    monkeypatch.setattr(codegen, "LANE_SPACES", codegen.LANE_SPACES | {"OpenMP"})
    monkeypatch.setattr(codegen, "_LANES_BEFORE_SHARING", 3)
    monkeypatch.setenv("KFUSE_DUMP_DIR", str(tmp_path))
    pk.enable_fusion()
    yield tmp_path
    pk.disable_fusion()


def _in_lanes(folder) -> bool:
    return any("kf_lanes" in f.read_text() for f in folder.glob("*.cpp"))


@pytest.mark.parametrize("begin,end", [(0, 0), (0, 1), (0, 7), (0, 9), (0, 100), (3, 4), (7, 300), (0, 4099)])
def test_fused_sums_in_lanes_equal_numpy(lanes_on_host, begin, end):
    """Scaling steps, each followed by a sum and a count, over ``[begin, end)``: one kernel of several sums."""
    values = np.random.default_rng(end).standard_normal(4099)
    x = pk.from_numpy(values.copy())
    policy = pk.RangePolicy(begin, end)
    sums, counts = [], []
    for k in range(3):
        pk.parallel_for(policy, lane_scale, x=x, by=1.0 + k / 10)
        sums.append(pk.parallel_reduce(policy, lane_sum, x=x))
        counts.append(pk.parallel_reduce(policy, lane_count, x=x, cut=0.5))
    got_sums, got_counts = [float(s) for s in sums], [int(c) for c in counts]
    assert _in_lanes(lanes_on_host)
    v = values.copy()
    for k in range(3):
        v[begin:end] *= 1.0 + k / 10
        part = v[begin:end]
        assert got_sums[k] == pytest.approx(float(np.sum(part * part)), rel=1e-12, abs=1e-300)
        assert got_counts[k] == int(np.sum(np.arange(begin, end)[part > 0.5]))
    np.testing.assert_allclose(np.asarray(x), v, rtol=1e-15)
