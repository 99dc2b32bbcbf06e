"""The array API against NumPy: comparison, logical and math functions, dtype promotion, broadcasting, ``out=``,
reductions over axes, ``where``, ``copyto``, ``result_type``, 1-D ``matmul``/``dot``; eager and fused, on the
Python backend (no compiler), with one compiled smoke test. Hypothesis draws dtypes, shapes (0-d, 1-D, 2-D and
broadcasting pairs), values and axes."""
import math
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import kfuse as pk

pytestmark = pytest.mark.backend("python")

DTYPES = [np.bool_, np.int32, np.int64, np.float32, np.float64]
# KFUSE_API_EXAMPLES=200 for a deeper search than the suite's quick one.
FAST = settings(max_examples=int(os.environ.get("KFUSE_API_EXAMPLES", 12)), deadline=None,
                suppress_health_check=list(HealthCheck))


def kf_dtype(dtype) -> np.dtype:
    """NumPy's result dtype as kfuse gives it (no float16: float32)."""
    dtype = np.dtype(dtype)
    return np.dtype(np.float32) if dtype == np.float16 else dtype


def values(dtype, shape):
    """Arrays of small values (ints in [-20, 20], floats in [-20, 20] without NaN) of ``dtype`` and ``shape``."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        elements = st.booleans()
    elif dtype.kind == "i":
        elements = st.integers(-20, 20)
    else:
        elements = st.floats(-20, 20, width=32 if dtype == np.float32 else 64)
    return hnp.arrays(dtype, shape, elements=elements)


shapes = st.sampled_from([(), (1,), (5,), (3, 4), (0,), (2, 0)])
pair_shapes = st.sampled_from([((5,), (5,)), ((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 1), (1, 4)), ((1,), (6,)),
                               ((), (4,)), ((2, 3), ()), ((4, 1), (4,)), ((0,), (1,)),
                               ((), ())])


@st.composite
def operand_pairs(draw, dtypes=DTYPES):
    sa, sb = draw(pair_shapes)
    if draw(st.booleans()):
        sa, sb = sb, sa
    return draw(values(draw(st.sampled_from(dtypes)), sa)), draw(values(draw(st.sampled_from(dtypes)), sb))


def check(got, want, name, exact_dtype=True):
    """``got`` (a View, a number or a Future) equals NumPy's ``want`` in shape, dtype and value."""
    want = np.asarray(want)
    if isinstance(got, pk.View):
        arr = got.copy()
        assert arr.shape == want.shape, name
        if exact_dtype:
            assert arr.dtype == kf_dtype(want.dtype), (name, arr.dtype, want.dtype)
    else:
        arr = np.asarray(pk.value(got) if isinstance(got, pk.Future) else got)
        assert want.ndim == 0, name
        if want.dtype.kind in "biu":
            assert isinstance(arr.item(), (int, bool)), (name, got)
    tol = 2e-3 if want.dtype == np.float16 else 1e-5 if np.float32 in (arr.dtype, want.dtype) else 1e-12
    if want.dtype.kind == "f" or arr.dtype.kind == "f":
        np.testing.assert_allclose(arr.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol,
                                   equal_nan=True, err_msg=name)
    else:
        np.testing.assert_array_equal(arr, want, err_msg=name)


def run(fused: bool, fn):
    """fn() with fusion on (results read after the trace flushes) or off."""
    if fused:
        pk.enable_fusion()
    try:
        return fn()
    finally:
        if fused:
            pk.disable_fusion()


def np_call(fn, *args, **kw):
    with np.errstate(all="ignore"):
        return fn(*args, **kw)


COMPARISONS = ["greater", "greater_equal", "less", "less_equal", "equal", "not_equal", "logical_and", "logical_or",
               "logical_xor"]
ARITHMETIC = ["add", "multiply", "maximum", "minimum", "logaddexp"]


@FAST
@given(st.sampled_from([(DTYPES, COMPARISONS + ARITHMETIC),
                        (DTYPES[1:], ["subtract", "divide", "floor_divide"])]), st.booleans(), st.data())
