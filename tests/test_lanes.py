"""Rows in lanes (kfuse/codegen/lanes.py): on a CUDA device a kernel whose thread adds up a loop's terms runs each
index on a group of warp lanes, adding the terms in the loop's own order. Which loops split, and the C++ they
print, are checked without a compiler; the sums run in the default space (on the host with one lane an index, as
the fuzzer runs them; on a CUDA build in real lanes) against a sequential reference, bit for bit: ragged and empty
rows, rows shorter and longer than a group, signed zeros, integers, float32, stores between loops."""
from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np
import pytest

import kfuse as pk
from kfuse.calls import prepare
from kfuse.codegen import kernel as codegen
from kfuse.codegen import lanes
from kfuse.types import DType


@pk.workunit
def lanes_dot(i, out: pk.View1D[pk.double], a: pk.View2D[pk.double], y: pk.View1D[pk.double], n: int):
    s: float = 0.0
    for j in range(n):
        t: float = pk.sqrt(pk.fabs(a[i][j])) * y[j]
        s += t
    out[i] = s * 2.0


@pk.workunit
def lanes_csr(i, out: pk.View1D[pk.double], start: pk.View1D[pk.int64], values: pk.View1D[pk.double]):
    s: float = out[i]  # a sum that starts from memory (a -0.0 there stays one when nothing is added)
    for k in range(start[i], start[i + 1]):
        s += pk.sqrt(values[k])
    out[i] = s


@pk.workunit
def lanes_mixed(i, out: pk.View1D[pk.int64], shifted: pk.View1D[pk.double], a: pk.View2D[pk.int64],
                f: pk.View2D[pk.float32]):
    total: int = 0
    small: pk.float32 = f[i][0]
    for j in range(1, a.extent(1)):
        total += a[i][j] * j
        small += pk.sqrt(pk.fabs(f[i][j]))
    out[i] = total
    shifted[i] = shifted[i] + 1.0  # read and written by the index's group: its first lane only, in step
    back: float = 0.0
    for j in range(a.extent(1)):
        back += pk.sqrt(shifted[i] * shifted[i]) * a[i][j]
    shifted[i] = back + small


@pk.workunit
def lanes_stores_in_loop(i, out: pk.View2D[pk.double], n: int):
    s: float = 0.0
    for j in range(n):
        s += pk.sqrt(1.0 * j)
        out[i][j] = s


@pk.workunit
def lanes_branch(i, out: pk.View1D[pk.double], a: pk.View2D[pk.double], n: int):
    s: float = 0.0
    for j in range(n):
        if a[i][j] > 0.0:
            s += pk.sqrt(a[i][j])
    out[i] = s


@pk.workunit
def lanes_temp_after(i, out: pk.View1D[pk.double], a: pk.View2D[pk.double], n: int):
    s: float = 0.0
    t: float = 0.0
    for j in range(n):
        t = pk.sqrt(a[i][j])
        s += t
    out[i] = s + t


@pk.workunit
def lanes_carried(i, out: pk.View1D[pk.double], a: pk.View2D[pk.double], n: int):
    s: float = 0.0
    prev: float = 0.0
    for j in range(n):
        s += pk.sqrt(a[i][j]) - prev
        prev = a[i][j]
    out[i] = s


@pk.workunit
def lanes_sum_read(i, out: pk.View1D[pk.double], a: pk.View2D[pk.double], n: int):
    s: float = 0.0
    for j in range(n):
        s += pk.sqrt(a[i][j]) * s
    out[i] = s


@pk.workunit
def lanes_twice(i, out: pk.View1D[pk.double], a: pk.View2D[pk.double], n: int):
    s: float = 0.0
    for j in range(n):
        s += pk.sqrt(a[i][j])
        s += 1.0
    out[i] = s


@pk.workunit
def lanes_strided(i, out: pk.View1D[pk.double], a: pk.View2D[pk.double], n: int):
    s: float = 0.0
    for j in range(0, n, 2):
        s += pk.sqrt(a[i][j])
    out[i] = s


