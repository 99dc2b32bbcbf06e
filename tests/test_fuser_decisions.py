"""Fusion that must not happen: unsafe neighbours stay separate launches, stay correct, and explain() says why.

Each test runs a pair of calls eagerly and with fusion on, compares the results exactly, checks that
no fused kernel ran, and that the explanation names the reason.
"""
import numpy as np
import pytest

import kfuse as pk
from fusion_check import assert_same, run_eager_and_fused, view_of

pytestmark = pytest.mark.backend("python")  # the reference interpreter: no C++ compiler

N = 48


def assert_not_fused(program, *phrases, launches=2):
    """The program's calls ran unfused (``launches`` launches, none fused), correctly, for the given reason."""
    expected, got, stats, text = run_eager_and_fused(program)
    assert_same(expected, got)
    assert stats["fused_kernels_launched"] == 0, text
    assert stats["kernels_launched"] == launches, text
    assert "| split before call 1" in text
    for phrase in phrases:
        assert phrase in text, f"{phrase!r} not in:\n{text}"
    return got


def data(seed: int, shape=(N,)) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1.0, 1.0, shape)


# --- a writer that every unsafe reader below follows ------------------------------------------------------
@pk.workunit
def fill(i: int, x: pk.View1D[pk.double]):
    x[i] = 0.5 * i - 3.0 + x[i]


def expected_fill(x, lo=0, hi=N):
    x = x.copy()
    x[lo:hi] = 0.5 * np.arange(lo, hi) - 3.0 + x[lo:hi]
    return x


