"""The array API against NumPy: comparison, logical and math functions (PyKokkos's ufuncs and NumPy's next to
them), dtype promotion, broadcasting, ``out=``, integer powers, reductions (axes and axis tuples of 0-d to 4-D
arrays, keepdims, ``out=``), ``where``, ``copyto``, ``result_type``, 1-D ``matmul``/``dot``; eager and fused, on
the Python backend (no compiler), with one compiled smoke test. Hypothesis draws dtypes, shapes (0-d to 4-D and
broadcasting pairs), values and axes."""
import math
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import kfuse as pk

pytestmark = pytest.mark.backend("python")

# No 8-bit integers: NumPy does their math in float16, which kfuse computes in float32 (other overflows).
DTYPES = [np.bool_, np.int32, np.int64, np.float32, np.float64, np.uint16, np.uint64]
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
    elif dtype.kind == "u":
        elements = st.integers(0, 40)
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
    try:
        want = np_call(getattr(np, name), *args)
    except OverflowError:  # a Python int that does not fit the integer result (-3 for uint16)
        with pytest.raises(OverflowError, match=f"{name}: Python integer {s} out of bounds"):
            getattr(pk, name)(*(pk.array(x) if isinstance(x, np.ndarray) else x for x in args))
        return
    check(getattr(pk, name)(*(pk.array(x) if isinstance(x, np.ndarray) else x for x in args)), want, name)


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


MORE_BINARY = ["fmod", "remainder", "mod", "fmax", "fmin", "logaddexp2", "hypot", "arctan2", "copysign"]
# On two numbers these are the C math functions kernels call (float results), as pk.sqrt is: checked apart.
C_MATH_ON_NUMBERS = {"fmod", "hypot", "arctan2", "copysign"}


@FAST
@given(st.sampled_from(MORE_BINARY), st.booleans(), st.data())
def test_more_binary_views(name, fused, data):
    """PyKokkos's fmod/fmax/fmin/logaddexp2 and NumPy's remainder, hypot, arctan2, copysign: dtypes, broadcasting,
    zero divisors (integers give 0, floats NaN)."""
    a, b = data.draw(operand_pairs())
    if name in C_MATH_ON_NUMBERS and a.ndim == b.ndim == 0:
        return
    want = np_call(getattr(np, name), a, b)
    got = run(fused, lambda: getattr(pk, name)(pk.array(a), pk.array(b)))
    check(got, want, name)


@FAST
@given(st.sampled_from(MORE_BINARY), st.sampled_from([np.int32, np.int64, np.float32, np.float64]),
       st.sampled_from([3, -2, 0, 2.5, -0.0]), st.booleans(), st.booleans())
def test_more_binary_scalar(name, dtype, s, scalar_first, fused):
    a = np.array([-7, -2, 0, 3, 5, 8]).astype(dtype)
    args = (s, a) if scalar_first else (a, s)
    want = np_call(getattr(np, name), *args)
    got = run(fused, lambda: getattr(pk, name)(*(pk.array(x) if isinstance(x, np.ndarray) else x for x in args)))
    check(got, want, name)


def test_more_binary_edges():
    x = np.array([-1.0, 1.0, -0.0, 0.0, 5.5, -5.5, np.inf, np.nan, 3.0, -np.inf])
    y = np.array([np.inf, -np.inf, 2.0, -2.0, 0.0, -2.5, 2.0, 1.0, np.nan, -np.inf])
    for name in MORE_BINARY + ["logaddexp"]:
        check(getattr(pk, name)(pk.array(x), pk.array(y)), np_call(getattr(np, name), x, y), name)
        check(getattr(pk, name)(pk.array(y), pk.array(x)), np_call(getattr(np, name), y, x), name + " swapped")
    for name in ("remainder", "fmax", "fmin", "logaddexp2"):  # numbers: NumPy's values
        for p, q in ((7, -2), (-7.5, 2), (np.nan, 1.0), (3, 0)):
            assert np.isclose(getattr(pk, name)(p, q), np_call(getattr(np, name), p, q), equal_nan=True), name
    assert pk.fmod(7.0, -2.0) == math.fmod(7.0, -2.0) and pk.hypot(3, 4) == 5.0
    assert pk.arctan2(1.0, -1.0) == math.atan2(1.0, -1.0) and pk.copysign(2.0, -0.0) == -2.0


MORE_UNARY = ["arcsin", "arccos", "arctan", "arcsinh", "arccosh", "arctanh", "cbrt", "positive"]


