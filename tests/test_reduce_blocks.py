"""Rank-1 range reductions of several sums (a fused group's) on a CUDA device launch through the prelude's
``kf_reduce_in_blocks`` (kfuse/codegen/blocks.py): one wave of blocks striding over the range with the sums in
registers, each thread loading its elements' leading loads before running their bodies, then one block adding the
blocks' partials. Which kernels do, which loads are loaded first, and what their C++ calls, is checked on generated
source without a compiler; the sums themselves run in the default space against NumPy (on a CUDA build, the block
form: ranges that do not start at 0, shorter than one block, and long enough for every thread to take several
elements at once)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import kfuse as pk
from kfuse.calls import prepare
from kfuse.codegen import blocks
from kfuse.codegen import kernel as codegen
from kfuse.fuser import build
from kfuse.ir.lower import lowered
from kfuse.ir.nodes import ViewType
from kfuse.types import DType


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
def test_only_cuda_rank1_range_reductions_run_in_blocks():
    x = pk.View([64])
    one = _prepared(block_sum, x=x).spec
    several = dataclasses.replace(one, accs=one.accs * 3)
    assert blocks.in_blocks(dataclasses.replace(several, space="Cuda"))
    assert blocks.in_blocks(dataclasses.replace(one, space="Cuda"))
    assert not blocks.in_blocks(dataclasses.replace(several, space="HIP"))  # CUDA's shuffles: Kokkos's on HIP
    assert not blocks.in_blocks(dataclasses.replace(several, space="OpenMP"))
    loop = _prepared(block_scale, op="for", x=x, by=2.0).spec
    assert not blocks.in_blocks(dataclasses.replace(loop, space="Cuda"))
    grid = _prepared(block_sum_2d, policy=pk.MDRangePolicy([0, 0], [8, 8]), x=pk.View([8, 8])).spec
    assert not blocks.in_blocks(dataclasses.replace(grid, space="Cuda"))


def _fused_cuda_source() -> str:
    """The C++ of a scaling step, a sum and a count fused, for a CUDA device (no compiler involved)."""
    x = pk.View([64])
    calls = [prepare(block_scale, "for", 64, (), dict(x=x, by=2.0)), prepare(block_sum, "reduce", 64, (), dict(x=x)),
             prepare(block_count, "reduce", 64, (), dict(x=x, cut=0.5))]
    source, spec, _ = build.build(calls)
    return codegen.generate(source, dataclasses.replace(spec, space="Cuda"), "fused").source


@pytest.mark.backend("null")
def test_a_cuda_reduction_launches_in_blocks_asking_ahead_only_for_several_sums():
    cuda = _fused_cuda_source()
    assert "kf_reduce_in_blocks(kf_f, kf_b0, kf_e0, kf_r);" in cuda
    assert "Kokkos::parallel_reduce" not in cuda
    assert "return {kf_shfl_down(v.a0, o), kf_shfl_down(v.a1, o)};" in cuda
    assert "kf_prefetch_l2(" in cuda
    prepared = _prepared(block_count, x=pk.View([64]), cut=0.5)
    single = _source(prepared, dataclasses.replace(prepared.spec, space="Cuda"))
    assert "kf_reduce_in_blocks(kf_f, kf_b0, kf_e0, kf_r);" in single and "Kokkos::parallel_reduce" not in single
    assert "static __device__ void kf_add(value_type& dst, const value_type& src) { dst += src; }" in single
    assert "void kf_prefetch(const int64_t i) const {  }" in single


@pytest.mark.backend("null")
def test_several_sums_move_and_add_field_by_field():
    prepared = _prepared(block_sum, x=pk.View([64]))
    spec = dataclasses.replace(prepared.spec, accs=prepared.spec.accs * 3, space="Cuda")
    helpers = blocks.block_helpers(spec, blocks.LeadingLoads("i", ("x",), 1), ["x"], {"x": ViewType(DType.float64, 1)})
    assert "return {kf_shfl_down(v.a0, o), kf_shfl_down(v.a1, o), kf_shfl_down(v.a2, o)};" in helpers
    assert "dst.a0 += src.a0; dst.a1 += src.a1; dst.a2 += src.a2;" in helpers
    assert "kf_prefetch(const int64_t i) const { kf_prefetch_l2(&x(i)); }" in helpers
    assert "KfLoaded kf_load(const int64_t i) const { return {x(i)}; }" in helpers


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
    assert _in_blocks(dumped) == (pk.get_default_space().value in blocks.BLOCK_SPACES)  # (a fused group of sums)
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
    x, M, k = pk.View([64]), pk.View([64, 2]), pk.View([64], dtype=pk.int64)
    prepared = _prepared(branchy, x=x, y=x, z=x, w=x, M=M, k=k)
    kernel = lowered(prepared.source, prepared.spec)
    # k[i] and w[i] (a ternary's test) always; x[k[i]] is not at i, M is 2-D, y[i] only on one branch of the
    # ternary, z[i] is the first branch's test (the last statement looked at), w[i + 1] is not at i
    assert blocks.sure_thread_loads(kernel, "i") == ["k", "w", "z"]
    prepared = _prepared(stored_first, x=x, y=pk.View([64]))
    assert blocks.sure_thread_loads(lowered(prepared.source, prepared.spec), "i") == ["x", "y"]


@pytest.mark.backend("null")
def test_a_cuda_reduction_asks_for_its_sure_reads_ahead():
    # (the three members' x are separate parameters here: no argument fusion without the transforms), the first two
    # of them only (blocks.MOST_PREFETCHED: what is asked for ahead must stay in L2 until its use)
    assert "void kf_prefetch(const int64_t i0) const { kf_prefetch_l2(&k0_x(i0)); kf_prefetch_l2(&k1_x(i0)); }" \
        in _fused_cuda_source()


@pk.workunit
def loads_then_store(i, acc: pk.Acc[pk.double], x: pk.View1D[pk.double], y: pk.View1D[pk.double],
                     z: pk.View1D[pk.double], w: pk.View1D[pk.double], cut: float):
    t: float = x[i] * 2.0
    u: float = z[i] if t > cut else 0.0
    y[i] = t + w[i]
    acc += x[i] + y[i] + u


@pk.workunit
def stored_before_read(i, acc: pk.Acc[pk.double], x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    y[i] = 1.0
    acc += x[i] + y[i]


@pk.workunit
def atomic_first(i, acc: pk.Acc[pk.double], x: pk.View1D[pk.double], n: pk.View1D[pk.double]):
    t: float = pk.atomic_fetch_add(n, [0], 1.0)
    acc += x[i] + t


def _leading(wu, **kwargs):
    prepared = _prepared(wu, **kwargs)
    return blocks.leading_loads(lowered(prepared.source, prepared.spec), "i", bounds_check=False)


@pytest.mark.backend("null")
def test_leading_loads_are_the_reads_at_the_index_before_the_first_store_and_whatever_the_data():
    x = pk.View([64])
    # x[i] and w[i] (the store's value) come first; z[i] only on one branch of the ternary; after the store, none
    assert _leading(loads_then_store, x=x, y=pk.View([64]), z=x, w=pk.View([64]), cut=0.5) == \
        blocks.LeadingLoads("i", ("x", "w"), 3)
    assert _leading(stored_before_read, x=x, y=pk.View([64])) == blocks.LeadingLoads("i", (), 1)
    assert _leading(atomic_first, x=x, n=pk.View([1])) == blocks.LeadingLoads("i", (), 0)  # effects end them


def _with_a_sum_cuda_source(wu, **kwargs) -> str:
    """The C++ of ``wu``'s call fused with a sum of its ``x`` after it (two sums: in blocks), for a CUDA device."""
    calls = [prepare(wu, "reduce", 64, (), kwargs), prepare(block_sum, "reduce", 64, (), dict(x=kwargs["x"]))]
    source, spec, _ = build.build(calls)
    return codegen.generate(source, dataclasses.replace(spec, space="Cuda"), "fused").source


