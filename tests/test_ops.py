"""NumPy-style array operations (kfuse.ops) against NumPy, eagerly and with fusion on."""
import math

import numpy as np
import pytest

import kfuse as pk

pytestmark = pytest.mark.backend("python")  # the reference interpreter: no C++ compiler

RNG = np.random.default_rng(42)
A1 = RNG.standard_normal(257)
B1 = RNG.standard_normal(257)
POS1 = RNG.uniform(0.5, 2.0, 257)
A2 = RNG.standard_normal((13, 11))
B2 = RNG.standard_normal((13, 11))


def close(got, want, rtol=1e-13, atol=0.0):
    got = np.asarray(got)
    assert got.shape == np.shape(want)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


# --- elementwise arithmetic -------------------------------------------------------------------------
BINARY = [(pk.add, np.add), (pk.subtract, np.subtract), (pk.multiply, np.multiply), (pk.divide, np.divide),
          (pk.power, np.power)]


@pytest.mark.parametrize("op,ref", BINARY, ids=lambda f: getattr(f, "__name__", ""))
def test_binary_view_view_scalar(op, ref):
    a = pk.from_numpy(POS1.copy())
    b = pk.from_numpy(B1.copy())
    close(op(a, b), ref(POS1, B1))
    close(op(a, 1.5), ref(POS1, 1.5))
    close(op(0.75, a), ref(0.75, POS1))


@pytest.mark.parametrize("op,ref", BINARY, ids=lambda f: getattr(f, "__name__", ""))
def test_binary_2d_contiguous_and_strided(op, ref):
    a, b = np.abs(A2) + 0.5, B2
    close(op(a, b), ref(a, b))
    close(op(a.T, b.T), ref(a.T, b.T))  # strided inputs are copied to contiguous Views first
    out = pk.zeros((11, 13))
    assert op(a.T, 2.0, out=out) is out
    close(out, ref(a.T, 2.0))


def test_binary_out_strided_and_in_place():
    base = np.zeros((11, 13))
    strided = pk.from_numpy(base.T)  # (13, 11) View with strides (1, 13)
    assert strided.storage == "stride" and strided.layout is pk.Layout.LayoutLeft  # column-major memory
    pk.add(A2, B2, out=strided)
    close(strided, A2 + B2)  # read through the View: with fusion on that is what runs the pending kernels
    a = pk.from_numpy(A1.copy())
    pk.multiply(a, a, out=a)
    close(a, A1 * A1)


def test_binary_result_dtypes_follow_numpy():
    f32 = RNG.standard_normal(64).astype(np.float32)
    i32 = np.arange(1, 65, dtype=np.int32)
    i64 = np.arange(1, 65, dtype=np.int64)
    r = pk.add(f32, f32)
    assert r.dtype == pk.float32
    close(r, f32 + f32, rtol=1e-6)
    r = pk.multiply(f32, 2.0)
    assert r.dtype == pk.float32
    close(r, f32 * np.float32(2.0), rtol=1e-6)
    r = pk.divide(i64, 7)
    assert r.dtype == pk.float64
    close(r, i64 / 7)
    r = pk.subtract(i32, 3)
    assert r.dtype == pk.int32
    np.testing.assert_array_equal(r, i32 - 3)
    r = pk.add(i32, 0.5)
    assert r.dtype == pk.float64
    close(r, i32 + 0.5)


def test_binary_scalars_and_errors():
    assert pk.add(2, 3) == 5
    assert pk.power(2.0, 3) == 8.0
    close(pk.add(A2, A2[0]), A2 + A2[0])  # NumPy broadcasting (tests/test_array_functions.py)
    with pytest.raises(ValueError, match="cannot be broadcast"):
        pk.add(A2, A2[:, 0])
    with pytest.raises(ValueError, match="shape"):
        pk.add(A1, B1, out=pk.zeros(3))


# --- unary ------------------------------------------------------------------------------------------
UNARY = [(pk.negative, np.negative, A1), (pk.absolute, np.absolute, A1), (pk.abs, np.abs, A1),
         (pk.square, np.square, A1), (pk.sqrt, np.sqrt, POS1), (pk.exp, np.exp, A1), (pk.log, np.log, POS1),
         (pk.sin, np.sin, A1 * 3), (pk.cos, np.cos, A1 * 3)]