@FAST
@given(st.sampled_from(DTYPES), shapes, st.sampled_from(MORE_UNARY), st.booleans(), st.data())
def test_more_unary(dtype, shape, name, fused, data):
    a = data.draw(values(dtype, shape))
    if name == "positive" and np.dtype(dtype) == np.bool_:
        with pytest.raises(TypeError, match="positive"):
            pk.positive(pk.array(a))
        return
    if name in ("arcsin", "arccos", "arctanh") and np.dtype(dtype).kind == "f":
        a = (a / 21).astype(dtype)  # inside the domain (-1, 1)
    if name == "arccosh":
        a = (np.abs(a) + 1).astype(dtype)
    want = np_call(getattr(np, name), a)
    got = run(fused, lambda: getattr(pk, name)(view=pk.array(a)))
    check(got, want, name)
    out = pk.zeros(a.shape, dtype=np.float64)
    assert getattr(pk, name)(pk.array(a), out=out) is out
    check(out, want, name + " out=", exact_dtype=False)


def test_inverse_trig_aliases_and_numbers():
    assert pk.asin is pk.arcsin and pk.atan2 is pk.arctan2 and pk.mod is pk.remainder
    assert pk.arcsin(0.5) == math.asin(0.5) and pk.cbrt(27.0) == np.cbrt(27.0) and pk.positive(-2) == -2
    assert pk.fmax(math.nan, 1.0) == 1.0 and pk.fmin(2, math.nan) == 2
    with pytest.raises(TypeError, match="fmod: viewB must be"):
        pk.fmod(pk.zeros(2), "x")
    with pytest.raises(ValueError, match="hypot: operands of shapes"):
        pk.hypot(pk.zeros(2), pk.zeros(3))


@pk.workunit
def more_scalar_math_k(i, out, a):
    out[i] = (pk.fmod(a[i], 0.75) + pk.hypot(a[i], 2.0) + pk.arctan2(a[i], -1.0) + pk.copysign(1.5, -a[i])
              + pk.cbrt(a[i]) + pk.arcsin(a[i] * 0.25) + pk.atan(a[i]) + pk.fmax(a[i], 1.0) + pk.fmin(a[i], 1.0))


@pytest.mark.parametrize("fused", [False, True])
def test_more_names_are_scalar_math_in_kernels(fused):
    a = np.array([0.5, 1.5, 3.0])
    out = pk.zeros(3)
    run(fused, lambda: pk.parallel_for(3, more_scalar_math_k, out=out, a=pk.array(a)))
    want = (np.fmod(a, 0.75) + np.hypot(a, 2.0) + np.arctan2(a, -1.0) + np.copysign(1.5, -a) + np.cbrt(a)
            + np.arcsin(a * 0.25) + np.arctan(a) + np.fmax(a, 1.0) + np.fmin(a, 1.0))
    check(out, want, "in-kernel math")


@FAST
@given(st.sampled_from([np.bool_, np.int32, np.int64]), st.sampled_from([np.bool_, np.int32, np.int64]),
       st.booleans(), st.booleans(), st.data())
def test_integer_power_negative_exponents(base_dt, exp_dt, pending, fused, data):
    """Integers to negative integer powers raise ValueError, as in NumPy: a scalar exponent at the call, an
    array exponent (even one still being computed by a pending kernel) once its values are read."""
    base = data.draw(values(base_dt, (5,)))
    exp = data.draw(values(exp_dt, (5,)))
    if np.dtype(exp_dt) != np.bool_:
        exp = (np.abs(exp) % 4 - data.draw(st.sampled_from([0, 1]))).astype(exp_dt)

    def go():
        e = pk.array(exp)
        if pending:  # the exponent as a kernel's result, not yet computed while fusing
            e = pk.copy(e)
        return pk.power(pk.array(base), e)
    try:
        want = np.power(base, exp)
    except ValueError:
        with pytest.raises(ValueError, match="power: integers to negative integer powers"):
            run(fused, go)
        return
    check(run(fused, go), want, "power")


def test_power_negative_scalar_exponents():
    ints = pk.array(np.array([1, 2, 3], dtype=np.int32))
    for bad in (lambda: pk.power(ints, -1), lambda: pk.power(2, -1),
                lambda: pk.power(pk.array(np.array([True])), -2)):
        with pytest.raises(ValueError, match="power: integers to negative integer powers are not allowed"):
            bad()
    check(pk.power(ints, -1.0), np.power(np.array([1, 2, 3], dtype=np.int32), -1.0), "int ** -1.0")
    check(pk.power(pk.array(np.array([2.0, 4.0])), -1), np.array([0.5, 0.25]), "float ** -1")
    check(pk.power(ints, 0), np.ones(3, dtype=np.int32), "int ** 0")
    pk.enable_fusion()
    try:
        with pytest.raises(ValueError, match="power"):
            pk.power(ints, pk.sum(pk.array(np.array([-1, -2]))))  # a pending Future exponent is waited for
    finally:
        pk.disable_fusion()


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


