"""PyKokkos's Atomic memory trait: a View made with ``trait=pk.Atomic`` (or declared so by ``pk.ViewTypeInfo`` for a
workunit parameter or a workload field) is updated atomically by kernels: ``v[i] op= x`` is an atomic update,
``v[i] = v[i] + x`` one atomic fetch-add (its other targets get the new value), any other store an atomic
exchange. Checked against exact counts, eager and fused, on both backends, and in the IR."""
import numpy as np
import pytest

import kfuse as pk
from kfuse.calls import prepare
from kfuse.ir.dump import dump
from kfuse.ir.lower import lowered

N = 4000


@pk.workunit
def claim(i: int, count: pk.View1D[pk.int64], slots: pk.View1D[pk.int64]):
    if i % 3 == 0:
        idx = count[0] = count[0] + 1
        slots[idx - 1] = i


@pk.workunit
def histogram(i: int, bins: pk.View1D[pk.double]):
    bins[i % 4] += 1.0


@pk.workunit(count=pk.ViewTypeInfo(trait=pk.Atomic))
def declared(i: int, count: pk.View1D[pk.int64]):
    count[0] = count[0] + 1


def _check(count, slots, bins, declared_count):
    claimed = sorted(np.asarray(slots)[:int(count[0])].tolist())
    assert int(count[0]) == len(range(0, N, 3)) and claimed == list(range(0, N, 3))  # each thread its own slot
    np.testing.assert_array_equal(np.asarray(bins), np.full(4, N / 4))
    assert int(declared_count[0]) == N


def _run():
    count = pk.View([1], pk.int64, trait=pk.Atomic)
    slots = pk.View([N], pk.int64)
    bins = pk.View([4], pk.double, trait=pk.Trait.Atomic)
    declared_count = pk.View([1], pk.int64)
    pk.parallel_for(N, claim, count=count, slots=slots)
    pk.parallel_for(N, histogram, bins=bins)
    pk.parallel_for(N, declared, count=declared_count)
    return count, slots, bins, declared_count


@pytest.mark.parametrize("backend", [pytest.param(name, marks=pytest.mark.backend(name)) for name in ("python", "kokkos")])
@pytest.mark.parametrize("fusion", [False, True])
def test_atomic_views_count_exactly(backend, fusion):
    if fusion:
        pk.enable_fusion()
    _check(*_run())


@pytest.mark.backend("null")
def test_stores_into_atomic_views_are_atomics_in_the_ir():
    count, slots = pk.View([1], pk.int64, trait=pk.Atomic), pk.View([N], pk.int64)
    call = prepare(claim, "for", N, (), {"count": count, "slots": slots})
    text = dump(lowered(call.prepared.source, call.prepared.spec))
    assert "idx = (atomic_fetch_add(count[0], 1) + 1)" in text and text.count("count[") == 1, text


@pk.workload(count=pk.ViewTypeInfo(trait=pk.Atomic))
class Counter:
    def __init__(self, n: int):
        self.n: int = n
        self.count: pk.View1D[pk.int64] = pk.View([1], pk.int64)

    @pk.main
    def run(self):
        pk.parallel_for(self.n, self.tally)

    @pk.workunit
    def tally(self, i: int):
        self.count[0] += 1


@pytest.mark.backend("kokkos")
def test_a_workload_field_declared_atomic_is_updated_atomically():
    w = Counter(N)
    pk.execute(w)
    assert int(w.count[0]) == N
