"""PyKokkos's array-API functions (kfuse/ops/host.py, manipulation.py, logical_not, linspace/logspace, broadcasting)
against NumPy, eagerly and with fusion on.

With fusion on, inputs come from a pending copy kernel (``fresh``) into uninitialised memory, so a function that
read a View without its host barrier would see garbage, not the values checked here.
"""
import contextlib
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import kfuse as pk

pytestmark = pytest.mark.backend("python")  # the reference interpreter: no C++ compiler

RNG = np.random.default_rng(7)
NUMERIC = [np.int32, np.int64, np.uint8, np.float32, np.float64]
MODES = pytest.mark.parametrize("fused", [False, True], ids=["eager", "fused"])
SETTINGS = settings(max_examples=40, deadline=None, derandomize=True)


def mode(fused: bool):
    return pk.fusion() if fused else contextlib.nullcontext()


def fresh(x: np.ndarray) -> pk.View:
    """x's values in a new View written by a copy kernel (still pending while fusion is on)."""
    return pk.copy(pk.from_numpy(x.copy()))


def same(got, want):
    """Equal values, dtype and shape; a View for an array result."""
    want = np.asarray(want)
    if want.ndim:
        assert isinstance(got, pk.View)
    got = np.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def small_arrays(dtypes=NUMERIC, max_dims=2):
    """Arrays of one of ``dtypes`` with values 0..9 (so repeats and matches are common)."""
    return st.sampled_from(dtypes).flatmap(lambda dt: hnp.arrays(
        dt, hnp.array_shapes(min_dims=1, max_dims=max_dims, max_side=6),
        elements=hnp.from_dtype(np.dtype(dt), allow_nan=False, allow_infinity=False, min_value=0, max_value=9)))


# --- host functions: unique, in1d, searchsorted, index, all/any, find_max, average ------------------------------
@SETTINGS
@given(x=small_arrays(NUMERIC + [np.bool_]), fused=st.booleans())
def test_unique_matches_numpy(x, fused):
    with mode(fused):
        same(pk.unique(fresh(x)), np.unique(x))


def test_unique_of_lists_and_nan():
    same(pk.unique([3, 1, 3]), np.array([1, 3]))
    same(pk.unique(np.array([np.nan, 1.0, np.nan])), np.unique(np.array([np.nan, 1.0, np.nan])))


@SETTINGS
@given(a=small_arrays(), b=small_arrays(), invert=st.booleans(), fused=st.booleans())
def test_in1d_matches_numpy(a, b, invert, fused):
    with mode(fused):
        same(pk.in1d(fresh(a), fresh(b), invert=invert), np.isin(a.ravel(), b, invert=invert))


@SETTINGS
@given(a=small_arrays(max_dims=1), ele=small_arrays(), side=st.sampled_from(["left", "right"]),
       fused=st.booleans())
def test_searchsorted_matches_numpy(a, ele, side, fused):
    a = np.sort(a)
    with mode(fused):
        same(pk.searchsorted(fresh(a), fresh(ele), side=side), np.searchsorted(a, ele, side=side))
        got = pk.searchsorted(fresh(a), ele.flat[0], side)
    assert got == np.searchsorted(a, ele.flat[0], side) and isinstance(got, (int, np.integer))


def test_searchsorted_as_the_examples_call_it():
    """LR.py indexes a list with it; GaussianNB.py calls int() on it."""
    assert [-1, 50, 1, 100, 101][pk.searchsorted([0, 1, 2, 3], 0)] == -1
    classes = pk.from_numpy(np.array([0.0, 1.0, 2.0]))
    assert int(pk.searchsorted(classes, np.float64(2.0))) == 2
    unsorted = np.array([3.0, 1.0, 2.0])
    assert pk.searchsorted(unsorted, 2.5, sorter=np.argsort(unsorted)) == 2


@MODES
@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.uint8])
@pytest.mark.parametrize("idx_dtype", [np.int32, np.int64, np.uint16])
def test_index_gathers_like_numpy(fused, dtype, idx_dtype):
    a = (RNG.random(9) * 50).astype(dtype)
    rows = (RNG.random((9, 3)) * 50).astype(dtype)
    idx = np.array([8, 0, 3, 3], dtype=idx_dtype)
    with mode(fused):
        same(pk.index(fresh(a), fresh(idx)), a[idx])
        same(pk.index(fresh(rows), fresh(idx.reshape(2, 2))), rows[idx.reshape(2, 2)])
        same(pk.index(a, np.array([-1, -9])), a[[-1, -9]])
        same(pk.index(a, np.array([], dtype=np.int64)), a[np.array([], dtype=np.int64)])