@pytest.mark.backend("null")
def test_a_block_reduction_reads_its_leading_loads_loaded_and_every_later_read_from_memory():
    x, y, z, w = (pk.View([64]) for _ in range(4))
    cuda = _with_a_sum_cuda_source(loads_then_store, x=x, y=y, z=z, w=w, cut=0.5)
    assert "struct KfLoaded { double l0; double l1; };" in cuda
    assert "KfLoaded kf_load(const int64_t i0) const { return {k0_x(i0), k0_w(i0)}; }" in cuda
    assert "operator()(const int64_t i0, const KfLoaded& kf_in, value_type& kf_acc) const {" in cuda
    assert "k0_t = (kf_in.l0 * 2.0);" in cuda
    # only one branch reads z[i]: read there; after the store everything is read again (y[i] is the stored value)
    assert "k0_u = ((k0_t > k0_cut) ? static_cast<double>(k0_z(i0)) : static_cast<double>(0.0));" in cuda
    assert "k0_y(i0) = (k0_t + kf_in.l1);" in cuda
    assert "k0_acc += ((k0_x(i0) + k0_y(i0)) + k0_u);" in cuda
    assert "k1_acc += (k1_x(i0) * k1_x(i0));" in cuda
    stored = _with_a_sum_cuda_source(stored_before_read, x=x, y=y)
    assert "struct KfLoaded {};" in stored and "return {};" in stored
    assert "k0_acc += (k0_x(i0) + k0_y(i0));" in stored