@pytest.mark.parametrize("op,ref,x", UNARY, ids=lambda f: getattr(f, "__name__", ""))
def test_unary(op, ref, x):
    close(op(pk.from_numpy(x.copy())), ref(x))
    x2 = np.abs(A2) + 0.1
    close(op(x2), ref(x2))
    out = pk.empty((11, 13))
    op(x2.T, out=out)
    close(out, ref(x2.T))


def test_unary_on_numbers_matches_math():
    """On numbers the ops are the scalar math functions (what Debug-space kernels call)."""
    assert pk.sqrt(2.0) == math.sqrt(2.0)
    assert pk.exp(0.5) == math.exp(0.5) and pk.log(3.0) == math.log(3.0)
    assert pk.abs(-3) == 3 and pk.negative(2.5) == -2.5 and pk.square(3) == 9


def test_unary_dtypes():
    assert pk.sqrt(np.arange(4, dtype=np.int64)).dtype == pk.float64
    assert pk.sqrt(np.ones(4, dtype=np.float32)).dtype == pk.float32
    r = pk.abs(np.array([-3, 4, -5], dtype=np.int64))
    assert r.dtype == pk.int64
    np.testing.assert_array_equal(r, [3, 4, 5])


@pk.workunit
def math_in_kernel(i, out, a):
    out[i] = pk.sqrt(pk.abs(a[i])) + pk.exp(a[i]) - pk.cos(a[i]) * pk.sin(a[i]) + pk.log(1.0 + a[i] * a[i])


@pytest.mark.parametrize("space", [None, pk.Debug])
def test_pk_math_names_still_work_inside_kernels(space):
    """pk.sqrt & co. are array operations now; inside workunits they must keep meaning the math function."""
    x = A1[:40]
    out = pk.zeros(40)
    policy = pk.RangePolicy(space, 0, 40) if space else 40
    pk.parallel_for(policy, math_in_kernel, out=out, a=pk.from_numpy(x.copy()))
    close(out, np.sqrt(np.abs(x)) + np.exp(x) - np.cos(x) * np.sin(x) + np.log(1 + x * x))


# --- where, copy, fill, constructors --------------------------------------------------------------
def test_where_all_operand_kinds():
    cond = A1 > 0
    close(pk.where(cond, A1, B1), np.where(cond, A1, B1))
    close(pk.where(cond, A1, -1.0), np.where(cond, A1, -1.0))
    close(pk.where(cond, 2.0, B1), np.where(cond, 2.0, B1))
    close(pk.where(cond.astype(np.int64), 1.0, 0.0), np.where(cond, 1.0, 0.0))
    cond2 = A2 > B2
    close(pk.where(cond2, A2, B2), np.where(cond2, A2, B2))


def test_copy_and_fill():
    v = pk.from_numpy(A2.copy())
    c = pk.copy(v)
    assert c is not v and c.shape == v.shape
    close(c, A2)
    t = pk.copy(A2.T)  # a transpose into new, contiguous memory
    assert t.storage == "right"
    close(t, A2.T)
    into = pk.from_numpy(np.zeros((11, 13)).T)
    assert pk.copy(A2, out=into) is into
    close(into, A2)
    assert pk.fill(v, 2.5) is v
    close(v, np.full(A2.shape, 2.5))
    target = pk.from_numpy(np.zeros((4, 6)).T)  # strided
    assert pk.fill(target, 7.0) is target
    close(target, np.full((6, 4), 7.0))


def test_constructors():
    z = pk.zeros((3, 4))
    assert z.shape == (3, 4) and z.dtype == pk.float64 and not np.asarray(z).any()
    assert pk.zeros(5, pk.int32).dtype == pk.int32
    close(pk.ones(4), np.ones(4))
    f = pk.full((2, 3), 1.5)
    close(f, np.full((2, 3), 1.5))
    assert pk.full(3, 7).dtype == pk.int64
    assert pk.empty((2, 2), pk.float32).shape == (2, 2)
    like = pk.from_numpy(np.zeros((2, 5), dtype=np.float32))
    for fn, want in ((pk.zeros_like, 0.0), (pk.ones_like, 1.0)):
        r = fn(like)
        assert r.dtype == pk.float32 and r.shape == (2, 5)
        close(r, np.full((2, 5), want, dtype=np.float32))
    r = pk.full_like(like, 3)
    assert r.dtype == pk.float32
    close(r, np.full((2, 5), 3.0))
    assert pk.empty_like(A2).shape == A2.shape
    assert pk.zeros_like(A2, dtype=pk.int64).dtype == pk.int64