def test_index_of_argmax_predicts_like_gaussian_nb():
    """GaussianNB.predict: pk.index(classes, pk.argmax(jll, axis=1)), int64 indices from argmax."""
    jll = RNG.standard_normal((20, 3))
    classes = np.array([0.0, 1.0, 2.0])
    with pk.fusion():
        pred = pk.index(classes, pk.argmax(fresh(jll), axis=1))
        same(pred, classes[jll.argmax(axis=1)])


@MODES
@pytest.mark.parametrize("dtype", NUMERIC + [np.bool_])
def test_all_any(fused, dtype):
    x = (RNG.random((4, 5)) * 3).astype(dtype)
    x[0, 0] = 0
    ones = np.ones((4, 5), dtype=dtype)
    with mode(fused):
        for fn, ref in ((pk.all, np.all), (pk.any, np.any)):
            for data in (x, ones):
                got = fn(fresh(data))
                assert isinstance(got, np.bool_) and got == ref(data)
                same(fn(fresh(data), axis=0), ref(data, axis=0))
                same(fn(fresh(data), axis=(0, -1), keepdims=True), ref(data, axis=(0, -1), keepdims=True))
    assert pk.all(np.array([np.nan, 1.0])) and not pk.any(np.zeros(3))  # NaN is true, as in NumPy
    assert not pk.all(pk.in1d([1.0, 5.0], [1.0, 2.0]))  # GaussianNB's check of its class labels


@MODES
@pytest.mark.parametrize("dtype", NUMERIC)
def test_find_max_over_every_element(fused, dtype):
    x = (RNG.random((6, 4)) * 100).astype(dtype)
    with mode(fused):
        got = pk.find_max(fresh(x))
    assert got == x.max() and got.dtype == x.dtype  # NumPy's scalar type, not a float64 Future
    assert math.isnan(pk.find_max(np.array([1.0, np.nan, 3.0])))


@MODES
def test_average_matches_numpy(fused):
    x = RNG.standard_normal((7, 4))
    w2 = RNG.random((7, 4))
    w_rows = RNG.random(7)
    ints = np.arange(12, dtype=np.int32).reshape(3, 4)
    with mode(fused):
        v = fresh(x)
        assert pk.average(v) == np.average(x)
        same(pk.average(v, axis=0), np.average(x, axis=0))
        same(pk.average(v, axis=0, weights=fresh(w_rows)), np.average(x, axis=0, weights=w_rows))
        same(pk.average(v, axis=-1, weights=w2, keepdims=True), np.average(x, axis=-1, weights=w2, keepdims=True))
        assert pk.average(v, weights=w2) == np.average(x, weights=w2)
        avg, total = pk.average(v, axis=1, weights=w2, returned=True)
        want_avg, want_total = np.average(x, axis=1, weights=w2, returned=True)
        same(avg, want_avg)
        same(total, want_total)
        same(pk.average(fresh(ints), axis=1), np.average(ints, axis=1))  # integers average to float64


# --- logical_not: an elementwise kernel ---------------------------------------------------------------------------
@MODES
@pytest.mark.parametrize("dtype", NUMERIC + [np.bool_])
def test_logical_not(fused, dtype):
    x = (RNG.random((5, 6)) * 3).astype(dtype)
    with mode(fused):
        same(pk.logical_not(fresh(x)), np.logical_not(x))
        same(pk.logical_not(x.T), np.logical_not(x.T))  # strided
        out = pk.ones(x.shape, pk.bool)
        assert pk.logical_not(x, out=out) is out
        same(out, np.logical_not(x))
    same(pk.logical_not(np.array([np.nan, 0.0, -0.0, 2.0])), [False, True, True, False])
    assert pk.logical_not(0) is True and pk.logical_not(2.5) is False


def test_logical_not_mask_selects_like_numpy():
    """GaussianNB indexes the unknown labels with it: a bool mask, not 0/1 integer indices."""
    labels = np.array([1.0, 7.0, 2.0])
    mask = pk.logical_not(pk.in1d(labels, [1.0, 2.0]))
    np.testing.assert_array_equal(labels[np.asarray(mask)], [7.0])


