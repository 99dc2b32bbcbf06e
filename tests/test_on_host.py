"""Small element-wise operations computed by NumPy on the host (kfuse/ops/on_host.py) against their kernels.

The host path must give the kernel's values bit for bit (its dtype, every NaN and signed zero), eager and fused,
so that a program computes the same at any size and with or without fusion. Hypothesis draws the operation,
dtypes, shapes (strided slices included), Python scalars (inexact in float32, out of an int32's range, inf, NaN)
and ``out=``; each case runs once with every operation through its kernel (KFUSE_HOST_ELEMENTS=0) and once with
the host path allowed, on the Python backend, and a few fixed cases on compiled kernels. Also: the host path is
taken only where it may be (nothing pending, no GPU default space, at most the limit's elements) and is quiet
where NumPy would warn. A NaN's sign and payload are not compared: IEEE 754 leaves them open (x86 gives 0 * inf
a negative NaN, the Python backend's kernels a positive one).
"""
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import kfuse as pk

LARGE = "1000000"
EXAMPLES = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
BINARY = ["add", "subtract", "multiply", "divide", "greater", "greater_equal", "less", "less_equal", "equal",
          "not_equal", "logical_and", "logical_or", "logical_xor"]
UNARY = ["negative", "absolute", "square", "sqrt", "logical_not", "copy"]
DTYPES = [np.float64, np.float32, np.int64, np.int32, np.bool_, np.uint16]
SCALARS = [2, -3, 0, 2.5, 0.1, -0.0, 1e300, float("inf"), float("nan"), 2 ** 40, True]


@pytest.fixture(autouse=True)
def host_space():
    """The host path is for host spaces (a GPU's data lives there): these tests run on one whatever
    KFUSE_DEFAULT_SPACE says."""
    pk.set_default_space(pk.OpenMP)