REDUCTIONS = ["sum", "prod", "min", "max", "mean", "var", "argmax", "argmin"]
ND_SHAPES = [(), (5,), (3, 4), (1, 1), (4, 1), (2, 3, 4), (2, 1, 3, 2), (3, 0, 2), (0,), (2, 0)]


@st.composite
def reduction_axes(draw, ndim: int, single: bool):
    """None, an axis (maybe negative) or, unless ``single``, a tuple of distinct axes (maybe empty)."""
    if ndim == 0:
        return None
    choice = draw(st.sampled_from(["none", "int"] if single else ["none", "int", "tuple"]))
    if choice == "none":
        return None
    if choice == "int":
        return draw(st.integers(-ndim, ndim - 1))
    picked = draw(st.lists(st.integers(0, ndim - 1), unique=True, max_size=ndim))
    return tuple(a - ndim if draw(st.booleans()) else a for a in picked)


def reduced_count(shape, axis) -> int:
    if axis is None:
        return int(np.prod(shape))
    chosen = axis if isinstance(axis, tuple) else (axis,)
    return int(np.prod([shape[a] for a in chosen]))


@FAST
@given(st.sampled_from(DTYPES), st.sampled_from(ND_SHAPES), st.sampled_from(REDUCTIONS), st.booleans(),
       st.booleans(), st.sampled_from(["none", "out", "transposed"]), st.data())
def test_reductions(dtype, shape, name, keepdims, fused, mode, data):
    """Every reduction against NumPy: whole arrays and axes (ints, tuples, negatives) of 0-d to 4-D arrays,
    keepdims, out= (a View for an axis, a 0-d View for the whole array), strided (transposed) inputs."""
    a = data.draw(values(dtype, shape))
    if mode == "transposed":
        a = a.T  # a strided View of NumPy's memory
    if name == "prod":
        a = (np.abs(a) % 3 + (a == 0)).astype(dtype) if np.dtype(dtype).kind != "b" else a
    axis = data.draw(reduction_axes(a.ndim, single=name.startswith("arg")))
    kw = {"ddof": data.draw(st.sampled_from([0, 1]))} if name == "var" else {}
    n = reduced_count(a.shape, axis)
    if n - kw.get("ddof", 0) <= 0 and name in ("mean", "var", "max", "min", "argmax", "argmin"):
        with pytest.raises(ValueError, match=name):  # NumPy refuses max/argmax; warns and gives NaN for mean/var
            run(fused, lambda: getattr(pk, name)(pk.array(a), axis=axis, keepdims=keepdims, **kw))
        return
    want = getattr(np, name)(a, axis=axis, keepdims=keepdims, **kw)
    whole_number = np.ndim(want) == 0 and not keepdims
    if np.dtype(dtype) == np.bool_ and name in ("min", "max") and whole_number:
        want = np.int64(want)  # bool min/max of a whole array come back as 0/1

    def go():
        v = pk.array(a)
        if mode != "out":
            return getattr(pk, name)(v, axis=axis, keepdims=keepdims, **kw)
        out = pk.zeros(np.shape(want), dtype=kf_dtype(np.asarray(want).dtype))
        assert getattr(pk, name)(v, axis=axis, keepdims=keepdims, out=out, **kw) is out
        return out
    got = run(fused, go)
    if mode == "out" and whole_number:
        got = got.copy()[()]
    check(got, want, f"{name} axis={axis} keepdims={keepdims} {mode}")


@FAST
@given(st.sampled_from(["sum", "mean", "max"]), st.booleans(), st.data())
def test_axis_reductions_into_strided_out(name, fused, data):
    """An out= that is a strided (transposed) View receives the results through a copy kernel."""
    a = data.draw(values(np.float64, (3, 4, 5)))
    want = getattr(np, name)(a, axis=1)
    out = pk.zeros((5, 3))

    def go():
        t = pk.transpose(out)
        assert getattr(pk, name)(pk.array(a), axis=1, out=t) is t
        return t
    check(run(fused, go), want, name + " strided out=")