# --- shape functions ----------------------------------------------------------------------------------------------
@MODES
@pytest.mark.parametrize("shape,axes", [((5,), None), ((3, 4), None), ((2, 3, 4), None), ((2, 3, 4), (1, 0, 2)),
                                        ((2, 3, 4), (-1, 0, 1))])
def test_transpose(fused, shape, axes):
    x = RNG.standard_normal(shape)
    with mode(fused):
        t = pk.transpose(fresh(x), axes)
        same(t, np.transpose(x, axes))
        same(pk.transpose(x.T), x)


@MODES
def test_transpose_shares_memory_like_numpy(fused):
    v = pk.from_numpy(np.arange(6.0).reshape(2, 3))
    with mode(fused):
        t = pk.transpose(v)
        pk.fill(v, 4.0)  # a kernel writes v: reading t must wait for it
        same(t, np.full((3, 2), 4.0))
        pk.multiply(t, 2.0, out=t)
    same(v, np.full((2, 3), 8.0))


@SETTINGS
@given(x=small_arrays(NUMERIC + [np.bool_], max_dims=3), order=st.sampled_from("CFA"), strided=st.booleans(),
       fused=st.booleans())
def test_reshape_and_ravel_match_numpy(x, order, strided, fused):
    if strided:
        x = x.T  # reads a strided array: a copy kernel (rank <= 2) or a host copy (rank 3)
    shapes = [(-1,), (x.size,), (1, -1), (-1, 1)] + ([(x.shape[-1], -1)] if x.shape[-1] else [])
    with mode(fused):
        v = pk.from_numpy(x) if strided else fresh(x)
        for shape in shapes:
            same(pk.reshape(v, shape, order=order), np.reshape(x, shape, order=order))
            same(pk.reshape(v, shape, order=order, copy=True), np.reshape(x, shape, order=order))
        same(pk.ravel(v, order=order), np.ravel(x, order=order))


def test_reshape_shares_contiguous_memory_and_copies_otherwise():
    base = np.arange(12.0)
    v = pk.from_numpy(base)
    r = pk.reshape(v, (3, 4))
    r[1, 2] = -1.0
    assert base[6] == -1.0  # a View over the same memory, as np.reshape
    f = pk.reshape(v, (3, 4), order="F")  # v is 1-D, so contiguous in F order too: shared
    same(f, base.reshape(3, 4, order="F"))
    m = pk.from_numpy(np.arange(6.0).reshape(2, 3))
    c = pk.reshape(m, (3, 2), copy=True)
    c[0, 0] = 9.0
    assert np.asarray(m)[0, 0] == 0.0
    w0 = np.arange(15.0).reshape(3, 5)  # LR.py: ravel(w0, order="F") of a C-contiguous 2-D View
    same(pk.ravel(pk.from_numpy(w0.copy()), order="F"), w0.ravel(order="F"))
    same(pk.reshape(pk.ravel(w0, order="F"), (3, -1), order="F"), w0)


def test_reshape_copy_false_refuses_a_copy():
    with pytest.raises(ValueError, match="reshape: copy=False"):
        pk.reshape(np.zeros((3, 4)).T, -1, copy=False)
    same(pk.reshape(np.zeros((3, 4)).T, -1, order="F", copy=False), np.zeros(12))


@MODES
@pytest.mark.parametrize("shape,axis", [((4,), 0), ((4,), 1), ((4,), -1), ((2, 3), 1), ((2, 3), (0, 3)),
                                        ((2, 3), (-1, 1))])
def test_expand_dims(fused, shape, axis):
    x = RNG.standard_normal(shape)
    with mode(fused):
        same(pk.expand_dims(fresh(x), axis=axis), np.expand_dims(x, axis))
    assert pk.expand_dims(x).shape == (1, *shape)  # PyKokkos's default axis=0


@MODES
def test_atleast_2d(fused):
    x1 = RNG.standard_normal(5)
    x3 = RNG.standard_normal((2, 1, 3))
    with mode(fused):
        v2 = fresh(RNG.standard_normal((2, 3)))
        assert pk.atleast_2d(v2) is v2
        same(pk.atleast_2d(fresh(x1)), np.atleast_2d(x1))
        same(pk.atleast_2d(3.5), np.atleast_2d(3.5))
        a, b, c = pk.atleast_2d(x1, 7, x3)
        same(a, np.atleast_2d(x1))
        same(b, np.atleast_2d(7))
        same(c, x3)