def test_binary_views(case, fused, data):
    """Two array operands of any dtypes and broadcastable shapes (no bools where NumPy refuses them)."""
    dtypes, names = case
    a, b = data.draw(operand_pairs(dtypes))
    name = data.draw(st.sampled_from(names))
    want = np_call(getattr(np, name), a, b)
    got = run(fused, lambda: getattr(pk, name)(pk.array(a), pk.array(b)))
    check(got, want, name)


@FAST
@given(values(np.float64, st.sampled_from([(4,), (2, 3)])),
       st.sampled_from([2, -3, 2.5, 0, True]), st.sampled_from(COMPARISONS + ARITHMETIC + ["floor_divide"]),
       st.booleans(), st.booleans())
def test_binary_scalar(a, s, name, scalar_first, fused):
    args = (s, a) if scalar_first else (a, s)
    want = np_call(getattr(np, name), *args)
    got = run(fused, lambda: getattr(pk, name)(*(pk.array(x) if isinstance(x, np.ndarray) else x for x in args)))
    check(got, want, name)


@FAST
@given(st.sampled_from(DTYPES[1:]), st.sampled_from([2, -3, 2.5, 0]),
       st.sampled_from(COMPARISONS + ["add", "subtract", "multiply", "floor_divide", "maximum"]), st.booleans())
def test_binary_scalar_dtypes(dtype, s, name, scalar_first):
    """Python numbers are weak in NumPy 2's promotion: int32 View + 2 is int32, + 2.5 float64."""
    a = np.arange(-3, 4).astype(dtype)
    args = (s, a) if scalar_first else (a, s)
    check(getattr(pk, name)(*(pk.array(x) if isinstance(x, np.ndarray) else x for x in args)),
          np_call(getattr(np, name), *args), name)


@FAST
@given(st.sampled_from(COMPARISONS + ["add", "subtract", "multiply", "divide", "maximum"]), st.booleans(),
       st.sampled_from([0.1, 1 / 3, 2.5, 16777217]))
def test_float32_with_python_scalars(name, scalar_first, s):
    """A Python number next to a float32 View takes float32 precision, as in NumPy (0.1f, not 0.1)."""
    a = np.array([0.1, 1 / 3, 2.5, -0.1, 16777216.0, 7.0], dtype=np.float32)
    args = (s, a) if scalar_first else (a, s)
    check(getattr(pk, name)(*(pk.array(x) if isinstance(x, np.ndarray) else x for x in args)),
          np_call(getattr(np, name), *args), name)


def test_float32_against_integers_in_double():
    a = np.array([16777217, 3, -5], dtype=np.int64)
    b = np.array([16777216.0, 3.0, -5.5], dtype=np.float32)
    for name in COMPARISONS + ["add", "subtract", "multiply"]:
        check(getattr(pk, name)(pk.array(a), pk.array(b)), np_call(getattr(np, name), a, b), name)


@FAST
@given(operand_pairs(), st.booleans())
def test_binary_out(pair, fused):
    a, b = pair
    want = np.greater(a, b)
    shape = np.broadcast_shapes(a.shape, b.shape)
    out = pk.zeros(shape, dtype=np.bool_)

    def go():
        r = pk.greater(pk.array(a), pk.array(b), out=out)
        assert r is out
        return out
    check(run(fused, go), want, "greater out=")
    out = pk.zeros(shape)
    check(pk.add(pk.array(a), pk.array(b), out=out), np.add(a, b).astype(np.float64), "add out=")


UNARY = ["sqrt", "exp", "log", "sin", "cos", "tan", "tanh", "sinh", "cosh", "log2", "log10", "log1p", "expm1",
         "exp2", "floor", "ceil", "trunc", "isnan", "isinf", "isfinite", "logical_not", "absolute", "square",
         "reciprocal", "round"]


