"""Lambdas as kernels, PyKokkos's forms: ``parallel_for(n, lambda i: ...)``, ``parallel_for(n, lambda i: value, view)``
(stores each value in ``view[i]``) and ``parallel_reduce(n, lambda i, acc: acc + ...)``. Captured variables are read
with their values at each call, ``self`` inside a workload's main reads its fields; eager and fused against NumPy."""
import numpy as np
import pytest

import kfuse as pk
from kfuse import context
from kfuse.errors import ArgumentError, SourceError

pytestmark = pytest.mark.backend("python")  # the reference interpreter: no C++ compiler

N = 30


@pytest.mark.parametrize("fusion", [False, True])
def test_output_form_reduce_form_and_captured_locals(fusion):
    if fusion:
        pk.enable_fusion()
    x = np.random.default_rng(1).uniform(-1, 1, N)
    src = pk.array(x.copy())
    out = pk.View([N], pk.double)
    scale = 2.5
    pk.parallel_for(N, lambda i: scale * src[i] + 1.0, out)
    total = pk.parallel_reduce(N, lambda i, acc: acc + out[i] * out[i])
    expected = scale * x + 1.0
    assert float(total) == pytest.approx(float(np.sum(expected * expected)), rel=1e-12)
    np.testing.assert_array_equal(np.asarray(out), expected)
    if fusion:
        names = list(context.current().records)[-1].fused_names
        assert len(names) == 1 and names[0].count("lambda_line") == 2, pk.explain()


def test_a_captured_variable_is_read_at_each_call():
    pk.enable_fusion()
    out = pk.View([N], pk.int64)
    totals = []
    for k in range(3):
        pk.parallel_for(N, lambda i: i * k, out)
        totals.append(pk.parallel_reduce(N, lambda i, acc: acc + out[i]))
    assert [float(t) for t in totals] == [float(k * N * (N - 1) // 2) for k in range(3)]


def test_side_effect_form_runs_the_expression_for_each_index():
    counts = pk.View([1], pk.int64)
    pk.parallel_for(N, lambda i: pk.atomic_add(counts, [0], i))
    assert int(counts[0]) == N * (N - 1) // 2


@pk.workload
class Squares:
    def __init__(self, n: int):
        self.n: int = n
        self.a: pk.View1D[pk.double] = pk.View([n], pk.double)
        self.total: float = 0

    @pk.main
    def run(self):
        offset: float = 0.5
        pk.parallel_for(self.n, lambda i: i + offset, self.a)
        self.total = pk.parallel_reduce(self.n, lambda i, acc: acc + self.a[i] * self.a[i])


@pytest.mark.parametrize("fusion", [False, True])
def test_lambdas_in_a_workload_read_self_fields(fusion):
    if fusion:
        pk.enable_fusion()
    w = Squares(N)
    pk.execute(pk.ExecutionSpace.Default, w)
    a = np.arange(N) + 0.5
    np.testing.assert_array_equal(np.asarray(w.a), a)
    assert float(w.total) == pytest.approx(float(np.sum(a * a)), rel=1e-12)


def test_two_lambdas_on_one_line_with_the_same_parameters_are_refused():
    v = pk.View([4], pk.double)
    with pytest.raises(SourceError, match="2 lambdas with parameters \\(i\\) on line"):
        [pk.parallel_for(4, f, v) for f in (lambda i: 1.0, lambda i: 2.0)]


def test_lambda_forms_are_checked():
    v = pk.View([4], pk.double)
    with pytest.raises(SourceError, match="parallel_reduce is written lambda i, acc"):
        pk.parallel_reduce(4, lambda i: i)
    with pytest.raises(ArgumentError, match="parallel_scan needs a @pk.workunit"):
        pk.parallel_scan(4, lambda i, acc: acc + i)
    with pytest.raises(ArgumentError, match="no keyword arguments"):
        pk.parallel_for(4, lambda i: i, view=v)
    with pytest.raises(ArgumentError, match="at most one extra argument"):
        pk.parallel_for(4, lambda i: i, v, v)


@pytest.mark.backend("kokkos")
@pytest.mark.parametrize("fusion", [False, True])
def test_compiled_lambdas(fusion):
    if fusion:
        pk.enable_fusion()
    w = Squares(N)
    pk.execute(w)
    a = np.arange(N) + 0.5
    assert float(w.total) == pytest.approx(float(np.sum(a * a)), rel=1e-12)


def test_captured_helpers_are_constants_of_the_kernel_and_data_is_read_at_each_call():
    @pk.function
    def halve(v: float) -> float:
        return 0.5 * v

    def run(scale: float, helper) -> np.ndarray:
        out = pk.View([N], pk.double)
        pk.parallel_for(N, lambda i: helper(scale * i), out)
        return np.asarray(out)

    np.testing.assert_array_equal(run(2.0, halve), np.arange(N) * 1.0)
    np.testing.assert_array_equal(run(4.0, halve), np.arange(N) * 2.0)

    @pk.function
    def third(v: float) -> float:
        return v / 3.0

    with pytest.raises(ArgumentError, match="captures 'helper', which was compiled into it as a constant"):
        run(1.0, third)