@MODES
@pytest.mark.parametrize("arrays", [
    lambda: (np.arange(3.0), np.arange(4.0)),
    lambda: (np.arange(3, dtype=np.int32), np.array([1.5, 2.5])),
    lambda: (np.arange(3, dtype=np.uint8), np.array([True, False]), np.arange(2, dtype=np.int64)),
    lambda: (np.arange(6.0).reshape(3, 2), np.arange(9, dtype=np.int32).reshape(3, 3)),
    lambda: (np.arange(6.0).reshape(2, 3).T, np.ones((3, 1))),  # strided input
    lambda: (np.arange(3.0), 4.0),  # a number is a 1-element array
    lambda: (np.arange(12.0).reshape(2, 3, 2), np.zeros((2, 1, 2))),  # rank 3: host copies
])
def test_hstack_matches_numpy(fused, arrays):
    arrays = arrays()
    with mode(fused):
        views = [fresh(a) if isinstance(a, np.ndarray) else a for a in arrays]
        same(pk.hstack(*views), np.hstack(arrays))  # PyKokkos: hstack(viewA, viewB, ...)
        same(pk.hstack(tuple(views)), np.hstack(arrays))  # NumPy: hstack((a, b, ...))
    same(pk.hstack(viewA=arrays[0], viewB=arrays[1]), np.hstack(arrays[:2]))


@MODES
@pytest.mark.parametrize("dtype", NUMERIC)
def test_col(fused, dtype):
    x = (RNG.random((5, 3)) * 50).astype(dtype)
    with mode(fused):
        for j in (0, 2, -1):
            got = pk.col(fresh(x), j)
            same(got, x[:, j].copy())
        same(pk.col(x.T, 1), x.T[:, 1].copy())
    c = pk.col(x, 0)
    c[0] = 99
    assert x[0, 0] != 99  # a copy, as in PyKokkos


# --- creation and constants ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("args,kwargs", [((-4, 4, 9), {}), ((0, 2, 5, 2.0), {}), ((1, 3, 4), {"endpoint": False}),
                                         ((0, 1, 0), {}), ((0, 3, 4), {"dtype": pk.float32})])
def test_logspace_is_numpys(args, kwargs):
    start, stop, num, *base = args
    want = np.logspace(start, stop, num, base=base[0] if base else 10.0, endpoint=kwargs.get("endpoint", True),
                       dtype=np.float32 if "dtype" in kwargs else None)
    same(pk.logspace(*args, **kwargs), want)


def test_linspace_and_constants():
    same(pk.linspace(0, 1, 7), np.linspace(0, 1, 7))
    same(pk.linspace(-3, 3, 4, endpoint=False), np.linspace(-3, 3, 4, endpoint=False))
    same(pk.linspace(-2.5, 3, 6, dtype=pk.int64), np.linspace(-2.5, 3, 6, dtype=np.int64))
    assert pk.inf == math.inf and math.isnan(pk.nan)


# --- broadcasting in the elementwise operations (GaussianNB: X (n, f) + theta (f,)) ------------------------------
@SETTINGS
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=1, max_dims=2, max_side=5),
       op=st.sampled_from([(pk.add, np.add), (pk.subtract, np.subtract), (pk.multiply, np.multiply),
                           (pk.divide, np.divide)]),
       fused=st.booleans())
def test_binary_operations_broadcast_like_numpy(shapes, op, fused):
    (sa, sb), result = shapes.input_shapes, shapes.result_shape
    fn, ref = op
    a = RNG.standard_normal(sa)
    b = RNG.uniform(0.5, 2.0, sb)
    with mode(fused):
        same(fn(fresh(a), fresh(b)), ref(a, b))
        out = pk.zeros(result)
        assert fn(a, b, out=out) is out
        same(out, ref(a, b))


@MODES
def test_broadcast_into_the_repeated_operands_memory_and_rank_3(fused):
    """A repeated operand is copied out first: writing out= over it cannot race with the threads reading it."""
    x = RNG.standard_normal(6)
    m = RNG.standard_normal((4, 3))
    cube = RNG.standard_normal((2, 4, 3))
    with mode(fused):
        v = fresh(x)
        pk.add(v, v.subview(slice(0, 1)), out=v)
        rows = fresh(m)
        pk.multiply(rows, rows.subview(slice(3, 4)), out=rows)
        same(pk.subtract(fresh(cube), m[0]), cube - m[0])  # rank 3: the repeated operand is copied on the host
    same(v, x + x[0])
    same(rows, m * m[3])