def test_reduction_out_and_errors():
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    out = pk.zeros(4, dtype=pk.int64)
    assert pk.sum(pk.array(a), axis=0, out=out) is out
    check(out, a.sum(axis=0), "sum out=")
    with pytest.raises(ValueError, match="sum: axis 2"):
        pk.sum(pk.array(a), axis=2)
    with pytest.raises(ValueError, match="prod: axis"):
        pk.prod(pk.array(a), axis=5)
    with pytest.raises(ValueError, match="mean: axis"):
        pk.mean(pk.array(a), axis=(0, 0))
    with pytest.raises(TypeError, match="argmax: axis must be an int or None"):
        pk.argmax(pk.array(a), axis=(0,))
    with pytest.raises(TypeError, match="max: axis must be an int or a tuple"):
        pk.max(pk.array(a), axis="x")
    with pytest.raises(ValueError, match="sum: out= has shape"):
        pk.sum(pk.array(a), out=pk.zeros(1))
    with pytest.raises(ValueError, match="min: out= has shape"):
        pk.min(pk.array(a), axis=1, out=pk.zeros(4))
    with pytest.raises(TypeError, match="var: ddof must be a number"):
        pk.var(pk.array(a), ddof="1")
    check(pk.var(pk.array(a), axis=1, ddof=0.5), a.var(axis=1, ddof=0.5), "var ddof=0.5")
    check(pk.sum(pk.array(a), out=pk.zeros((), dtype=pk.int32)).copy()[()], np.int32(66), "sum into int32 0-d")


@pytest.mark.parametrize("axis, gathers", [(1, True), ((0, 2), True), (0, False), (2, False), ((1, 2), False)])
def test_axis_lines_are_views_unless_in_the_middle(axis, gathers):
    """Leading or trailing axes are reduced through a strided 2-D View of the same memory; middle axes of a 3-D
    array first gather their lines with one kernel. Either way the pending producer's result is what is reduced."""
    x = np.linspace(-1.0, 1.0, 60).reshape(3, 4, 5)
    pk.enable_fusion()
    try:
        y = pk.multiply(pk.add(pk.array(x), 1.0), 2.0)
        got = pk.sum(y, axis=axis).copy()
    finally:
        pk.disable_fusion()
    np.testing.assert_allclose(got, ((x + 1.0) * 2.0).sum(axis=axis))
    assert ("gather_rows_k" in pk.explain()) == gathers, pk.explain()


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
    assert text.count("flush #") == 1 and "-> 1 kernel launch(es)" in text, text


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
    ia, ib = np.array([7, -7, 5, 3]), np.array([2, 2, 0, -2])
    check(pk.fmod(pk.array(ia), pk.array(ib)), np_call(np.fmod, ia, ib), "fmod int")
    check(pk.remainder(pk.array(ia), pk.array(ib)), np_call(np.remainder, ia, ib), "remainder int")
    check(pk.remainder(pk.array(a), -1.5), np.remainder(a, -1.5), "remainder float")
    check(pk.fmax(pk.array(np.array([np.nan, 1.0])), 0.5), np.array([0.5, 1.0]), "fmax")
    check(pk.logaddexp2(pk.array(a), pk.array(b)), np.logaddexp2(a, b), "logaddexp2")
    check(pk.arcsin(pk.array(a / 4)), np.arcsin(a / 4), "arcsin")
    check(pk.cbrt(pk.array(a)), np.cbrt(a), "cbrt")
    c = np.arange(24.0).reshape(2, 3, 4)
    check(pk.sum(pk.array(c), axis=1), c.sum(axis=1), "sum middle axis")
    check(pk.argmax(pk.array(c), axis=0, keepdims=True), c.argmax(axis=0, keepdims=True), "argmax keepdims")


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("name", ["floor_divide", "remainder", "fmod"])
def test_unsigned_division_beyond_the_int64_range(name, fused):
    """uint64 values from 2**63 up: the signed kernels compute through int64 and would wrap. (A Python int scalar
    must fit int64, the type of a kernel's integer parameter: a larger one is refused with a clear error.)"""
    a = np.array([2**64 - 3, 2**63 + 5, 7, 0, 2**64 - 1], dtype=np.uint64)
    b = np.array([2, 3, 2**63 + 1, 5, 0], dtype=np.uint64)
    fn, want_fn = getattr(pk, name), getattr(np, name)
    with np.errstate(divide="ignore"):
        for got, want in ((lambda: fn(pk.array(a), pk.array(b)), want_fn(a, b)),
                          (lambda: fn(pk.array(a), 3), want_fn(a, 3)),
                          (lambda: fn(2**62 + 1, pk.array(b)), want_fn(np.uint64(2**62 + 1), b))):
            check(run(fused, got), want, name)