@pk.workunit
def lanes_divides(i, out: pk.View1D[pk.double], a: pk.View2D[pk.double], n: int, k: int):
    s: float = 0.0
    for j in range(n):
        s += pk.sqrt(a[i][j // k])
    out[i] = s


@pk.workunit
def lanes_atomic(i, out: pk.View1D[pk.double], a: pk.View2D[pk.double], n: int):
    s: float = 0.0
    for j in range(n):
        s += pk.sqrt(a[i][j])
    pk.atomic_add(out, [0], s)


@pk.workunit
def lanes_reduce(i, acc: pk.Acc[pk.double], a: pk.View2D[pk.double], n: int):
    s: float = 0.0
    for j in range(n):
        s += pk.sqrt(a[i][j])
    acc += s


def _spec(wu, op="for", space="Cuda", **kwargs):
    prepared = prepare(wu, op, 4, (), kwargs).prepared
    return prepared, dataclasses.replace(prepared.spec, space=space)


def _split(wu, op="for", space="Cuda", bounds_check=False, **kwargs) -> list:
    """The sums of each loop that splits, in the kernel's order of loops."""
    from kfuse.ir.lower import lowered
    prepared, spec = _spec(wu, op, space, **kwargs)
    return list(lanes.lane_loops(lowered(prepared.source, spec), spec, bounds_check).values())


def _matrix(**extra):
    return dict(out=pk.View([4]), a=pk.View([4, 4]), n=4, **extra)


@pk.workunit
def lanes_row(i, out: pk.View1D[pk.double], a: pk.View2D[pk.double], n: int):
    s: float = 0.0
    for j in range(n):
        s += pk.log(a[i][j])
    out[i] = s


@pk.workunit
def lanes_cheap(i, out: pk.View1D[pk.double], a: pk.View2D[pk.double], n: int):
    s: float = 0.0
    for j in range(n):
        s += a[i][j] * 2.0
    out[i] = s


@pytest.mark.backend("null")
def test_loops_that_only_add_up_terms_split():
    assert _split(lanes_row, **_matrix()) == [(("s", DType.float64),)]
    assert _split(lanes_dot, **_matrix(y=pk.View([4]))) == [(("s", DType.float64),)]
    mixed = dict(out=pk.View([4], dtype=pk.int64), shifted=pk.View([4]), a=pk.View([4, 4], dtype=pk.int64),
                 f=pk.View([4, 4], dtype=pk.float32))
    assert _split(lanes_mixed, **mixed) == [(("total", DType.int64), ("small", DType.float32)),
                                            (("back", DType.float64),)]


@pytest.mark.backend("null")
@pytest.mark.parametrize("wu, why", [
    (lanes_stores_in_loop, "a store in the loop"), (lanes_branch, "a branch in the loop"),
    (lanes_temp_after, "a temporary read after the loop"), (lanes_carried, "a value carried between iterations"),
    (lanes_sum_read, "the sum read in the loop"), (lanes_twice, "two additions to one sum an iteration"),
    (lanes_strided, "a step"), (lanes_divides, "a checked division"),
    (lanes_cheap, "terms cheaper than bringing them to the sum in order")])
def test_loops_that_do_more_than_add_up_terms_stay_sequential(wu, why):
    kwargs = _matrix(k=2) if wu is lanes_divides else _matrix()
    if wu is lanes_stores_in_loop:
        kwargs = dict(out=pk.View([4, 4]), n=4)
    assert _split(wu, **kwargs) == [], why


@pytest.mark.backend("null")
def test_only_cuda_range_loops_without_repeated_effects_run_in_lanes():
    assert _split(lanes_row, space="OpenMP", **_matrix()) == []
    assert _split(lanes_row, space="HIP", **_matrix()) == []
    assert _split(lanes_row, bounds_check=True, **_matrix()) == []  # every load a fault site
    assert _split(lanes_atomic, **_matrix()) == []  # each lane would add
    reduce = dict(a=pk.View([4, 4]), n=4)
    assert _split(lanes_reduce, op="reduce", **reduce) == []


@pytest.mark.backend("null")
def test_a_kernel_in_lanes_launches_groups_adds_each_lanes_terms_in_order_and_stores_from_one_lane():
    prepared, spec = _spec(lanes_dot, **_matrix(y=pk.View([4])))
    cuda = codegen.generate(prepared.source, spec, prepared.name).source
    assert "kf_for_in_lanes<KfExec>(kf_f, kf_b0, kf_e0);" in cuda and "Kokkos::parallel_for" not in cuda
    assert "kf_base1 += kf_lanes()" in cuda and "const int64_t kf_it1 = kf_base1 + kf_lane();" in cuda
    assert "double kf_term1_0 = double(-0.0);" in cuda and "double& s = kf_term1_0;" in cuda
    assert "s += kf_lane_value(kf_term1_0, kf_from1);" in cuda
    assert "kf_lane_sync();\n    if (kf_lane() == 0) out(i) = (s * 2.0);\n    kf_lane_sync();" in cuda
    host = codegen.generate(prepared.source, dataclasses.replace(spec, space="OpenMP"), prepared.name).source
    assert "kf_lane" not in host and "Kokkos::parallel_for" in host


@pytest.fixture
def in_lanes(monkeypatch):
    """Kernels of the default space run in lanes where they split (on the host: one lane an index)."""
    monkeypatch.setattr(lanes, "LANE_SPACES", lanes.LANE_SPACES | {pk.get_default_space().value})


def _sequential(terms, start=0.0):
    return functools.reduce(lambda s, t: s + t, terms, start)


def test_row_dot_products_in_lanes_are_the_sequential_sums(in_lanes):
    rng = np.random.default_rng(5)
    for rows, n in ((1, 1), (3, 3), (70, 37), (5, 1000), (2000, 32)):
        a, y = rng.standard_normal((rows, n)) * 10.0 ** rng.integers(-8, 8, (rows, n)), rng.standard_normal(n)
        out = pk.View([rows])
        pk.parallel_for(rows, lanes_dot, out=out, a=pk.array(a), y=pk.array(y), n=n)
        want = np.array([_sequential(list(np.sqrt(np.abs(a[i])) * y)) * 2.0 for i in range(rows)])
        assert np.array_equal(np.asarray(out), want), (rows, n)


def test_ragged_rows_in_lanes_keep_signed_zeros_and_empty_rows(in_lanes):
    lengths = [0, 1, 2, 3, 4, 5, 7, 8, 9, 31, 32, 33, 64, 100, 0, 257]
    start = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    rng = np.random.default_rng(7)
    values = rng.choice([-0.0, 0.0, 1e32, 1e-300, 1.0, 0.5, 2.0], size=int(start[-1]))
    values[start[2]:start[3]] = -0.0  # -0.0 + sqrt(-0.0) + sqrt(-0.0) is -0.0: each term as it is, added
    first = np.where(np.arange(len(lengths)) % 2 == 0, -0.0, 0.0)
    out = pk.array(first.copy())
    pk.parallel_for(len(lengths), lanes_csr, out=out, start=pk.array(start), values=pk.array(values))
    want = np.array([_sequential(list(np.sqrt(values[start[i]:start[i + 1]])), first[i])
                     for i in range(len(lengths))])
    got = np.asarray(out)
    assert np.array_equal(got, want) and np.array_equal(np.signbit(got), np.signbit(want))


def test_integer_float32_sums_and_stores_between_loops_in_lanes(in_lanes):
    rows, n = 200, 45  # on a CUDA device: 32 lanes an index
    rng = np.random.default_rng(9)
    a = rng.integers(-2 ** 40, 2 ** 40, (rows, n))
    f = rng.standard_normal((rows, n)).astype(np.float32)
    shifted0 = rng.standard_normal(rows)
    out, shifted = pk.View([rows], dtype=pk.int64), pk.array(shifted0.copy())
    pk.parallel_for(rows, lanes_mixed, out=out, shifted=shifted, a=pk.array(a), f=pk.array(f))
    total = [int(sum(int(a[i][j]) * j for j in range(1, n))) for i in range(rows)]
    small = [functools.reduce(lambda s, t: np.float32(s + t), np.sqrt(np.abs(f[i][1:])), f[i][0]) for i in range(rows)]
    back = [_sequential([math.sqrt((shifted0[i] + 1.0) ** 2) * float(a[i][j]) for j in range(n)])
            for i in range(rows)]
    assert np.array_equal(np.asarray(out), np.array(total, dtype=np.int64))
    assert np.array_equal(np.asarray(shifted), np.array(back) + np.array(small, dtype=np.float64))


def test_row_sums_of_array_operations_fused_and_eager_in_lanes(in_lanes):
    rng = np.random.default_rng(11)
    X, w = rng.standard_normal((100, 40)), rng.standard_normal((1, 40))

    def run():
        return np.asarray(pk.sum(pk.sqrt(pk.square(pk.subtract(pk.array(X), pk.array(w)))), axis=1)).copy()
    eager = run()
    with pk.fusion():
        fused = run()
    want = np.array([_sequential(list(np.sqrt((X[i] - w[0]) ** 2))) for i in range(len(X))])
    assert np.array_equal(eager, want) and np.array_equal(fused, want)
