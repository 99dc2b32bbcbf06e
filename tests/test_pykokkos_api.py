"""PyKokkos programs as their authors write them: parameter names, scalar types, name resolution and atomics.

Each program runs eagerly and fused, on the Kokkos backend and the python backend, against NumPy.
"""
from math import sin  # noqa: F401 - the workunit ``sin`` below rebinds it, as PyKokkos programs do

import numpy as np
import pytest

import kfuse as pk

from fusion_check import assert_same, run_eager_and_fused, view_of

BACKENDS = [pytest.param("kokkos"), pytest.param("python", marks=pytest.mark.backend("python"))]
N = 16


def eager_and_fused(program, expected):
    """``program`` gives the same result eagerly and fused, and that result is ``expected``."""
    eager, fused, _, _ = run_eager_and_fused(program)
    assert_same(eager, fused)
    if np.asarray(expected).dtype.kind in "iub":
        assert_same(np.asarray(expected), eager)
    else:
        np.testing.assert_allclose(eager, expected, rtol=1e-14)


@pk.workunit
def scale_by_init(i, x: pk.View1D[pk.double], init: float):
    x[i] = x[i] * init


@pk.workunit
def sum_with_init(i, acc: pk.Acc[pk.double], x: pk.View1D[pk.double], init: float):
    acc += init + x[i]


@pk.workunit
def scan_with_init(i, acc: pk.Acc[pk.double], last_pass: bool, x: pk.View1D[pk.double], init: float):
    acc += init + x[i]


@pytest.mark.parametrize("backend", BACKENDS)
def test_parameter_named_init(backend):
    """``init`` is also the name of a reducer's ``init()`` in the generated functor."""
    def program():
        x = view_of(np.arange(N, dtype=float))
        pk.parallel_for(N, scale_by_init, x=x, init=2.0)
        total = pk.parallel_reduce(N, sum_with_init, x=x, init=0.5)
        scanned = pk.parallel_scan(N, scan_with_init, x=x, init=0.25)
        return np.array([float(total), float(scanned)])

    x = 2.0 * np.arange(N)
    eager_and_fused(program, [np.sum(x + 0.5), np.sum(x + 0.25)])


@pk.workunit
def fill_scalar(i, a: pk.View1D[pk.uint64], v):
    a[i] = v


@pk.workunit
def fill_annotated(i, a: pk.View1D[pk.uint64], v: pk.uint64):
    a[i] = v - i


@pytest.mark.parametrize("backend", BACKENDS)
def test_uint64_scalar_argument(backend):
    """An unannotated parameter keeps a NumPy uint64 value's type: it does not fit the int64 integers widen to."""
    def program():
        a, b = pk.View((N,), pk.uint64), pk.View((N,), pk.uint64)
        pk.parallel_for(N, fill_scalar, a=a, v=np.uint64(2**64 - 1))
        pk.parallel_for(N, fill_annotated, a=b, v=np.uint64(2**64 - 1))
        return np.concatenate([np.asarray(a), np.asarray(b)])

    eager_and_fused(program, np.concatenate([np.full(N, 2**64 - 1, np.uint64),
                                             np.uint64(2**64 - 1) - np.arange(N, dtype=np.uint64)]))


@pk.workunit
def sin(i, y: pk.View1D[pk.double], x: pk.View1D[pk.double]):  # noqa: F811
    y[i] = sin(x[i])


@pk.workunit
def add_one(i, y: pk.View1D[pk.double]):
    y[i] = y[i] + 1.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_math_call_inside_a_workunit_of_the_same_name(backend):
    """``sin(...)`` inside the workunit ``sin`` is the math function, not the workunit."""
    def program():
        x, y = view_of(np.linspace(0.0, 3.0, N)), pk.View((N,), pk.double)
        pk.parallel_for(N, sin, y=y, x=x)
        pk.parallel_for(N, add_one, y=y)
        return np.asarray(y).copy()

    eager_and_fused(program, np.sin(np.linspace(0.0, 3.0, N)) + 1.0)


@pk.workunit
def bare_double(i, y: "pk.View1D[double]", x: "double"):
    t: double = x * i  # noqa: F821 - a local's annotation is never evaluated by Python
    y[i] = t


@pk.workunit
def string_double(i, y: "pk.View1D[double]", x: "double"):
    y[i] = y[i] + x


@pytest.mark.parametrize("backend", BACKENDS)
def test_bare_double_annotation(backend):
    """``double`` the program never bound, in a local's annotation or a string one, is ``pk.double``."""
    def program():
        y = pk.View((N,), pk.double)
        pk.parallel_for(N, bare_double, y=y, x=1.5)
        pk.parallel_for(N, string_double, y=y, x=0.25)
        return np.asarray(y).copy()

    eager_and_fused(program, 1.5 * np.arange(N) + 0.25)