@pytest.mark.parametrize("shapes", [((500, 8), (1, 8)), ((500, 8), (8,)), ((500, 8), (500, 1)), ((1, 8), (500, 1)),
                                    ((300,), (1,))])
def test_a_new_result_reads_the_repeated_operand_where_it_is(shapes, monkeypatch):
    """Into new memory, broadcasting copies nothing: one kernel reads the row (or column) through a zero-stride View
    (KFUSE_HOST_ELEMENTS=0 sends small operations to kernels too)."""
    a, b = RNG.standard_normal(shapes[0]), RNG.uniform(0.5, 2.0, shapes[1])
    x, y = fresh(a), fresh(b)
    monkeypatch.setenv("KFUSE_HOST_ELEMENTS", "0")
    pk.reset_stats()
    got = pk.subtract(x, y)
    assert pk.stats()["kernels_launched"] == 1
    same(got, a - b)
    same(pk.divide(pk.square(pk.subtract(x, y)), y), (a - b) ** 2 / b)
    smaller = y if y.size < x.size else x
    result = np.broadcast_shapes(shapes[0], shapes[1])
    assert smaller.repeated(result) is smaller.repeated(result)  # made once, as a slice is


@MODES
def test_where_and_power_broadcast(fused):
    x = RNG.standard_normal((4, 3))
    cond = np.array([True, False, True])
    col = np.array([[2.0], [1.0], [3.0], [0.0]])
    with mode(fused):
        same(pk.where(cond, fresh(x), 0.0), np.where(cond, x, 0.0))
        same(pk.where(x > 0, col, fresh(x)), np.where(x > 0, col, x))
        np.testing.assert_allclose(pk.power(np.abs(x), col), np.power(np.abs(x), col), rtol=1e-14)