@pytest.mark.backend("null")
def test_under_bounds_checks_a_block_reduction_loads_nothing_first(monkeypatch):
    monkeypatch.setenv("KFUSE_BOUNDS_CHECK", "1")
    x, y, z, w = (pk.View([64]) for _ in range(4))
    cuda = _with_a_sum_cuda_source(loads_then_store, x=x, y=y, z=z, w=w, cut=0.5)
    assert "struct KfLoaded {};" in cuda and "kf_in.l" not in cuda and "kf_reduce_in_blocks" in cuda


@pytest.mark.parametrize("begin,end", [(0, 5), (3, 1000), (0, 1 << 20)])
def test_fused_sums_whose_bodies_store_before_reading_equal_numpy(dumped, begin, end):
    """A body that loads, stores, then reads what it stored, fused with a sum after it: the loads taken first
    (on a CUDA build) are those before the store, and the sums see the stored values."""
    rng = np.random.default_rng(end)
    xs, zs, ws = (rng.standard_normal(end) for _ in range(3))
    x, y, z, w = pk.from_numpy(xs.copy()), pk.zeros(end), pk.from_numpy(zs.copy()), pk.from_numpy(ws.copy())
    policy = pk.RangePolicy(begin, end)
    first = pk.parallel_reduce(policy, loads_then_store, x=x, y=y, z=z, w=w, cut=0.5)
    second = pk.parallel_reduce(policy, stored_before_read, x=x, y=y)
    third = pk.parallel_reduce(policy, block_sum, x=y)
    got = [float(first), float(second), float(third)]
    assert _in_blocks(dumped) == (pk.get_default_space().value in blocks.BLOCK_SPACES)
    part = slice(begin, end)
    t = xs[part] * 2.0
    stored = t + ws[part]
    want = [np.sum(xs[part] + stored + np.where(t > 0.5, zs[part], 0.0)), np.sum(xs[part] + 1.0),
            np.sum(np.ones(end - begin))]
    assert got == pytest.approx(want, rel=1e-12)
    want_y = np.zeros(end)
    want_y[part] = 1.0
    np.testing.assert_array_equal(np.asarray(y), want_y)


@pk.workunit
def ordered_then_stored(i, acc: pk.Acc[pk.double], x: pk.View1D[pk.double], y: pk.View1D[pk.double], cut: float):
    t: float = x[i] * 3.0 if x[i] > cut else x[i]
    x[i] = t - 1.0
    y[i] = x[i] * 2.0  # the stored x[i], not the one loaded first
    acc += y[i] * x[i]


@pk.workunit
def ordered_sum(i, acc: pk.Acc[pk.double], y: pk.View1D[pk.double]):
    acc += y[i] / 7.0


def test_the_block_order_on_the_host_gives_eager_and_fused_sums_alike(monkeypatch, tmp_path):
    """The fuzzer's setting (kfuse/check/__main__.py): host reductions, single sums too, run in blocks' order with
    their leading loads loaded first (the prelude's ``kf_reduce_in_order``); eager and fused sums agree bit for bit
    and with NumPy, and the stored Views hold what the bodies stored. On a host space whatever the default (on a
    GPU a sum's order is the device's)."""
    pk.set_default_space(pk.OpenMP)
    monkeypatch.setattr(blocks, "BLOCK_SPACES", blocks.BLOCK_SPACES | {"OpenMP", "Serial"})
    monkeypatch.setattr(blocks, "SINGLE_SUM_SPACES", blocks.SINGLE_SUM_SPACES | {"OpenMP", "Serial"})
    monkeypatch.setenv("KFUSE_DUMP_DIR", str(tmp_path))
    xs = np.random.default_rng(3).standard_normal(1003)

    def run(fused: bool) -> tuple:
        x, y = pk.from_numpy(xs.copy()), pk.zeros(xs.size)
        if fused:
            pk.enable_fusion()
        try:
            first = pk.parallel_reduce(xs.size, ordered_then_stored, x=x, y=y, cut=0.25)
            second = pk.parallel_reduce(xs.size, ordered_sum, y=y)
            return float(first), float(second), np.asarray(x).copy(), np.asarray(y).copy()
        finally:
            pk.disable_fusion()

    eager, fused = run(False), run(True)
    sources = [f.read_text() for f in tmp_path.glob("*.cpp")]
    assert sum("kf_reduce_in_order(kf_f" in s for s in sources) == 3  # the two kernels eager, and fused
    assert eager[:2] == fused[:2]
    for got, want in zip(fused[2:], eager[2:]):
        np.testing.assert_array_equal(got, want)
    x = np.where(xs > 0.25, xs * 3.0, xs) - 1.0
    np.testing.assert_array_equal(fused[2], x)
    np.testing.assert_array_equal(fused[3], x * 2.0)
    assert fused[:2] == pytest.approx((float(np.sum(x * 2.0 * x)), float(np.sum(x * 2.0 / 7.0))), rel=1e-12)
