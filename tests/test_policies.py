"""Reductions, scans, MDRange, teams with nested parallelism, and execution spaces, checked against NumPy."""
import numpy as np
import pytest

import kfuse as pk
from kfuse.runtime import kokkos_runtime

pytestmark = pytest.mark.backend("python")  # the reference interpreter: no C++ compiler


# --- parallel_reduce ------------------------------------------------------------------------------
@pk.workunit
def sum_squares(i, acc: pk.Acc[pk.double], x):
    acc += x[i] * x[i]


@pk.workunit
def count_even(i, acc: pk.Acc[pk.int64], x):
    if x[i] % 2 == 0:
        acc += 1


@pk.workunit
def weighted_sum(i, acc, x):  # no annotation: a double accumulator
    acc += x[i] * (i + 1)


def test_reduce_float_and_int_accumulators():
    x = np.linspace(-1, 3, 1001)
    assert pk.parallel_reduce(len(x), sum_squares, x=x) == pytest.approx(np.sum(x * x), rel=1e-12)
    assert pk.parallel_reduce(pk.RangePolicy(10, 1001), sum_squares, x=x) == pytest.approx(np.sum(x[10:] ** 2),
                                                                                         rel=1e-12)
    ints = np.arange(-7, 100, 3, dtype=np.int32)
    count = pk.parallel_reduce(len(ints), count_even, x=ints)
    assert isinstance(count, int) and count == int(np.sum(ints % 2 == 0))
    total = pk.parallel_reduce("label", len(x), weighted_sum, x)  # PyKokkos label and positional argument
    assert isinstance(total, float) and total == pytest.approx(np.sum(x * np.arange(1, len(x) + 1)), rel=1e-12)


# --- parallel_scan --------------------------------------------------------------------------------
@pk.workunit
def exclusive_prefix(i, acc: pk.Acc[pk.int64], last_pass: bool, x, out):
    if last_pass:
        out[i] = acc
    acc += x[i]


@pk.workunit
def inclusive_prefix(i, acc, last_pass, x, out):
    acc += x[i]
    if last_pass:
        out[i] = acc


def test_scan_exclusive_and_inclusive():
    rng = np.random.default_rng(3)
    xi = rng.integers(-5, 20, 5000)
    out_i = np.zeros_like(xi)
    total = pk.parallel_scan(len(xi), exclusive_prefix, x=xi, out=out_i)
    np.testing.assert_array_equal(out_i, np.concatenate([[0], np.cumsum(xi)[:-1]]))
    assert total == xi.sum()
    xf = rng.uniform(0, 1, 5000)
    out_f = np.zeros_like(xf)
    total = pk.parallel_scan(len(xf), inclusive_prefix, x=xf, out=out_f)
    np.testing.assert_allclose(out_f, np.cumsum(xf), rtol=1e-12)
    assert total == pytest.approx(xf.sum(), rel=1e-12)


# --- MDRangePolicy --------------------------------------------------------------------------------
@pk.workunit
def stencil2d(i, j, u, out):
    out[i, j] = u[i - 1][j] + u[i + 1][j] + u[i][j - 1] + u[i][j + 1] - 4 * u[i][j]


@pk.workunit
def fill3d(i, j, k, out):
    out[i][j][k] = i * 100 + j * 10 + k


@pk.workunit
def frobenius(i, j, acc: pk.Acc[pk.double], A):
    acc += A[i][j] * A[i][j]


def test_mdrange_for_rank2_and_rank3_and_reduce():
    u = np.random.default_rng(4).uniform(size=(20, 30))
    out = np.zeros_like(u)
    pk.parallel_for(pk.MDRangePolicy([1, 1], [19, 29]), stencil2d, u=u, out=out)
    expected = np.zeros_like(u)
    expected[1:-1, 1:-1] = u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4 * u[1:-1, 1:-1]
    np.testing.assert_allclose(out, expected, rtol=1e-13, atol=1e-15)

    cube = pk.View((4, 5, 6), pk.int32)
    pk.parallel_for(pk.MDRangePolicy([0, 0, 0], [4, 5, 6]), fill3d, out=cube)
    i, j, k = np.indices((4, 5, 6))
    np.testing.assert_array_equal(cube.copy(), i * 100 + j * 10 + k)

    assert pk.parallel_reduce(pk.MDRangePolicy([0, 2], [20, 30]), frobenius, A=u) == \
        pytest.approx(np.sum(u[:, 2:] ** 2), rel=1e-12)


# --- TeamPolicy -----------------------------------------------------------------------------------
def team_size() -> int:
    return min(2, kokkos_runtime.concurrency())