# --- errors name the function and the parameter -------------------------------------------------------------------
@pytest.mark.parametrize("call,error,pattern", [
    (lambda: pk.unique(np.array(["a", "b"])), TypeError, r"unique: view must be .* kfuse dtype"),
    (lambda: pk.all(np.zeros(3), axis=1), ValueError, r"all: axis 1 is out of range"),
    (lambda: pk.any(np.zeros((2, 2)), axis=1.5), TypeError, r"any: axis must be"),
    (lambda: pk.find_max(pk.zeros(0)), ValueError, r"find_max: viewA is empty"),
    (lambda: pk.searchsorted(np.zeros((2, 2)), 1.0), ValueError, r"searchsorted: view must be 1-D"),
    (lambda: pk.searchsorted(np.zeros(3), 1.0, side="middle"), ValueError, r"searchsorted: side must be"),
    (lambda: pk.searchsorted(np.zeros(3), 1.0, sorter=[0, 1]), ValueError, r"searchsorted: sorter must be"),
    (lambda: pk.in1d(np.zeros(2), [object()]), TypeError, r"in1d: viewB must be"),
    (lambda: pk.index(np.zeros(3), np.array([0.0, 1.0])), TypeError, r"index: viewB must hold integers"),
    (lambda: pk.index(np.zeros(3), np.array([True, False, True])), TypeError, r"index: viewB must hold integers"),
    (lambda: pk.index(np.zeros(3), np.array([0, 3])), IndexError, r"index: viewB holds 3, out of range"),
    (lambda: pk.index(np.zeros(3), np.array([-4])), IndexError, r"index: viewB holds -4"),
    (lambda: pk.index(np.float64(2.0), np.array([0])), ValueError, r"index: viewA must have"),
    (lambda: pk.average(np.ones((2, 3)), weights=np.ones(3)), TypeError, r"average: weights .* give axis"),
    (lambda: pk.average(np.ones((2, 3)), axis=0, weights=np.ones(3)), ValueError, r"average: weights has 3"),
    (lambda: pk.average(np.ones((2, 3)), axis=0, weights=np.ones((3, 1))), TypeError, r"average: weights of shape"),
    (lambda: pk.average(np.ones(3), weights=np.zeros(3)), ZeroDivisionError, r"average: weights sum to zero"),
    (lambda: pk.average(np.ones((0, 3)), axis=0), ValueError, r"average: a has no elements"),
    (lambda: pk.average(np.ones(3), axis=2), ValueError, r"average: axis 2 is out of range"),
    (lambda: pk.reshape(np.zeros(6), (4, -1)), ValueError, r"reshape: cannot reshape 6 elements"),
    (lambda: pk.reshape(np.zeros(6), (-1, -1)), ValueError, r"reshape: shape .* one -1"),
    (lambda: pk.reshape(np.zeros(6), 2.5), TypeError, r"reshape: shape must be"),
    (lambda: pk.reshape(np.zeros(6), 6, order="K"), ValueError, r"reshape: order must be"),
    (lambda: pk.ravel(np.zeros(6), order="X"), ValueError, r"ravel: order must be"),
    (lambda: pk.transpose(np.zeros((2, 3)), axes=(0, 0)), ValueError, r"transpose: axes .* not a permutation"),
    (lambda: pk.transpose(np.zeros((2, 3)), axes=(0, 2)), ValueError, r"transpose: axes"),
    (lambda: pk.transpose(np.zeros((2, 3)), axes=("a", 0)), TypeError, r"transpose: axes must be"),
    (lambda: pk.expand_dims(np.zeros(3), axis=2), ValueError, r"expand_dims: axis 2 is out of range"),
    (lambda: pk.expand_dims(np.zeros(3), axis=(0, 0)), ValueError, r"expand_dims: axis .* repeats"),
    (lambda: pk.expand_dims(np.zeros(3), axis=None), TypeError, r"expand_dims: axis must be"),
    (lambda: pk.atleast_2d(), TypeError, r"atleast_2d: needs at least one array"),
    (lambda: pk.hstack(np.zeros((2, 2)), np.zeros((3, 2))), ValueError, r"hstack: arrays of shapes"),
    (lambda: pk.hstack(np.zeros(2), np.zeros((2, 2))), ValueError, r"hstack: arrays of shapes"),
    (lambda: pk.hstack(np.zeros(2)), TypeError, r"hstack: give the arrays"),
    (lambda: pk.hstack(()), ValueError, r"hstack: needs at least one array"),
    (lambda: pk.col(np.zeros(3), 0), ValueError, r"col: view must be 2-D"),
    (lambda: pk.col(np.zeros((3, 2)), 2), IndexError, r"col: col 2 is out of range"),
    (lambda: pk.col(np.zeros((3, 2)), 0.5), TypeError, r"col: col must be an int"),
    (lambda: pk.logspace(0, 1, -1), ValueError, r"logspace: num must be non-negative"),
    (lambda: pk.logspace(0, 1, 2.0), TypeError, r"logspace: num must be an int"),
    (lambda: pk.linspace("0", 1), TypeError, r"linspace: start must be a number"),
    (lambda: pk.logspace(0, 1, 3, base=[2]), TypeError, r"logspace: base must be a number"),
    (lambda: pk.add(np.zeros((3, 2)), np.zeros(3)), ValueError, r"add: operands of shapes \(3, 2\), \(3,\) cannot"),
    (lambda: pk.where(np.ones(4, bool), np.zeros(3), 0.0), ValueError, r"where: operands of shapes"),
])
def test_bad_input_names_function_and_parameter(call, error, pattern):
    with pytest.raises(error, match=pattern):
        call()


# --- compiled kernels (Kokkos): the ops that launch kernels, eager and fused ---------------------------------------
@pytest.mark.backend("kokkos")
@MODES
def test_kernel_backed_functions_compiled(fused):
    x = RNG.standard_normal((6, 4))
    theta = RNG.standard_normal(4)
    w0 = RNG.standard_normal((3, 5))
    with mode(fused):
        v = fresh(x)
        same(pk.add(v, pk.negative(theta)), x - theta)  # broadcast copy + elementwise kernels
        same(pk.multiply(theta, theta[1:2]), theta * theta[1])  # a 1-D zero-stride View read by the copy
        same(pk.logical_not(pk.in1d(v, x[:2])), ~np.isin(x.ravel(), x[:2]))
        same(pk.col(pk.transpose(v), 2), x.T[:, 2].copy())
        same(pk.ravel(w0, order="F"), w0.ravel(order="F"))
        same(pk.hstack(v, pk.expand_dims(pk.col(v, 0), axis=1)), np.hstack([x, x[:, :1]]))
        same(pk.hstack(pk.ravel(v), np.array([1.5])), np.hstack([x.ravel(), 1.5]))
