"""Subviews inside kernels (``row = A[j, :]``, ``row[i]``): each element access is one of the sliced View, so
results, the access analysis and fusion are those of indexing the View directly. Eager and fused against NumPy."""
import numpy as np
import pytest

import kfuse as pk
from kfuse import context
from kfuse.errors import UnsupportedSyntaxError

pytestmark = pytest.mark.backend("python")  # the reference interpreter: no C++ compiler

R, C = 6, 9


def matrix(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, (R, C))


@pk.workunit
def row_dot(j: int, acc: pk.Acc[pk.double], A: pk.View2D[pk.double], x: pk.View1D[pk.double]):
    row = A[j, :]
    for i in range(row.extent(0)):
        acc += row[i] * x[i]


@pk.workunit
def scale_column(i: int, A: pk.View2D[pk.double], col: int, factor: float):
    column = A[:, col]
    column[i] = column[i] * factor


@pk.workunit
def window_sum(j: int, A: pk.View2D[pk.double], out: pk.View1D[pk.double], lo: int):
    window: pk.View1D[pk.double] = A[j][lo:lo + 3]
    inner = window[1:]
    total: float = 0.0
    for k in range(inner.extent(0)):
        total += inner[k]
    out[j] = total + window.extent(0)


@pytest.mark.parametrize("fusion", [False, True])
def test_row_column_and_window_subviews(fusion):
    if fusion:
        pk.enable_fusion()
    a, x = matrix(1), np.random.default_rng(2).uniform(-1, 1, C)
    A, X, out = pk.array(a.copy()), pk.array(x.copy()), pk.View([R], pk.double)
    pk.parallel_for(R, scale_column, A=A, col=4, factor=-2.0)
    total = pk.parallel_reduce(R, row_dot, A=A, x=X)
    pk.parallel_for(R, window_sum, A=A, out=out, lo=2)
    b = a.copy()
    b[:, 4] *= -2.0
    assert float(total) == pytest.approx(float(np.sum(b @ x)), rel=1e-12)
    np.testing.assert_allclose(np.asarray(out), b[:, 3:5].sum(axis=1) + 3, rtol=1e-12)
    np.testing.assert_array_equal(np.asarray(A), b)
    if fusion:  # the reads through subviews are reads of A: the scale and the reduction fuse only if legal
        assert "scale_column" in pk.explain()


@pk.workunit
def double_in_column(j: int, A: pk.View2D[pk.double]):
    column = A[:, 0]
    column[j] = 2.0 * column[j]


@pk.workunit
def double_in_row(j: int, A: pk.View2D[pk.double]):
    row = A[0, :]
    row[j] = 2.0 * row[j]


@pytest.mark.parametrize("fusion", [False, True])
@pytest.mark.parametrize("writer, fuses", [(double_in_column, True), (double_in_row, False)])
def test_fusion_sees_the_sliced_view(fusion, writer, fuses):
    """Thread j of row_dot reads row j of A. Writing A[j, 0] from thread j keeps each element with its thread (the
    calls fuse); writing A[0, j] from thread j feeds thread 0 from the others (they must not): only an analysis
    that sees A's indices through the subviews tells the two apart."""
    if fusion:
        pk.enable_fusion()
    a = matrix(3)
    A = pk.array(a.copy())
    pk.parallel_for(R, writer, A=A)
    total = pk.parallel_reduce(R, row_dot, A=A, x=pk.array(np.ones(C)))
    expected = a.copy()
    if writer is double_in_column:
        expected[:, 0] *= 2.0
    else:
        expected[0, :R] *= 2.0
    assert float(total) == pytest.approx(float(expected.sum()), rel=1e-12)
    if fusion:
        fused = list(context.current().records)[-1].fused_names == [f"{writer.__name__}__row_dot"]
        assert fused == fuses, pk.explain()


@pk.workunit
def reassigned_index(j: int, A: pk.View2D[pk.double]):
    k: int = j
    row = A[k, :]
    k = 0
    row[0] = 1.0


@pk.workunit
def escaping(j: int, A: pk.View2D[pk.double], out: pk.View1D[pk.double]):
    row = A[j, :]
    other = row
    out[j] = other[0]


@pk.workunit
def stepped(j: int, A: pk.View2D[pk.double]):
    row = A[j, ::2]
    row[0] = 1.0


def test_subviews_kfuse_cannot_resolve_are_errors_at_their_line():
    A, out = pk.View([R, C], pk.double), pk.View([R], pk.double)
    with pytest.raises(UnsupportedSyntaxError, match="indexed by 'k', which the kernel reassigns"):
        pk.parallel_for(R, reassigned_index, A=A)
    with pytest.raises(UnsupportedSyntaxError, match="can only be indexed or asked its extent") as info:
        pk.parallel_for(R, escaping, A=A, out=out)
    assert "test_kernel_subviews.py" in str(info.value)
    with pytest.raises(UnsupportedSyntaxError, match="cannot have a step"):
        pk.parallel_for(R, stepped, A=A)


@pytest.mark.backend("kokkos")
def test_compiled_subviews():
    a, x = matrix(4), np.ones(C)
    total = pk.parallel_reduce(R, row_dot, A=pk.array(a.copy()), x=pk.array(x))
    assert float(total) == pytest.approx(float(a.sum()), rel=1e-12)