@FAST
@given(st.sampled_from(DTYPES), shapes, st.sampled_from(UNARY), st.booleans(), st.data())
def test_unary(dtype, shape, name, fused, data):
    a = data.draw(values(dtype, shape))
    if name in ("log", "log2", "log10", "sqrt", "log1p"):
        a = np.abs(a) + (1 if np.dtype(dtype).kind == "f" else 0)
    if name == "reciprocal":
        if np.dtype(dtype).kind == "b":
            return
        a = np.where(a == 0, 1, a).astype(dtype)
    want = np_call(getattr(np, name), a)
    got = run(fused, lambda: getattr(pk, name)(pk.array(a)))
    check(got, want, name)
    out = pk.zeros(a.shape, dtype=np.float64)  # out= of another dtype: NumPy's values, converted
    assert getattr(pk, name)(view=pk.array(a), out=out) is out
    check(out, want, name + " out=", exact_dtype=False)


@FAST
@given(st.sampled_from(DTYPES[1:]), shapes, st.sampled_from(["negative", "sign"]), st.booleans(), st.data())
def test_unary_signed(dtype, shape, name, fused, data):
    a = data.draw(values(dtype, shape))
    check(run(fused, lambda: getattr(pk, name)(pk.array(a))), np_call(getattr(np, name), a), name)


def test_pykokkos_keyword_and_scalars():
    a = np.array([1.0, 2.0, 4.0])
    check(pk.log(view=pk.array(a)), np.log(a), "log(view=)")
    check(pk.sqrt(view=pk.array(a)), np.sqrt(a), "sqrt(view=)")
    assert pk.log(2.0) == math.log(2.0) and pk.floor(2.5) == 2 and pk.isnan(math.nan)
    assert pk.round(2.5) == 2 and pk.round(-0.5) == 0
    with pytest.raises(TypeError, match="log: view is required"):
        pk.log()
    with pytest.raises(TypeError, match="sign"):
        pk.sign(pk.array(np.array([True])))
    with pytest.raises(TypeError, match="subtract"):
        pk.subtract(pk.array(np.array([True])), pk.array(np.array([False])))
    with pytest.raises(TypeError, match="greater: viewB must be a View, an array or a number, got str"):
        pk.greater(pk.zeros(3), "x")
    with pytest.raises(TypeError, match="log: view must be"):
        pk.log("x")
    with pytest.raises(ValueError, match="where: operands of shapes"):
        pk.where(pk.zeros(3, dtype=pk.bool_), pk.zeros(4), 1.0)
    with pytest.raises(ValueError, match="equal: operands of shapes"):
        pk.equal(pk.zeros(3), pk.zeros(4))
    with pytest.raises(TypeError, match="round: decimals must be an int"):
        pk.round(pk.zeros(3), decimals=1.5)


@pk.workunit
def scalar_math_k(i, out, a):
    out[i] = pk.log(a[i]) + pk.sqrt(a[i]) + pk.sin(a[i]) + pk.floor(a[i]) + pk.exp(a[i] * 0.1) + pk.tanh(a[i])


@pytest.mark.parametrize("fused", [False, True])
def test_same_names_are_scalar_math_in_kernels(fused):
    a = np.array([0.5, 1.5, 3.0])
    out = pk.zeros(3)
    run(fused, lambda: pk.parallel_for(3, scalar_math_k, out=out, a=pk.array(a)))
    check(out, np.log(a) + np.sqrt(a) + np.sin(a) + np.floor(a) + np.exp(a * 0.1) + np.tanh(a), "in-kernel math")


@FAST
@given(st.lists(st.sampled_from([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999999999999994, 3.7, -3.2, 1e300]),
                min_size=1, max_size=8), st.sampled_from([0, 1, 2, -1]))
def test_round_half_to_even(xs, decimals):
    a = np.array(xs)
    check(pk.round(pk.array(a), decimals=decimals), np.round(a, decimals), "round")