# --- reductions -------------------------------------------------------------------------------------
def test_whole_array_reductions():
    v = pk.from_numpy(A1.copy())
    assert math.isclose(pk.sum(v), A1.sum(), rel_tol=1e-12)
    assert math.isclose(pk.mean(v), A1.mean(), rel_tol=1e-12)
    assert math.isclose(pk.var(v), A1.var(), rel_tol=1e-12)
    assert math.isclose(pk.var(v, ddof=1), A1.var(ddof=1), rel_tol=1e-12)
    assert pk.max(v) == A1.max() and pk.min(v) == A1.min()
    assert pk.argmax(v) == A1.argmax() and pk.argmin(v) == A1.argmin()
    assert math.isclose(pk.sum(A2), A2.sum(), rel_tol=1e-12)
    assert math.isclose(pk.var(A2.T), A2.var(), rel_tol=1e-12)
    assert pk.max(A2.T) == A2.max() and pk.argmax(A2) == A2.argmax()
    assert pk.sum(pk.zeros(0)) == 0.0


@pytest.mark.parametrize("n", [1, 63, 64, 65, 5000, 40_000])
def test_max_argmax_across_chunk_boundaries(n):
    """max/argmax run in chunks; the answer must not depend on where the chunks split."""
    x = RNG.standard_normal(n)
    assert pk.max(x) == x.max() and pk.min(x) == x.min()
    assert pk.argmax(x) == x.argmax() and pk.argmin(x) == x.argmin()
    ties = np.zeros(n)
    ties[n // 3] = ties[n - 1] = 1.0  # two maxima: NumPy returns the first
    assert pk.argmax(ties) == ties.argmax()


def test_nan_propagates_like_numpy():
    x = RNG.standard_normal(3000)
    x[1700] = x[2500] = np.nan
    assert math.isnan(pk.max(x)) and math.isnan(pk.min(x))
    assert pk.argmax(x) == np.argmax(x) == 1700 and pk.argmin(x) == np.argmin(x)
    rows = A2.copy()
    rows[3, 5] = np.nan
    np.testing.assert_array_equal(pk.argmax(rows, axis=1), np.argmax(rows, axis=1))
    np.testing.assert_array_equal(pk.argmax(rows, axis=0), np.argmax(rows, axis=0))


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_axis_reductions(axis):
    for x in (A2, A2.T):
        close(pk.sum(x, axis=axis), x.sum(axis=axis), rtol=1e-12)
        close(pk.mean(x, axis=axis), x.mean(axis=axis), rtol=1e-12)
        close(pk.var(x, axis=axis), x.var(axis=axis), rtol=1e-12)
        close(pk.var(x, axis=axis, ddof=1), x.var(axis=axis, ddof=1), rtol=1e-12)
        close(pk.max(x, axis=axis), x.max(axis=axis))
        close(pk.min(x, axis=axis), x.min(axis=axis))
        np.testing.assert_array_equal(pk.argmax(x, axis=axis), x.argmax(axis=axis))
        np.testing.assert_array_equal(pk.argmin(x, axis=axis), x.argmin(axis=axis))
    out = pk.zeros(11)
    assert pk.sum(A2, axis=0, out=out) is out
    close(out, A2.sum(axis=0), rtol=1e-12)


def test_reductions_of_float32_and_ints():
    f32 = RNG.standard_normal((40, 7)).astype(np.float32)
    assert math.isclose(pk.sum(f32), f32.astype(np.float64).sum(), rel_tol=1e-12)
    m = pk.mean(f32, axis=0)  # float32, as NumPy's (accumulated in double, so closer to the exact mean)
    assert m.dtype == pk.float32
    close(m, f32.astype(np.float64).mean(axis=0), rtol=1e-6)
    assert pk.max(f32) == f32.max()
    ints = np.array([3, -7, 12, 12, 0], dtype=np.int64)
    assert pk.sum(ints) == 20 and pk.argmax(ints) == 2 and pk.min(ints) == -7
    assert pk.sum(ints, axis=0) == 20  # the only axis of a 1-D array: a number, as NumPy


def test_reduction_errors():
    with pytest.raises(ValueError, match="empty"):
        pk.max(pk.zeros(0))
    with pytest.raises(ValueError, match="argmin of an empty array"):
        pk.argmin(np.zeros((2, 0, 2)), axis=1)
    with pytest.raises(ValueError, match="out of range"):
        pk.sum(A2, axis=2)


# --- linear algebra ---------------------------------------------------------------------------------
def test_matmul_dot_outer():
    m = RNG.standard_normal((7, 5))
    n = RNG.standard_normal((5, 9))
    x5, x7 = RNG.standard_normal(5), RNG.standard_normal(7)
    close(pk.matmul(m, n), m @ n, rtol=1e-12)
    close(pk.matmul(n.T, m.T), n.T @ m.T, rtol=1e-12)
    close(pk.matmul(m, x5), m @ x5, rtol=1e-12)
    close(pk.matmul(x7, m), x7 @ m, rtol=1e-12)
    assert math.isclose(pk.matmul(x5, x5), x5 @ x5, rel_tol=1e-12)
    assert math.isclose(pk.dot(A1, B1), A1 @ B1, rel_tol=1e-12)
    close(pk.dot(m, n), m.dot(n), rtol=1e-12)
    close(pk.dot(2.0, x5), 2.0 * x5)
    close(pk.outer(x5, x7), np.outer(x5, x7))
    close(pk.outer(m, x5), np.outer(m, x5))
    with pytest.raises(ValueError, match="align"):
        pk.matmul(m, m)
    a = pk.from_numpy(RNG.standard_normal((4, 4)))
    with pytest.raises(ValueError, match="share memory"):
        pk.matmul(a, a, out=a)


# --- fusion on: the same operations are traced and give the same results ----------------------------
def chain(x, y):
    """A GNB-like mix: elementwise ops, an axis reduction, and whole-array reductions feeding later kernels."""
    d = pk.subtract(x, y)
    q = pk.divide(pk.square(d), pk.add(pk.exp(pk.negative(pk.abs(y))), 1.0))
    col = pk.var(q, axis=0)
    eps = pk.max(pk.multiply(col, 1e-3))
    shifted = pk.add(q, eps)
    total = pk.sum(pk.sqrt(shifted))
    best = pk.argmax(pk.sum(shifted, axis=1))
    scaled = pk.multiply(pk.full(x.shape, total), pk.mean(x))
    return shifted, total, best, scaled


def test_fusion_chain_matches_eager_and_numpy(fresh_stats):
    eager = chain(A2, B2)
    before = pk.stats()["ops_traced"] + pk.stats()["array_ops_recorded"]
    with pk.fusion():
        fused = chain(A2, B2)
        assert isinstance(fused[1], pk.Future) and isinstance(fused[2], pk.Future)
        assert pk.stats()["ops_traced"] + pk.stats()["array_ops_recorded"] - before >= 15
    d = A2 - B2
    q = d * d / (np.exp(-np.abs(B2)) + 1.0)
    shifted = q + (q.var(axis=0) * 1e-3).max()
    total = np.sqrt(shifted).sum()
    want = (shifted, total, shifted.sum(axis=1).argmax(), np.full(A2.shape, total) * A2.mean())
    for got in (eager, fused):
        close(got[0], want[0], rtol=1e-12)
        assert math.isclose(float(got[1]), want[1], rel_tol=1e-12)
        assert int(got[2]) == want[2]
        close(got[3], want[3], rtol=1e-12)


def test_future_operands_wait_for_their_reduction():
    """A Future passed to an op is a kernel argument: reading the result runs the reduction first."""
    x = pk.from_numpy(A1.copy())
    with pk.fusion():
        m = pk.mean(x)
        centred = pk.subtract(x, m)
        filled = pk.full(5, pk.max(x))
        pk.fill(x, 0.0)  # overwrites what m and centred read: they must run before this
    close(centred, A1 - A1.mean(), rtol=1e-12)
    close(filled, np.full(5, A1.max()))
    close(x, np.zeros_like(A1))
