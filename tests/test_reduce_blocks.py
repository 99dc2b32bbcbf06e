"""Rank-1 range reductions of several sums (a fused group's) on a CUDA device launch through the prelude's
``kf_reduce_in_blocks`` (kfuse/codegen/kernel.py ``_in_blocks``): one wave of blocks striding over the range with
the sums in registers, then one block adding the blocks' partials. Which kernels do, and what their C++ calls, is
checked on generated source without a compiler; the sums themselves run in the default space against NumPy (on a
CUDA build, the block form: ranges that do not start at 0, shorter than one block, and long enough for every thread
to take several elements at once)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import kfuse as pk
from kfuse.calls import prepare
from kfuse.codegen import kernel as codegen


@pk.workunit
def block_sum(i, acc: pk.Acc[pk.double], x: pk.View1D[pk.double]):
    acc += x[i] * x[i]


@pk.workunit
def block_count(i, acc: pk.Acc[pk.int64], x: pk.View1D[pk.double], cut: float):
    if x[i] > cut:
        acc += i


@pk.workunit
def block_scale(i, x: pk.View1D[pk.double], by: float):
    x[i] = x[i] * by


@pk.workunit
def block_sum_2d(i, j, acc: pk.Acc[pk.double], x: pk.View2D[pk.double]):
    acc += x[i][j]


def _prepared(wu, op="reduce", policy=64, **kwargs):
    return prepare(wu, op, policy, (), kwargs).prepared


def _source(prepared, spec) -> str:
    return codegen.generate(prepared.source, spec, prepared.name).source


@pytest.mark.backend("null")
def test_only_cuda_range_reductions_of_several_sums_run_in_blocks():
    x = pk.View([64])
    one = _prepared(block_sum, x=x).spec
    several = dataclasses.replace(one, accs=one.accs * 3)
    assert codegen._in_blocks(dataclasses.replace(several, space="Cuda"))
    assert not codegen._in_blocks(dataclasses.replace(one, space="Cuda"))  # a single sum stays Kokkos's
    assert not codegen._in_blocks(dataclasses.replace(several, space="HIP"))  # CUDA's shuffles: Kokkos's on HIP
    assert not codegen._in_blocks(dataclasses.replace(several, space="OpenMP"))
    loop = _prepared(block_scale, op="for", x=x, by=2.0).spec
    assert not codegen._in_blocks(dataclasses.replace(loop, space="Cuda"))
    grid = _prepared(block_sum_2d, policy=pk.MDRangePolicy([0, 0], [8, 8]), x=pk.View([8, 8])).spec
    assert not codegen._in_blocks(dataclasses.replace(grid, space="Cuda"))


def _fused_cuda_source() -> str:
    """The C++ of a scaling step, a sum and a count fused, for a CUDA device (no compiler involved)."""
    from kfuse.fuser import build
    x = pk.View([64])
    calls = [prepare(block_scale, "for", 64, (), dict(x=x, by=2.0)), prepare(block_sum, "reduce", 64, (), dict(x=x)),
             prepare(block_count, "reduce", 64, (), dict(x=x, cut=0.5))]
    source, spec, _ = build.build(calls)
    return codegen.generate(source, dataclasses.replace(spec, space="Cuda"), "fused").source


@pytest.mark.backend("null")
def test_a_cuda_reduction_of_several_sums_launches_in_blocks():
    cuda = _fused_cuda_source()
    assert "kf_reduce_in_blocks(kf_f, kf_b0, kf_e0, kf_r);" in cuda
    assert "Kokkos::parallel_reduce" not in cuda
    assert "return {kf_shfl_down(v.a0, o), kf_shfl_down(v.a1, o)};" in cuda
    prepared = _prepared(block_count, x=pk.View([64]), cut=0.5)
    single = _source(prepared, dataclasses.replace(prepared.spec, space="Cuda"))
    assert "Kokkos::parallel_reduce" in single and "kf_reduce_in_blocks" not in single and "kf_shfl_down" not in single


@pytest.mark.backend("null")
def test_several_sums_move_and_add_field_by_field():
    prepared = _prepared(block_sum, x=pk.View([64]))
    spec = dataclasses.replace(prepared.spec, accs=prepared.spec.accs * 3, space="Cuda")
    helpers = codegen._block_helpers(spec, ["x"], "i")
    assert "return {kf_shfl_down(v.a0, o), kf_shfl_down(v.a1, o), kf_shfl_down(v.a2, o)};" in helpers
    assert "dst.a0 += src.a0; dst.a1 += src.a1; dst.a2 += src.a2;" in helpers
    assert "kf_prefetch(const int64_t i) const { kf_prefetch_l2(&x(i)); }" in helpers


@pytest.fixture
def dumped(monkeypatch, tmp_path):
    """Fusion on, the generated C++ written to ``tmp_path``."""
    monkeypatch.setenv("KFUSE_DUMP_DIR", str(tmp_path))
    pk.enable_fusion()
    yield tmp_path
    pk.disable_fusion()


def _in_blocks(folder) -> bool:
    return any("kf_reduce_in_blocks(kf_f" in f.read_text() for f in folder.glob("*.cpp"))


@pytest.mark.parametrize("begin,end", [(0, 0), (0, 1), (0, 7), (0, 300), (3, 4), (7, 4099), (0, 1 << 21),
                                       (5, 2_500_003)])
def test_fused_sums_equal_numpy(dumped, begin, end):
    """Scaling steps, each followed by a sum and a count, over ``[begin, end)``: one kernel of several sums."""
    values = np.random.default_rng(end).standard_normal(max(end, 1))
    x = pk.from_numpy(values.copy())
    policy = pk.RangePolicy(begin, end)
    sums, counts = [], []
    for k in range(3):
        pk.parallel_for(policy, block_scale, x=x, by=1.0 + k / 10)
        sums.append(pk.parallel_reduce(policy, block_sum, x=x))
        counts.append(pk.parallel_reduce(policy, block_count, x=x, cut=0.5))
    got_sums, got_counts = [float(s) for s in sums], [int(c) for c in counts]
    assert _in_blocks(dumped) == (pk.get_default_space().value in codegen.BLOCK_SPACES)  # (a fused group of sums)
    v = values.copy()
    for k in range(3):
        v[begin:end] *= 1.0 + k / 10
        part = v[begin:end]
        assert got_sums[k] == pytest.approx(float(np.sum(part * part)), rel=1e-12, abs=1e-300)
        assert got_counts[k] == int(np.sum(np.arange(begin, end)[part > 0.5]))
    np.testing.assert_allclose(np.asarray(x), v, rtol=1e-15)


@pytest.mark.parametrize("n", [1, 255, 256, 257, 1 << 20])
def test_a_single_sum_equals_numpy_eager(n):
    """One sum, not fused: the kernel a program's own ``parallel_reduce`` makes."""
    values = np.random.default_rng(n).uniform(0.0, 1.0, n)
    x = pk.from_numpy(values.copy())
    got = pk.parallel_reduce(n, block_sum, x=x)
    assert got == pytest.approx(float(np.sum(values * values)), rel=1e-12)