def test_floor_divide_edges():
    a = np.array([1.0, -1.0, 7.0, -7.0, 0.0, 1.0, 5.5])
    b = np.array([0.1, 0.1, 2.0, 2.0, -3.0, 0.0, -2.0])
    check(pk.floor_divide(pk.array(a), pk.array(b)), np_call(np.floor_divide, a, b), "floor_divide float")
    ia, ib = np.array([7, -7, 7, -7, 3]), np.array([2, 2, -2, -2, 0])
    check(pk.floor_divide(pk.array(ia), pk.array(ib)), np_call(np.floor_divide, ia, ib), "floor_divide int")
    x = np.array([-np.inf, 0.0, np.inf, np.nan, 700.0])
    check(pk.logaddexp(pk.array(x), pk.array(x[::-1].copy())), np_call(np.logaddexp, x, x[::-1]), "logaddexp")
    check(pk.maximum(pk.array(x), 1.0), np.maximum(x, 1.0), "maximum nan")


@FAST
@given(st.sampled_from(DTYPES), st.sampled_from([(3,), (2, 3)]), st.sampled_from(DTYPES), st.sampled_from(DTYPES),
       st.booleans(), st.data())
def test_where_broadcasts_all_three(cdt, cshape, adt, bdt, fused, data):
    c = data.draw(values(cdt, cshape))
    a = data.draw(values(adt, data.draw(st.sampled_from([(3,), (2, 1), (1, 3), ()]))))
    b = data.draw(values(bdt, data.draw(st.sampled_from([(3,), (2, 3), ()]))))
    check(run(fused, lambda: pk.where(pk.array(c), pk.array(a), pk.array(b))), np.where(c, a, b), "where")
    check(pk.where(pk.array(c), pk.array(a), 7), np.where(c, a, 7), "where scalar")


@FAST
@given(st.sampled_from(DTYPES), st.sampled_from(DTYPES), st.sampled_from([((4,), (4,)), ((2, 3), (3,)),
                                                                           ((2, 3), (2, 1)), ((3,), ())]),
       st.data())
def test_copyto(dst_dt, src_dt, shapes_, data):
    dst = data.draw(values(dst_dt, shapes_[0]))
    src = data.draw(values(src_dt, shapes_[1]))
    view = pk.array(dst.copy())
    if not np.can_cast(src.dtype, dst.dtype, "same_kind"):
        with pytest.raises(TypeError, match="copyto"):
            pk.copyto(view, pk.array(src))
        return
    np.copyto(dst, src)
    assert pk.copyto(view, pk.array(src)) is None
    check(view, dst, "copyto")


def test_copyto_errors_and_scalars():
    v = pk.zeros(3)
    pk.copyto(v, 2)
    check(v, np.full(3, 2.0), "copyto scalar")
    with pytest.raises(ValueError, match="copyto: viewB of shape"):
        pk.copyto(v, pk.zeros(4))
    with pytest.raises(TypeError, match="copyto: cannot cast"):
        pk.copyto(pk.zeros(3, dtype=pk.int32), 2.5)


@FAST
@given(st.lists(st.sampled_from(DTYPES), min_size=1, max_size=3), st.sampled_from([None, 1, 2.5, True]))
def test_result_type(dtypes, scalar):
    views = [pk.array(np.zeros(2, d)) for d in dtypes]
    extra = [] if scalar is None else [scalar]
    assert pk.result_type(*views, *extra) == kf_dtype(np.result_type(*(np.zeros(2, d) for d in dtypes), *extra))
    assert pk.result_type(pk.float32, np.int64) == np.float64


@FAST
@given(operand_pairs(), st.sampled_from(["add", "multiply", "subtract", "divide", "power"]))
def test_promotion_of_arithmetic(pair, name):
    a, b = pair
    if name in ("subtract", "power") and np.bool_ in (a.dtype.type, b.dtype.type):
        return
    if name == "power":
        b = np.abs(b) % 3
    if name == "divide" and np.dtype(b.dtype).kind != "f":
        b = np.where(b == 0, 1, b).astype(b.dtype)
    check(getattr(pk, name)(pk.array(a), pk.array(b)), np_call(getattr(np, name), a, b), name)