@pk.workunit
def team_matvec(team: pk.TeamMember, A: pk.View2D[pk.double], x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    row: int = team.league_rank()

    def row_dot(j: int, acc: pk.Acc[pk.double]):
        acc += A[row][j] * x[j]

    s: float = pk.parallel_reduce(pk.TeamThreadRange(team, A.extent(1)), row_dot)
    t = pk.parallel_reduce(pk.TeamThreadRange(team, 0, 2), row_dot)  # untyped local, sub-range
    if team.team_rank() == 0:
        y[2 * row] = s
        y[2 * row + 1] = t


@pk.workunit
def team_shift(team: pk.TeamMember, src, tmp, out, ids):
    r = team.league_rank()
    n = src.extent(1)

    def stage(j):
        tmp[r][j] = src[r][j] * 2

    def shifted(j):
        out[r][j] = tmp[r][(j + 1) % n]

    pk.parallel_for(pk.TeamThreadRange(team, n), stage)
    team.team_barrier()
    pk.parallel_for(pk.TeamThreadRange(team, n), shifted)
    ids[r][team.team_rank()][0] = team.league_rank()
    ids[r][team.team_rank()][1] = team.team_rank()
    ids[r][team.team_rank()][2] = team.team_size()


@pytest.mark.backend("kokkos")  # teams of several threads
def test_team_nested_reduce():
    rng = np.random.default_rng(5)
    A = rng.uniform(size=(13, 40))
    x = rng.uniform(size=40)
    y = np.zeros(26)
    pk.parallel_for(pk.TeamPolicy(13, team_size()), team_matvec, A=A, x=x, y=y)
    np.testing.assert_allclose(y[0::2], A @ x, rtol=1e-12)
    np.testing.assert_allclose(y[1::2], A[:, :2] @ x[:2], rtol=1e-12)


@pytest.mark.backend("kokkos")  # teams of several threads
def test_team_nested_for_barrier_and_ranks():
    ts = team_size()
    src = np.arange(7 * 33, dtype=np.float64).reshape(7, 33)
    tmp = np.zeros_like(src)
    out = np.zeros_like(src)
    ids = np.full((7, ts, 3), -1, dtype=np.int64)
    pk.parallel_for(pk.TeamPolicy(7, ts), team_shift, src=src, tmp=tmp, out=out, ids=ids)
    np.testing.assert_array_equal(out, np.roll(src * 2, -1, axis=1))
    np.testing.assert_array_equal(ids[:, :, 0], np.repeat(np.arange(7)[:, None], ts, axis=1))
    np.testing.assert_array_equal(ids[:, :, 1], np.repeat(np.arange(ts)[None, :], 7, axis=0))
    np.testing.assert_array_equal(ids[:, :, 2], ts)


@pk.workunit
def team_rows(team: pk.TeamMember, acc: pk.Acc[pk.int64], x, prefix, doubled):
    r = team.league_rank()

    def scan_row(j, partial: pk.Acc[pk.double], last_pass: bool):
        partial += x[r][j]
        if last_pass:
            prefix[r][j] = partial

    def double_row(j):
        doubled[r][j] = 2 * x[r][j]

    def count_big(j, c: pk.Acc[pk.int64]):
        if x[r][j] > 0.5:
            c += 1

    pk.parallel_scan(pk.TeamThreadRange(team, x.extent(1)), scan_row)
    pk.parallel_for(pk.ThreadVectorRange(team, x.extent(1)), double_row)
    big = pk.parallel_reduce(pk.TeamThreadRange(team, x.extent(1)), count_big)
    if team.team_rank() == 0:
        acc += big


@pytest.mark.parametrize("space", [pk.OpenMP, pk.Debug])
@pytest.mark.backend("kokkos")  # teams of several threads
def test_team_reduce_with_nested_scan_vector_range_and_int_reduce(space):
    x = np.random.default_rng(6).uniform(size=(9, 21))
    prefix = np.zeros_like(x)
    doubled = np.zeros_like(x)
    big = pk.parallel_reduce(pk.TeamPolicy(space, 9, team_size() if space is pk.OpenMP else 1), team_rows, x=x,
                             prefix=prefix, doubled=doubled)
    assert big == int(np.sum(x > 0.5))
    np.testing.assert_allclose(prefix, np.cumsum(x, axis=1), rtol=1e-13)
    np.testing.assert_array_equal(doubled, 2 * x)


# --- execution spaces -----------------------------------------------------------------------------
@pk.workunit
def axpy(i, a: float, x, y):
    y[i] = a * x[i] + y[i]


def _spaces_used(wu):
    return {p.spec.space for p in wu.specializations.values()}


def test_serial_and_debug_spaces_match_openmp():
    x = np.linspace(0, 1, 50)
    results = {}
    for space in (pk.OpenMP, pk.Serial, pk.Debug):
        y = np.ones(50)
        pk.parallel_for(pk.RangePolicy(space, 0, 50), axpy, a=2.0, x=x, y=y)
        results[space] = y
    assert _spaces_used(axpy) >= {"OpenMP", "Serial", "Debug"}
    for y in results.values():
        np.testing.assert_allclose(y, 2 * x + 1, rtol=1e-15)


def test_set_default_space():
    x = np.linspace(0, 1, 20)
    y = np.zeros(20)
    before = pk.stats()["kernels_launched"]
    pk.set_default_space(pk.Debug)
    try:
        assert pk.get_default_space() is pk.Debug
        pk.parallel_for(20, axpy, a=3.0, x=x, y=y)  # a plain count takes the default space
        assert pk.stats()["kernels_launched"] == before  # ran in Python, launched no compiled kernel
        np.testing.assert_allclose(y, 3 * x)
        pk.set_default_space(pk.Serial)
        pk.parallel_for(20, axpy, a=1.0, x=x, y=y)
        assert pk.stats()["kernels_launched"] == before + 1
        assert "Serial" in _spaces_used(axpy)
    finally:
        pk.set_default_space(pk.OpenMP)
    np.testing.assert_allclose(y, 4 * x)
    with pytest.raises(TypeError):
        pk.set_default_space("Serial")