def elements(dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return st.booleans()
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return st.integers(max(info.min, -(2 ** 40)), min(info.max, 2 ** 40))
    return st.floats(width=32 if dtype == np.float32 else 64)  # inf, NaN, -0.0, subnormals


@st.composite
def operands(draw):
    """A 2-D array, and how an operand is taken from it: whole, a row, a strided column or a strided block."""
    dtype = draw(st.sampled_from(DTYPES))
    array = draw(hnp.arrays(dtype, (4, 6), elements=elements(dtype)))
    pick = draw(st.sampled_from(["whole", "row", "column", "block"]))
    return array, pick


def taken(view, pick):
    return {"whole": lambda v: v, "row": lambda v: v[1, :], "column": lambda v: v[:, 2][:4],
            "block": lambda v: v[1:3, ::2]}[pick](view)


def compute(monkeypatch, limit: str, fused: bool, program):
    """``program()`` (returning Views) with KFUSE_HOST_ELEMENTS=``limit``; its results as NumPy arrays and how
    many operations the host did."""
    monkeypatch.setenv("KFUSE_HOST_ELEMENTS", limit)
    pk.reset_stats()
    if fused:
        pk.enable_fusion()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (test_the_host_is_as_quiet_as_the_kernels)
            results = [r.copy() if isinstance(r, pk.View) else r for r in program()]
    finally:
        if fused:
            pk.disable_fusion()
    return results, pk.stats()["array_ops_on_host"]


def assert_identical(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    if a.dtype.kind == "f":  # every bit but a NaN's sign and payload, which IEEE 754 leaves open
        numbers = ~np.isnan(a)
        assert np.array_equal(a, b, equal_nan=True) and np.array_equal(np.signbit(a[numbers]),
                                                                       np.signbit(b[numbers])), (a, b)
    else:
        assert np.array_equal(a, b), (a, b)


def same_both_ways(monkeypatch, fused, program):
    """The program's results with the host path and through the kernels; how many operations the host did."""
    want, none = compute(monkeypatch, "0", fused, program)
    got, done = compute(monkeypatch, LARGE, fused, program)
    assert none == 0
    for g, w in zip(got, want, strict=True):
        assert_identical(g, w)
    return done


def attempt(fn):
    """fn()'s result, or the type of the error it raised (the kernel path and the host path raise alike)."""
    try:
        return [fn()]
    except (TypeError, ValueError, OverflowError) as exc:
        return [type(exc).__name__]


@pytest.mark.backend("python")
@EXAMPLES
@given(st.sampled_from(BINARY), operands(), st.one_of(operands(), st.sampled_from(SCALARS)), st.booleans(),
       st.sampled_from([None, "result", "float64"]), st.booleans())
def test_binary_operations_equal_their_kernels(monkeypatch, name, left, right, scalar_first, into_out, fused):
    """``into_out``: none, of the result's dtype, or float64 (the result is converted into it)."""
    def program():
        a = taken(pk.array(left[0]), left[1])
        b = taken(pk.array(right[0]), right[1]) if isinstance(right, tuple) else right
        args = (b, a) if scalar_first else (a, b)
        want = numpy_result(name, args)
        if into_out and want is not None and want.ndim:
            out = pk.array(np.zeros(want.shape, want.dtype if into_out == "result" else np.float64))
            return attempt(lambda: getattr(pk, name)(*args, out=out))
        return attempt(lambda: getattr(pk, name)(*args))
    same_both_ways(monkeypatch, fused, program)


def numpy_result(name, args):
    """NumPy's result for the operands, or None where NumPy refuses them."""
    try:
        with np.errstate(all="ignore"):
            return np.asarray(getattr(np, name)(*(x.copy() if isinstance(x, pk.View) else x for x in args)))
    except (TypeError, ValueError, OverflowError):
        return None


@pytest.mark.backend("python")
@EXAMPLES
@given(st.sampled_from(UNARY), operands(), st.booleans())
def test_unary_operations_copies_and_fills_equal_their_kernels(monkeypatch, name, x, fused):
    def program():
        v = taken(pk.array(x[0]), x[1])
        if name == "copy":
            into = pk.View(list(v.shape), pk.float64)
            pk.copyto(into, v, casting="unsafe")
            return [into]
        return attempt(lambda: getattr(pk, name)(v))
    same_both_ways(monkeypatch, fused, program)


@pytest.mark.backend("python")
@EXAMPLES
@given(st.sampled_from(DTYPES), st.sampled_from(SCALARS), st.booleans())
def test_fills_equal_their_kernels(monkeypatch, dtype, value, fused):
    def program():
        v = pk.array(np.zeros((3, 5), dtype))[:, 1:4]
        return attempt(lambda: pk.fill(v, value)) + [v]
    same_both_ways(monkeypatch, fused, program)


def small_statements():
    """jacobi-style statements on 12 elements, the host path's everyday work."""
    A, B = pk.array(np.linspace(0.0, 1.0, 12)), pk.zeros(12)
    for _ in range(3):
        pk.multiply(pk.add(pk.add(A[:-2], A[1:-1]), A[2:]), 1.0 / 3.0, out=B[1:-1])
        pk.multiply(pk.add(pk.add(B[:-2], B[1:-1]), B[2:]), 1.0 / 3.0, out=A[1:-1])
    return [A, B]


@pytest.mark.parametrize("fused", [False, True])
def test_small_statements_run_on_the_host_with_compiled_kernels_values(monkeypatch, fused):
    """On compiled kernels: every operation of the statements is done by the host, nothing is recorded or
    launched, and the values are the kernels'."""
    assert same_both_ways(monkeypatch, fused, small_statements) == 3 * 2 * 3
    assert pk.stats()["array_ops_recorded"] == pk.stats()["kernels_launched"] == 0


@pytest.mark.parametrize("name,dtype,scalar", [("divide", np.float32, 3.0), ("subtract", np.int32, 7),
                                               ("multiply", np.float64, 0.1), ("less", np.int64, 2.5),
                                               ("sqrt", np.float32, None)])
def test_compiled_kernels_and_host_agree(monkeypatch, name, dtype, scalar):
    x = np.array([-3, -1.5, -0.0, 0.0, 1, 2.5, 7, 1e30 if dtype in (np.float32, np.float64) else 99]).astype(dtype)

    def program():
        v = pk.array(x)
        return attempt(lambda: getattr(pk, name)(v) if scalar is None else getattr(pk, name)(scalar, v))
    assert same_both_ways(monkeypatch, False, program) == 1


@pytest.mark.backend("python")
def test_limit_counts_result_elements(monkeypatch):
    monkeypatch.setenv("KFUSE_HOST_ELEMENTS", "8")
    pk.reset_stats()
    pk.add(pk.ones(8), 1.0)
    assert pk.stats()["array_ops_on_host"] == 1
    pk.add(pk.ones(9), 1.0)
    assert pk.stats()["array_ops_on_host"] == 1


@pytest.mark.backend("python")
def test_pending_work_keeps_operations_in_the_trace(monkeypatch):
    """With a kernel call pending that writes an operand, the operation is recorded after it (the host would
    read stale values): its result shows the pending write."""
    monkeypatch.setenv("KFUSE_HOST_ELEMENTS", LARGE)
    x = pk.zeros(6)
    pk.reset_stats()
    with pk.fusion():
        pk.parallel_for(6, set_k, x=x, value=5.0)  # traced: pending
        y = pk.add(x, 1.0)
        assert pk.stats()["array_ops_on_host"] == 0
        assert y.copy().tolist() == [6.0] * 6


@pk.workunit
def set_k(i: int, x: pk.View1D[pk.double], value: float):
    x[i] = value


@pytest.mark.backend("python")
def test_a_pending_reader_keeps_a_write_in_the_trace(monkeypatch):
    """A pending call reads x; a small operation then writes x: it must wait (the call would read the new
    values)."""
    monkeypatch.setenv("KFUSE_HOST_ELEMENTS", LARGE)
    x, out = pk.array(np.arange(6.0)), pk.zeros(6)
    with pk.fusion():
        pk.parallel_for(6, copy_k, out=out, x=x)
        pk.multiply(x, 10.0, out=x)
        assert out.copy().tolist() == list(np.arange(6.0))
        assert x.copy().tolist() == list(np.arange(6.0) * 10)


@pk.workunit
def copy_k(i: int, out: pk.View1D[pk.double], x: pk.View1D[pk.double]):
    out[i] = x[i]


@pytest.mark.backend("python")
def test_a_gpu_default_space_keeps_operations_on_its_kernels(monkeypatch):
    """Where new arrays are for a GPU (its data lives there), the host does not compute them."""
    from kfuse.ops import _common

    monkeypatch.setenv("KFUSE_HOST_ELEMENTS", LARGE)
    monkeypatch.setattr(_common, "for_gpu", lambda: True)  # (the Python backend runs no GPU space: say it is one)
    pk.reset_stats()
    assert pk.add(pk.ones(4), 1.0).copy().tolist() == [2.0] * 4
    assert pk.stats()["array_ops_on_host"] == 0


@pytest.mark.backend("python")
def test_inexact_operations_stay_on_their_kernels(monkeypatch):
    """exp, log, power...: NumPy's last bits may differ from the kernel's math library."""
    monkeypatch.setenv("KFUSE_HOST_ELEMENTS", LARGE)
    pk.reset_stats()
    x = pk.array(np.linspace(0.1, 2.0, 5))
    pk.exp(x), pk.log(x), pk.power(x, 1.5), pk.sin(x)
    assert pk.stats()["array_ops_on_host"] == 0


@pytest.mark.parametrize("limit", ["0", LARGE])
def test_the_host_is_as_quiet_as_the_kernels(monkeypatch, limit):
    """NumPy warns of division by zero, overflow and invalid results; kernels do not, nor does the host path."""
    monkeypatch.setenv("KFUSE_HOST_ELEMENTS", limit)
    pk.reset_stats()
    x = pk.array(np.array([1.0, 0.0, -1.0, 1e308]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = [pk.divide(x, 0.0).copy(), pk.multiply(x, 1e10).copy(), pk.subtract(pk.divide(x, 0.0), x).copy()]
    assert pk.stats()["array_ops_on_host"] == (4 if limit == LARGE else 0)
    assert got[0].tolist()[0] == float("inf") and np.isnan(got[0][1]) and got[1][3] == float("inf")


SPECIAL = {np.float64: [-2.5, -0.0, 0.0, 1.0, 3.0, np.inf, -np.inf, np.nan, 1e308, 5e-324],
           np.float32: [-2.5, -0.0, 0.0, 1.0, 3.0, np.inf, -np.inf, np.nan, 3e38, 1e-45],
           np.int64: [-2 ** 63, -7, -1, 0, 1, 3, 2 ** 62, 2 ** 63 - 1, 5, 6],
           np.int32: [-2 ** 31, -7, -1, 0, 1, 3, 2 ** 30, 2 ** 31 - 1, 5, 6],
           np.bool_: [True, False] * 5}


def _rules():
    from kfuse.ops import on_host

    return sorted(on_host._RULES, key=lambda wu: wu.__name__)


@pytest.mark.backend("python")
@pytest.mark.parametrize("wu", _rules(), ids=lambda wu: wu.__name__)
@pytest.mark.parametrize("dtype", list(SPECIAL), ids=lambda d: np.dtype(d).name)
def test_every_rule_equals_its_kernel(monkeypatch, wu, dtype):
    """Each workunit the host may replace, run through kfuse/ops/lazy.py with operands of every dtype (special
    values, both Python scalars), into a result of each dtype it may have: the host's values are the kernel's,
    and the host did the work wherever its rule allows the dtypes."""
    from kfuse.ops import lazy, on_host

    names = wu.parsed.param_names[2:]
    scalars = [3, 0.1] if dtype not in (np.float32, np.bool_) else [3, 0.5]
    hosted = 0
    for scalar in scalars:
        for out_dtype in (dtype, np.bool_, np.float64):
            def program():
                operands = tuple(pk.array(np.array(SPECIAL[dtype], dtype)) if n in ("a", "b") else scalar
                                 for n in names)
                target = pk.array(np.zeros(10, out_dtype))
                lazy.run(wu, target, operands, False)
                return [target]
            done = same_both_ways(monkeypatch, False, program)
            hosted += done
            kind = on_host._RULES[wu][1]
            if kind != "fill" and out_dtype != (np.bool_ if kind == "bool" else dtype) and kind != "copy":
                assert done == 0  # a result of another dtype: the kernel converts, so the kernel runs
    if dtype == np.float64:
        assert hosted > 0


@pytest.mark.backend("python")
@pytest.mark.parametrize("limit", ["0", LARGE])
def test_what_the_kernels_refuse_the_host_refuses(monkeypatch, limit):
    """A strided 3-D out= is refused at any size, not only where kernels would run it (a program must not work
    on small data and fail on large)."""
    monkeypatch.setenv("KFUSE_HOST_ELEMENTS", limit)
    x = pk.array(np.zeros((2, 3, 4)))[:, ::2, :]
    with pytest.raises(ValueError, match="rank 1 or 2"):
        pk.add(x, 1.0, out=x)
    with pytest.raises(ValueError, match="rank 1 or 2"):
        pk.copyto(x, pk.array(np.ones((2, 2, 4))))


def test_a_read_only_out_is_written_as_its_kernel_writes_it(monkeypatch):
    """NumPy refuses to write a read-only array; a compiled kernel writes through it: the host path leaves it to
    the kernel, so the program behaves the same at any size."""
    def program():
        memory = np.zeros(4)
        memory.flags.writeable = False
        out = pk.from_numpy(memory)
        pk.add(pk.ones(4), 2.0, out=out)
        return [out]
    assert same_both_ways(monkeypatch, False, program) == 0