REDUCTIONS = ["sum", "prod", "min", "max", "mean"]


@FAST
@given(st.sampled_from(DTYPES), st.sampled_from([(5,), (3, 4), (1, 1), (4, 1)]), st.sampled_from(REDUCTIONS),
       st.sampled_from([None, 0, 1, -1]), st.booleans(), st.data())
def test_reductions(dtype, shape, name, axis, fused, data):
    a = data.draw(values(dtype, shape))
    if name == "prod":
        a = (np.abs(a) % 3 + (a == 0)).astype(dtype) if np.dtype(dtype).kind != "b" else a
    if axis is not None and axis >= len(shape):
        return
    want = getattr(np, name)(a, axis=axis)
    got = run(fused, lambda: getattr(pk, name)(pk.array(a), axis=axis))
    if np.dtype(dtype) == np.bool_ and name in ("min", "max") and axis is None:
        want = np.int64(want)  # bool min/max of a whole array come back as 0/1
    check(got, want, f"{name} axis={axis}")


def test_reduction_out_and_errors():
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    out = pk.zeros(4, dtype=pk.int64)
    assert pk.sum(pk.array(a), axis=0, out=out) is out
    check(out, a.sum(axis=0), "sum out=")
    with pytest.raises(ValueError, match="sum: axis 2"):
        pk.sum(pk.array(a), axis=2)
    with pytest.raises(ValueError, match="prod: axis"):
        pk.prod(pk.array(a), axis=5)


@FAST
@given(st.sampled_from(DTYPES), st.sampled_from(DTYPES), st.integers(0, 6), st.booleans(), st.data())
def test_vector_dot_is_a_scalar(da, db, n, fused, data):
    a, b = data.draw(values(da, (n,))), data.draw(values(db, (n,)))
    want = np.dot(a, b)
    if want.dtype == np.bool_:
        want = np.int64(np.dot(a.astype(np.int64), b.astype(np.int64)))  # bool dot comes back as an int count
    check(run(fused, lambda: pk.dot(pk.array(a), pk.array(b))), want, "dot")
    check(run(fused, lambda: pk.matmul(pk.array(a), pk.array(b))), want, "matmul")


def test_elementwise_chain_still_fuses():
    x = pk.array(np.linspace(0.5, 2.0, 64))
    pk.enable_fusion()
    y = pk.where(pk.greater(x, 1.0), pk.log(x), pk.sqrt(x))
    z = pk.logaddexp(pk.multiply(y, 2.0), pk.round(y))
    result = z.copy()
    pk.disable_fusion()
    xs = np.linspace(0.5, 2.0, 64)
    ys = np.where(xs > 1.0, np.log(xs), np.sqrt(xs))
    np.testing.assert_allclose(result, np.logaddexp(ys * 2.0, np.round(ys)))
    text = pk.explain()
    assert "7 call(s) -> 1 kernel launch(es)" in text, text


@pytest.mark.backend("kokkos")
def test_compiled_smoke():
    a = np.array([[1.5, -2.5, 0.5], [3.0, -0.0, 2.5]])
    b = np.array([1, 2, 3], dtype=np.int32)
    check(pk.greater(pk.array(a), pk.array(b)), a > b, "greater")
    check(pk.round(pk.array(a)), np.round(a), "round")
    check(pk.floor_divide(pk.array(a), pk.array(b)), a // b, "floor_divide")
    check(pk.logaddexp(pk.array(a), 1.0), np.logaddexp(a, 1.0), "logaddexp")
    check(pk.where(pk.array(a > 0), pk.array(a), pk.array(b)), np.where(a > 0, a, b), "where")
    check(pk.sum(pk.array(b)), np.sum(b), "sum int")
    check(pk.sum(pk.array(a), axis=0), a.sum(axis=0), "sum axis 0")
    check(pk.prod(pk.array(b)), np.prod(b), "prod int")
    check(pk.sign(pk.array(a)), np.sign(a), "sign")