@pk.workunit
def neighbours(i: int, x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    y[i] = x[i - 1] - 2.0 * x[i] + x[i + 1]


def test_stencil_reading_neighbours_of_written_elements_is_not_fused():
    def program():
        x, y = view_of(data(1)), pk.View(N)
        pk.parallel_for(pk.RangePolicy(1, N - 1), fill, x=x)
        pk.parallel_for(pk.RangePolicy(1, N - 1), neighbours, x=x, y=y)
        return (y.copy(),)

    (y,) = assert_not_fused(program, "unsafe access to 'x': neighbours uses x[i ", "as x[i] (fill)")
    x = expected_fill(data(1), 1, N - 1)
    np.testing.assert_allclose(y[1:-1], x[:-2] - 2 * x[1:-1] + x[2:], rtol=1e-14, atol=1e-14)


@pk.workunit
def look_ahead(i: int, x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    y[i] = x[i + 1] - x[i]


def test_read_ahead_then_overwrite_is_not_fused():
    """Write after read: thread i must read x[i+1] before thread i+1 overwrites it."""
    def program():
        x, y = view_of(data(2)), pk.View(N)
        pk.parallel_for(N - 1, look_ahead, x=x, y=y)
        pk.parallel_for(N - 1, fill, x=x)
        return x.copy(), y.copy()

    x, y = assert_not_fused(program, "unsafe access to 'x'")
    np.testing.assert_array_equal(y[:-1], np.diff(data(2)))


@pk.workunit
def gather(i: int, idx: pk.View1D[pk.int64], x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    y[i] = x[idx[i]]


def test_indirect_indexing_is_not_fused():
    perm = np.random.default_rng(3).permutation(N)

    def program():
        x, y, idx = view_of(data(3)), pk.View(N), view_of(perm, pk.int64)
        pk.parallel_for(N, fill, x=x)
        pk.parallel_for(N, gather, idx=idx, x=x, y=y)
        return (y.copy(),)

    (y,) = assert_not_fused(program, "unsafe access to 'x'", "x[idx[i]]")
    np.testing.assert_array_equal(y, expected_fill(data(3))[perm])


@pk.workunit
def count_classes(i: int, counts: pk.View1D[pk.int64]):
    pk.atomic_add(counts, [i % 4], 1)


@pk.workunit
def divide_by_class(i: int, counts: pk.View1D[pk.int64], x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    y[i] = x[i] / counts[i % 4]


def test_atomic_updates_are_not_fused():
    def program():
        counts, x, y = view_of(np.zeros(4, np.int64), pk.int64), view_of(data(4)), pk.View(N)
        pk.parallel_for(N, count_classes, counts=counts)
        pk.parallel_for(N, divide_by_class, counts=counts, x=x, y=y)
        return y.copy(), counts.copy()

    y, counts = assert_not_fused(program, "unsafe access to 'counts': atomic update of 'counts'")
    np.testing.assert_array_equal(counts, [N // 4] * 4)


@pk.workunit
def double_it(i: int, x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    y[i] = 2.0 * x[i]


def test_different_ranges_are_not_fused():
    def program():
        x, y = view_of(data(5)), pk.View(N)
        pk.parallel_for(N, fill, x=x)
        pk.parallel_for(N // 2, double_it, x=x, y=y)
        return (y.copy(),)

    (y,) = assert_not_fused(program, f"different range: [0, {N}) vs [0, {N // 2})")
    np.testing.assert_array_equal(y[:N // 2], 2.0 * expected_fill(data(5))[:N // 2])


@pk.workunit
def running_sum(i: int, acc: pk.Acc[pk.double], last_pass: bool, x: pk.View1D[pk.double],
                y: pk.View1D[pk.double]):
    acc += x[i]
    if last_pass:
        y[i] = acc


def test_scan_is_not_fused():
    def program():
        x, y = view_of(np.arange(N, dtype=float)), pk.View(N)
        pk.parallel_for(N, fill, x=x)
        total = pk.parallel_scan(N, running_sum, x=x, y=y)
        return y.copy(), float(total)

    y, total = assert_not_fused(program, "running_sum: a scan (parallel_scan) has a cross-thread dependence")
    np.testing.assert_array_equal(y, np.cumsum(expected_fill(np.arange(N, dtype=float))))


@pk.workunit
def team_scale_rows(team: pk.TeamMember, M: pk.View2D[pk.double], T: pk.View2D[pk.double]):
    r: int = team.league_rank()

    def scale(j: int):
        T[r][j] = (r + 1) * M[r][j]

    pk.parallel_for(pk.TeamThreadRange(team, M.extent(1)), scale)


@pk.workunit
def team_row_totals(team: pk.TeamMember, T: pk.View2D[pk.double], out: pk.View1D[pk.double]):
    r: int = team.league_rank()

    def total(j: int, acc: pk.Acc[pk.double]):
        acc += T[r][j]

    s: float = pk.parallel_reduce(pk.TeamThreadRange(team, T.extent(1)), total)
    if team.team_rank() == 0:
        out[r] = s


def test_team_policy_kernels_are_not_fused():
    rows, cols = 6, 10
    values = np.arange(rows * cols, dtype=float).reshape(rows, cols)  # integers: any summation order is exact

    def program():
        M, T, out = view_of(values), pk.View((rows, cols)), pk.View(rows)
        policy = pk.TeamPolicy(rows, pk.AUTO)
        pk.parallel_for(policy, team_scale_rows, M=M, T=T)
        pk.parallel_for(policy, team_row_totals, T=T, out=out)
        return (out.copy(),)

    (out,) = assert_not_fused(program, "a TeamPolicy kernel")
    np.testing.assert_array_equal(out, (np.arange(1, rows + 1)[:, None] * values).sum(axis=1))


@pk.function
def element(v: pk.View1D[pk.double], k: int) -> float:
    return v[k]


@pk.workunit
def via_helper(i: int, x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    y[i] = element(x, i) + 1.0


def test_view_handed_to_a_helper_is_not_fused():
    def program():
        x, y = view_of(data(6)), pk.View(N)
        pk.parallel_for(N, fill, x=x)
        pk.parallel_for(N, via_helper, x=x, y=y)
        return (y.copy(),)

    (y,) = assert_not_fused(program, "unsafe access to 'x': 'x' is passed to a helper function")
    np.testing.assert_array_equal(y, expected_fill(data(6)) + 1.0)


def test_overlapping_but_different_views_are_not_fused():
    half = N // 2

    def program():
        a, y = view_of(data(7)), pk.View(half)
        pk.parallel_for(half, fill, x=a)  # writes a[0:half]
        pk.parallel_for(half, double_it, x=a.subview(slice(half // 2, half + half // 2)), y=y)
        return (y.copy(),)

    (y,) = assert_not_fused(program, "'x' share memory through different views (e.g. a subview)")
    np.testing.assert_array_equal(y, 2.0 * expected_fill(data(7), 0, half)[half // 2:half + half // 2])


def test_disjoint_subviews_are_fused():
    """The same pair on non-overlapping halves of one array touches no shared memory: fused."""
    half = N // 2
    a = view_of(data(8))
    y = pk.View(half)
    pk.reset_stats()
    pk.enable_fusion()
    pk.parallel_for(half, fill, x=a.subview(slice(0, half)))
    pk.parallel_for(half, double_it, x=a.subview(slice(half, N)), y=y)
    pk.fence()  # the calls are independent: run both in one flush
    got = y.copy(), a.copy()
    assert pk.stats()["fused_kernels_launched"] == 1 and pk.stats()["kernels_launched"] == 1
    np.testing.assert_array_equal(got[0], 2.0 * data(8)[half:])
    np.testing.assert_array_equal(got[1], expected_fill(data(8), 0, half))


@pk.workunit
def clamp_early(i: int, x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    if x[i] < 0.0:
        y[i] = 0.0
        return
    y[i] = x[i]


def test_kernel_with_early_return_is_not_fused():
    def program():
        x, y = view_of(data(9)), pk.View(N)
        pk.parallel_for(N, fill, x=x)
        pk.parallel_for(N, clamp_early, x=x, y=y)
        return (y.copy(),)

    (y,) = assert_not_fused(program, "clamp_early: the kernel body returns early")
    np.testing.assert_array_equal(y, np.maximum(expected_fill(data(9)), 0.0))


@pk.workunit
def offset_write(i: int, s: int, x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    y[i + s] = 3.0 * x[i]


@pk.workunit
def offset_read(i: int, s: int, y: pk.View1D[pk.double], z: pk.View1D[pk.double]):
    z[i] = y[i + s] + 0.5


def test_scalar_offsets_with_different_values_are_not_fused_even_after_equal_ones():
    """The plan cache must not reuse the 'same offset' decision when the scalar values differ."""
    def program(s_write, s_read):
        def run():
            x, y, z = view_of(data(10)), view_of(data(11)), pk.View(N)
            pk.parallel_for(N - 3, offset_write, s=s_write, x=x, y=y)
            pk.parallel_for(N - 3, offset_read, s=s_read, y=y, z=z)
            return z.copy(), y.copy()
        return run

    expected, got, stats, _ = run_eager_and_fused(program(2, 2))
    assert_same(expected, got)
    assert stats["fused_kernels_launched"] == 1
    z, y = assert_not_fused(program(2, 1), "unsafe access to 'y'")
    y_ref = data(11)
    y_ref[2:N - 1] = 3.0 * data(10)[:N - 3]
    np.testing.assert_array_equal(z[:N - 3], y_ref[1:N - 2] + 0.5)


@pk.workunit
def transpose(i: int, j: int, A: pk.View2D[pk.double], B: pk.View2D[pk.double]):
    B[i][j] = A[j][i]


@pk.workunit
def shift_2d(i: int, j: int, A: pk.View2D[pk.double]):
    A[i][j] = A[i][j] + i - j


def test_mdrange_transposed_access_is_not_fused():
    n = 9

    def program():
        A, B = view_of(data(12, (n, n))), pk.View((n, n))
        policy = pk.MDRangePolicy([0, 0], [n, n])
        pk.parallel_for(policy, shift_2d, A=A)
        pk.parallel_for(policy, transpose, A=A, B=B)
        return (B.copy(),)

    (B,) = assert_not_fused(program, "unsafe access to 'A'")
    i, j = np.indices((n, n))
    np.testing.assert_array_equal(B, (data(12, (n, n)) + i - j).T)


def _bump_by(k):
    @pk.function
    def bump(v: float) -> float:
        return v + k

    return bump


bump_one, bump_two = _bump_by(1.0), _bump_by(2.0)


@pk.workunit
def use_bump_one(i: int, x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    y[i] = bump_one(x[i])


@pk.workunit
def use_bump_two(i: int, y: pk.View1D[pk.double], z: pk.View1D[pk.double]):
    z[i] = bump_two(y[i])


def test_two_different_helpers_with_one_name_are_not_fused():
    def program():
        x, y, z = view_of(data(13)), pk.View(N), pk.View(N)
        pk.parallel_for(N, use_bump_one, x=x, y=y)
        pk.parallel_for(N, use_bump_two, y=y, z=z)
        return (z.copy(),)

    (z,) = assert_not_fused(program, "two different helper functions are both named 'bump'")
    np.testing.assert_array_equal(z, data(13) + 1.0 + 2.0)


def test_different_execution_spaces_are_not_fused():
    def program():
        x, y = view_of(data(14)), pk.View(N)
        pk.parallel_for(pk.RangePolicy(pk.Serial, 0, N), fill, x=x)
        pk.parallel_for(N, double_it, x=x, y=y)
        return (y.copy(),)

    default = pk.get_default_space().value  # OpenMP here; Cuda when the suite runs on a GPU
    (y,) = assert_not_fused(program, f"different execution space: Serial vs {default}")
    np.testing.assert_array_equal(y, 2.0 * expected_fill(data(14)))