@pk.workunit
def branchy(i, acc: pk.Acc[pk.double], x: pk.View1D[pk.double], y: pk.View1D[pk.double], z: pk.View1D[pk.double],
            w: pk.View1D[pk.double], M: pk.View2D[pk.double], k: pk.View1D[pk.int64]):
    t: float = x[k[i]] + M[i][0] + (y[i] if w[i] > 0.0 else 0.0)
    if z[i] > t:
        acc += w[i + 1]
    acc += y[i]


@pk.workunit
def stored_first(i, acc: pk.Acc[pk.double], x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    y[i] = 2.0 * x[i]
    acc += y[i]


@pytest.mark.backend("null")
def test_prefetched_views_are_the_rank1_reads_at_the_thread_index_that_always_happen():
    from kfuse.ir.lower import lowered
    x, M, k = pk.View([64]), pk.View([64, 2]), pk.View([64], dtype=pk.int64)
    prepared = _prepared(branchy, x=x, y=x, z=x, w=x, M=M, k=k)
    kernel = lowered(prepared.source, prepared.spec)
    # k[i] and w[i] (a ternary's test) always; x[k[i]] is not at i, M is 2-D, y[i] only on one branch of the
    # ternary, z[i] is the first branch's test (the last statement looked at), w[i + 1] is not at i
    assert codegen._sure_thread_loads(kernel, "i") == ["k", "w", "z"]
    prepared = _prepared(stored_first, x=x, y=pk.View([64]))
    assert codegen._sure_thread_loads(lowered(prepared.source, prepared.spec), "i") == ["x", "y"]


@pytest.mark.backend("null")
def test_a_cuda_reduction_asks_for_its_sure_reads_ahead():
    # (the three members' x are separate parameters here: no argument fusion without the transforms), the first two
    # of them only (codegen._MOST_PREFETCHED: what is asked for ahead must stay in L2 until its use)
    assert "void kf_prefetch(const int64_t i0) const { kf_prefetch_l2(&k0_x(i0)); kf_prefetch_l2(&k1_x(i0)); }" \
        in _fused_cuda_source()
