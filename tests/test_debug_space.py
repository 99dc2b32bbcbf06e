"""The Debug space runs workunits in the Python interpreter: same results as compiled kernels and NumPy."""
import math

import numpy as np
import pytest

import kfuse as pk

DEBUG = pk.Debug


@pk.function
def cube(v: float) -> float:
    return v * v * v


@pk.workunit
def mixed(i, x, hist, out):
    v = x[i]
    k = i % 3 - 1
    out[i][0] = cube(v) + pk.sqrt(abs(v)) + pk.fmax(v, 0.0) + math.floor(v)
    out[i, 1] = (i - 7) // 2 + (i - 7) % 3 + k ** 2
    pk.atomic_add(hist, [i % 4], 1)


def test_debug_matches_compiled_and_numpy():
    x = np.linspace(-2, 2, 30)
    results = []
    for space in (DEBUG, pk.OpenMP):
        hist = np.zeros(4, dtype=np.int64)
        out = np.zeros((30, 2))
        launched = pk.stats()["kernels_launched"]
        pk.parallel_for(pk.RangePolicy(space, 0, 30), mixed, x=x, hist=hist, out=out)
        assert pk.stats()["kernels_launched"] == launched + (space is not DEBUG)
        results.append((out, hist))
    i = np.arange(30)
    expected = np.stack([x ** 3 + np.sqrt(np.abs(x)) + np.maximum(x, 0) + np.floor(x), (i - 7) // 2 + (i - 7) % 3 + (i % 3 - 1) ** 2],
                        axis=1)
    for out, hist in results:
        np.testing.assert_allclose(out, expected, rtol=1e-14)
        np.testing.assert_array_equal(hist, np.bincount(i % 4))


@pk.workunit
def dot(i, acc: pk.Acc[pk.double], x, y):
    acc += x[i] * y[i]


@pk.workunit
def positives(i, acc: pk.Acc[pk.int64], x):
    if x[i] > 0:
        acc += 1


@pk.workunit
def exclusive(i, acc: pk.Acc[pk.int64], last_pass: bool, x, out, scaled):
    if last_pass:
        out[i] = acc
        scaled[i] = -acc / 2 if acc >= 10 else abs(acc * 3 - 7)  # the running value read in expressions
    acc += x[i]


@pk.workunit
def net(i, acc, x):
    if x[i] > 0:
        acc += x[i]
    else:
        acc -= -x[i]


def test_debug_reduce_and_scan():
    x = np.linspace(-1, 1, 101)
    y = np.cos(x)
    assert pk.parallel_reduce(pk.RangePolicy(DEBUG, 0, 101), dot, x=x, y=y) == pytest.approx(x @ y, rel=1e-12)
    count = pk.parallel_reduce(pk.RangePolicy(DEBUG, 0, 101), positives, x=x)
    assert type(count) is int and count == int(np.sum(x > 0))  # same Python type as a compiled reduction
    ints = np.arange(1, 11)
    prefix = np.cumsum(ints) - ints
    for space in (DEBUG, pk.OpenMP):
        out = np.zeros(10, dtype=np.int64)
        scaled = np.zeros(10)
        total = pk.parallel_scan(pk.RangePolicy(space, 0, 10), exclusive, x=ints, out=out, scaled=scaled)
        np.testing.assert_array_equal(out, prefix)
        np.testing.assert_array_equal(scaled, np.where(prefix >= 10, -prefix / 2, np.abs(prefix * 3 - 7)))
        assert type(total) is int and total == 55
        assert pk.parallel_reduce(pk.RangePolicy(space, 0, 101), net, x=x) == pytest.approx(x.sum(), abs=1e-12)


@pk.workunit
def outer(i, j, acc: pk.Acc[pk.double], u, v, out):
    out[i][j] = u[i] * v[j]
    acc += out[i][j]


def test_debug_mdrange():
    u = np.arange(1.0, 5.0)
    v = np.arange(1.0, 4.0)
    out = np.zeros((4, 3))
    total = pk.parallel_reduce(pk.MDRangePolicy(DEBUG, [0, 0], [4, 3]), outer, u=u, v=v, out=out)
    np.testing.assert_array_equal(out, np.outer(u, v))
    assert total == pytest.approx(u.sum() * v.sum())


@pk.workunit
def row_sums(team: pk.TeamMember, A, out):
    r = team.league_rank()

    def add(j, acc: pk.Acc[pk.double]):
        acc += A[r][j]

    def scale(j):
        A[r][j] = A[r][j] * 2

    total: float = pk.parallel_reduce(pk.TeamThreadRange(team, A.extent(1)), add)
    team.team_barrier()
    pk.parallel_for(pk.TeamThreadRange(team, A.extent(1)), scale)
    if team.team_rank() == 0:
        out[r] = total + team.team_size() * 0


def test_debug_team_policy():
    A = np.arange(12.0).reshape(3, 4)
    original = A.copy()
    out = np.zeros(3)
    pk.parallel_for(pk.TeamPolicy(DEBUG, 3, 1), row_sums, A=A, out=out)
    np.testing.assert_array_equal(out, original.sum(axis=1))
    np.testing.assert_array_equal(A, original * 2)


@pk.workunit
def shout(i, x):
    pk.printf("item %d is %.1f (%ld)\n", i, x[i], i * 2)


def test_debug_printf(capsys):
    pk.parallel_for(pk.RangePolicy(DEBUG, 0, 2), shout, x=np.array([0.5, 1.25]))
    assert capsys.readouterr().out == "item 0 is 0.5 (0)\nitem 1 is 1.2 (2)\n"


@pk.workunit
def debug_twice(i: int, x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    y[i] = 2.0 * x[i]


@pk.workunit
def debug_shift(i: int, x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    y[i] = x[i] + 1.0


def test_a_flush_mixing_debug_and_compiled_calls_builds_each_on_its_own_backend():
    """One partition of calls on two backends (kfuse/pipeline.py compile_ahead hands each backend its own kernels:
    the compiled backend was once given the Debug space's too, and failed on them)."""
    n = 12
    x, y, z, w = pk.View(n), pk.View(n), pk.View(n), pk.View(n)
    x[:] = np.arange(n, dtype=float)
    with pk.fusion():
        pk.parallel_for(pk.RangePolicy(0, n), debug_twice, x=x, y=y)
        pk.parallel_for(pk.RangePolicy(DEBUG, 0, n), debug_shift, x=y, y=z)
        pk.parallel_for(pk.RangePolicy(0, n - 1), debug_shift, x=z, y=w)
        got = np.asarray(w).copy()
    np.testing.assert_array_equal(got[:-1], 2.0 * np.arange(n - 1) + 2.0)
