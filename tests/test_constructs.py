"""Every construct of the kernel DSL, compiled to C++ and run, checked against NumPy or plain Python.

Workunits live at module level and group related constructs, so the suite compiles few kernels.
"""
import math
import os
import subprocess
import sys
import textwrap
from math import sqrt

import numpy as np
import pytest

import kfuse as pk
from ulps import assert_ulps

SCALE = 2.5  # global numeric constants are inlined into kernels
NBINS = 4
OFFSET = np.int64(3)


# --- arithmetic ---------------------------------------------------------------------------------
@pk.workunit
def int_arith(i, a, b, out):
    x = a[i]
    y = b[i]
    out[i, 0] = x // y
    out[i, 1] = x % y
    out[i, 2] = x * y - x + y
    out[i, 3] = x ** 3
    out[i, 4] = (x & 7) | (y ^ 3)
    out[i, 5] = -x
    out[i, 6] = x >> 1
    out[i, 7] = (y << 2) + ~x


@pk.workunit
def float_arith(i, a, b, ia, ib, out):
    x = a[i]
    y = b[i]
    out[i][0] = x / y
    out[i][1] = x // y
    out[i][2] = x % y
    out[i][3] = abs(x) ** 1.5
    out[i][4] = x ** 2
    out[i][5] = ia[i] / ib[i]  # true division of integers gives a float
    out[i][6] = x % 3
    out[i][7] = 2 ** y


def test_integer_arithmetic_has_python_semantics():
    rng = np.random.default_rng(0)
    a = rng.integers(-50, 50, 64)
    b = rng.integers(1, 9, 64) * rng.choice([-1, 1], 64)
    out = np.zeros((64, 8), dtype=np.int64)
    pk.parallel_for(64, int_arith, a=a, b=b, out=out)
    expected = np.stack([a // b, a % b, a * b - a + b, a ** 3, (a & 7) | (b ^ 3), -a, a >> 1, (b << 2) + ~a], axis=1)
    np.testing.assert_array_equal(out, expected)


def test_float_arithmetic_has_python_semantics():
    rng = np.random.default_rng(1)
    a = rng.uniform(-20, 20, 64)
    b = rng.uniform(0.5, 4, 64) * rng.choice([-1, 1], 64)
    ia = rng.integers(-30, 30, 64)
    ib = rng.integers(1, 7, 64) * rng.choice([-1, 1], 64)
    out = np.zeros((64, 8))
    pk.parallel_for(64, float_arith, a=a, b=b, ia=ia, ib=ib, out=out)
    expected = np.stack([a / b, a // b, a % b, np.abs(a) ** 1.5, a ** 2, ia / ib, a % 3, 2.0 ** b], axis=1)
    np.testing.assert_allclose(out, expected, rtol=1e-13, atol=1e-13)


@pk.workunit
def mixed_int_widths(i, u, a, out):
    out[i, 0] = u[i] < -1  # compares values, as Python does (no unsigned conversion)
    out[i, 1] = u[i] - 5
    out[i, 2] = a[i] * a[i]  # int32 * int32 computed without 32-bit overflow
    out[i, 3] = -u[i]
    out[i, 4] = (a[i] * 3) // -7 + u[i] % -4


def test_mixed_integer_widths_compute_true_values():
    u = np.array([3, 0, 7, 4000000000], dtype=np.uint32)
    a = np.array([100000, -100000, 46341, 7], dtype=np.int32)
    out = np.zeros((4, 5), dtype=np.int64)
    pk.parallel_for(4, mixed_int_widths, u=u, a=a, out=out)
    uu, aa = u.astype(np.int64), a.astype(np.int64)
    expected = np.stack([uu < -1, uu - 5, aa * aa, -uu, (aa * 3) // -7 + uu % -4], axis=1)
    np.testing.assert_array_equal(out, expected)


# --- locals, loops, branches, comparisons ---------------------------------------------------------
@pk.workunit
def control_flow(i, n, out):
    total: int = 0
    for k in range(i, -1, -2):  # negative step
        total += k
    odd_sum = 0
    for k in range(1, n, 3):
        if k > i:
            break
        if k % 2 == 0:
            continue
        odd_sum += k
    m = i + 1
    steps = 0
    while m != 1:  # Collatz steps
        if m % 2 == 0:
            m //= 2
        else:
            m = 3 * m + 1
        steps += 1
    if 0 <= i < 3:
        kind = 1
    elif i >= 3 and i % 2 == 0 or i == 7:
        kind = 2
    elif not (i < 10):
        kind = 3
    else:
        kind = 4
    half = 0  # int first, float later: a double, as in Python
    half = half + i / 2
    out[i][0] = total
    out[i][1] = odd_sum
    out[i][2] = steps
    out[i][3] = kind
    out[i][4] = 1 if i > 5 else -1
    out[i][5] = half * 4
    out[i][6] = (2 < i <= 8) + (i != 4 != 5)
    for last in range(3, i + 4):
        pass
    out[i][7] = last * 10  # a loop variable keeps its last value after the loop


def _collatz_steps(m):
    steps = 0
    while m != 1:
        m = m // 2 if m % 2 == 0 else 3 * m + 1
        steps += 1
    return steps


def test_locals_loops_branches():
    n = 16
    out = np.zeros((n, 8), dtype=np.int64)
    pk.parallel_for(n, control_flow, n=n, out=out)
    for i in range(n):
        kind = 1 if 0 <= i < 3 else 2 if (i >= 3 and i % 2 == 0) or i == 7 else 3 if i >= 10 else 4
        expected = [sum(range(i, -1, -2)), sum(k for k in range(1, n, 3) if k <= i and k % 2), _collatz_steps(i + 1),
                    kind, 1 if i > 5 else -1, i * 2, int(2 < i <= 8) + int(i != 4), (i + 3) * 10]
        assert out[i].tolist() == expected, f"row {i}"


@pk.workunit
def aug_and_logic(i, x, flags, out):
    t = i
    t += 3
    t *= 2
    t -= 1
    t //= 3
    t %= 5
    t **= 2
    out[i, 0] = t
    out[i, 1] += x[i]  # augmented assignment of a View element
    out[i, 1] *= 2
    v = x[i]
    out[i, 2] = (v > 0 and v < 10) or not flags[i]
    out[i, 3] = i or 7  # Python's `or` returns an operand, not a bool
    out[i, 4] = i and 7


def test_augmented_assignment_and_boolean_logic():
    n = 12
    x = np.arange(n, dtype=np.float64) * 3 - 12
    flags = np.arange(n) % 3 == 0
    out = np.ones((n, 5))
    pk.parallel_for(n, aug_and_logic, x=x, flags=flags, out=out)
    i = np.arange(n)
    t = ((((i + 3) * 2 - 1) // 3) % 5) ** 2
    expected = np.stack([t, (1 + x) * 2, ((x > 0) & (x < 10)) | ~flags, np.where(i != 0, i, 7),
                         np.where(i != 0, 7, 0)], axis=1)
    np.testing.assert_array_equal(out, expected)


# --- multi-dimensional Views ----------------------------------------------------------------------
@pk.workunit
def transpose_add(i, A, B, C):
    for j in range(A.extent(1)):
        C[j][i] = A[i][j] + B[i, j] * A.shape[0] + len(A)


def test_multidim_indexing_both_spellings():
    A = np.arange(12.0).reshape(3, 4)
    B = np.ones((3, 4)) * 0.5
    C = pk.View((4, 3), pk.double)
    pk.parallel_for(3, transpose_add, A=A, B=B, C=C)
    np.testing.assert_array_equal(C.copy(), (A + B * 3 + 3).T)


# --- math -----------------------------------------------------------------------------------------
@pk.workunit
def math_fns(i, x, out):
    v = x[i]
    out[i, 0] = pk.sqrt(v) + math.sqrt(v) + sqrt(v)
    out[i, 1] = pk.exp(v) - math.exp(-v)
    out[i, 2] = pk.log(v) + math.log(v + 1)
    out[i, 3] = pk.sin(v) * math.cos(v) + pk.tan(v / 4)
    out[i, 4] = pk.fabs(1 - v) + pk.abs(2 - v) + abs(-v) + math.fabs(v - 3)
    out[i, 5] = pk.pow(v, 1.5) + math.pow(v, 2)
    out[i, 6] = pk.floor(v * 3) + math.ceil(v * 3) + pk.ceil(-v)
    out[i, 7] = pk.fmin(v, 1.0) + pk.fmax(v, 2.0) + min(v, 1.5) + max(v, 2.5, 0.0) + min(i, 3)


def test_math_functions_via_pk_math_and_from_import():
    x = np.linspace(0.1, 4.0, 40)
    out = np.zeros((40, 8))
    pk.parallel_for(40, math_fns, x=x, out=out)
    i = np.arange(40)
    expected = np.stack([
        3 * np.sqrt(x), np.exp(x) - np.exp(-x), np.log(x) + np.log(x + 1), np.sin(x) * np.cos(x) + np.tan(x / 4),
        np.abs(1 - x) + np.abs(2 - x) + x + np.abs(x - 3), x ** 1.5 + x ** 2,
        np.floor(x * 3) + np.ceil(x * 3) + np.ceil(-x),
        np.minimum(x, 1) + np.maximum(x, 2) + np.minimum(x, 1.5) + np.maximum(x, 2.5) + np.minimum(i, 3)], axis=1)
    np.testing.assert_allclose(out, expected, rtol=1e-12)


# --- atomics --------------------------------------------------------------------------------------
@pk.workunit
def histogram(i, x, hist, slots, order, extremes):
    b = int(x[i] * NBINS)
    pk.atomic_add(hist, [b], 1)
    slot = pk.atomic_fetch_add(slots, [0], 1)
    order[slot] = i
    pk.atomic_max(extremes, [0], x[i])
    pk.atomic_fetch_min(extremes, [1], x[i])


def test_atomics():
    rng = np.random.default_rng(2)
    n = 1000
    x = rng.uniform(0, 1, n)
    hist = np.zeros(NBINS, dtype=np.int64)
    slots = np.zeros(1, dtype=np.int64)
    order = np.full(n, -1, dtype=np.int64)
    extremes = np.array([-1.0, 2.0])
    pk.parallel_for(n, histogram, x=x, hist=hist, slots=slots, order=order, extremes=extremes)
    np.testing.assert_array_equal(hist, np.bincount((x * NBINS).astype(int), minlength=NBINS))
    assert slots[0] == n
    np.testing.assert_array_equal(np.sort(order), np.arange(n))  # every index got exactly one slot
    assert extremes.tolist() == [x.max(), x.min()]


# --- printf ---------------------------------------------------------------------------------------
@pk.workunit
def say_percent(i, x):
    pk.printf("%d%% of %5.1f\n", i * 10, x[i])


@pk.workunit
def say_text(i):
    pk.printf("naïve \"q\" \\ \x01a\t%x\n", i + 10)


def test_printf_output_reaches_stdout(capfd):
    x = np.array([1.5, 2.25, -3.0])
    pk.parallel_for(3, say_percent, x=x)
    out = capfd.readouterr().out
    assert sorted(out.splitlines()) == ["0% of   1.5", "10% of   2.2", "20% of  -3.0"]
    pk.parallel_for(1, say_text)  # non-ASCII text, quotes, backslash, a control character before a hex digit
    assert capfd.readouterr().out == "naïve \"q\" \\ \x01a\ta\n"


def test_printf_output_is_flushed_in_order_with_python_output(tmp_path):
    """With block-buffered stdout (a pipe, no PYTHONUNBUFFERED), kernel output must not trail later prints."""
    script = tmp_path / "order.py"
    script.write_text(textwrap.dedent('''
        import numpy as np
        import kfuse as pk

        @pk.workunit
        def say_percent(i, x):
            pk.printf("%d%% of %5.1f\\n", i * 10, x[i])

        print("before", flush=True)
        pk.parallel_for(pk.RangePolicy(pk.Serial, 0, 2), say_percent, x=np.array([1.0, 2.0]))
        print("after")
    '''))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["before", "0% of   1.0", "10% of   2.0", "after"]


# --- helpers --------------------------------------------------------------------------------------
@pk.function
def square(v: float) -> float:
    return v * v


@pk.function
def hypot2(a: float, b: float) -> float:
    return pk.sqrt(square(a) + square(b))  # a helper calling a helper


@pk.function
def row_dot(M: pk.View2D[pk.double], r: int, v):
    s = 0.0
    for j in range(M.extent(1)):
        s += M[r][j] * v[j]
    return s


@pk.function
def clamp_count(v: int, hi: int) -> int:
    if v > hi:
        return hi
    return v


@pk.workunit
def use_helpers(i, M, v, out):
    out[i, 0] = hypot2(M[i][0], M[i][1])
    out[i, 1] = row_dot(M, i, v)
    out[i, 2] = clamp_count(i, 2)


def test_function_helpers():
    M = np.arange(15.0).reshape(5, 3) - 4
    v = np.array([1.0, -2.0, 0.5])
    out = np.zeros((5, 3))
    pk.parallel_for(5, use_helpers, M=M, v=v, out=out)
    assert_ulps(out[:, 0], np.hypot(M[:, 0], M[:, 1]))
    np.testing.assert_allclose(out[:, 1], M @ v, rtol=1e-14)
    np.testing.assert_array_equal(out[:, 2], np.minimum(np.arange(5), 2))


# --- scalar parameters, annotations, globals ------------------------------------------------------
@pk.workunit
def scalars(i, n: int, alpha: float, flip: bool, x: pk.View1D[pk.double], out: pk.View1D[pk.double]):
    v = alpha * x[i] + n * SCALE + OFFSET + pk.pi * 0
    if flip:
        v = -v
    out[i] = v


def test_scalar_params_annotations_and_globals():
    x = pk.View(6, pk.double)
    x.data[:] = np.arange(6) * 0.5
    out = pk.View(6, pk.double)
    pk.parallel_for(6, scalars, n=2, alpha=3, flip=True, x=x, out=out)  # int passed to a float parameter
    np.testing.assert_allclose(out.copy(), -(3 * x.copy() + 2 * SCALE + 3))
    pk.parallel_for(6, scalars, n=np.int32(1), alpha=0.5, flip=False, x=x, out=out)
    np.testing.assert_allclose(out.copy(), 0.5 * x.copy() + SCALE + 3)


# --- dtypes, NumPy arrays, strides ------------------------------------------------------------------
@pk.workunit
def scale_add(i, src, dst, k):
    dst[i] = src[i] * k + dst[i]


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float32, np.float64, np.uint32])
def test_view_dtypes(dtype):
    src = (np.arange(10) + 1).astype(dtype)
    dst = pk.View(10, getattr(pk, np.dtype(dtype).name))
    dst.fill(3)
    pk.parallel_for(10, scale_add, src=src, dst=dst, k=2)
    assert dst.dtype.np == np.dtype(dtype)
    np.testing.assert_array_equal(dst.copy(), src * 2 + 3)


@pk.workunit
def bool_logic(i, a, b, out):
    out[i] = a[i] and not b[i]


def test_bool_views():
    a = np.array([True, True, False, False])
    b = np.array([True, False, True, False])
    out = pk.View(4, pk.bool_)
    pk.parallel_for(4, bool_logic, a=a, b=b, out=out)
    np.testing.assert_array_equal(out.copy(), a & ~b)


def test_strided_numpy_views_are_written_in_place():
    base = np.arange(20.0)
    dst = np.zeros(30)
    pk.parallel_for(10, scale_add, src=base[::2], dst=dst[::3], k=1.5)  # non-contiguous 1-D
    expected = np.zeros(30)
    expected[::3] = base[::2] * 1.5
    np.testing.assert_array_equal(dst, expected)
    A = np.arange(12.0).reshape(3, 4)
    B = np.ones((4, 3))
    C = np.zeros((3, 4))
    pk.parallel_for(4, transpose_add, A=A.T, B=B, C=C)  # transposed (strided) 2-D input
    np.testing.assert_array_equal(C, (A.T + B * 4 + 4).T)


# --- names that mean something in C++ ----------------------------------------------------------------
@pk.workunit
def cxx_names(i, new, value_type, member_type, out):
    NULL = 1
    errno = 2
    auto = new[i]
    template = value_type * 2
    kf_acc = member_type
    EOF = NULL + errno
    out[i] = auto + template + kf_acc + EOF


def test_identifiers_that_are_cxx_keywords_macros_or_generated_names():
    new = np.arange(5.0)
    out = np.zeros(5)
    pk.parallel_for(5, cxx_names, new=new, value_type=3, member_type=4, out=out)
    np.testing.assert_array_equal(out, new + 6 + 4 + 3)


def _make_twin(offset):
    @pk.workunit
    def twin(i, x):
        x[i] = offset + i  # `offset` is a closure constant, inlined: each twin has its own body

    return twin


def test_workunits_with_the_same_name_run_their_own_code():
    first, second = _make_twin(1.0), _make_twin(10.0)
    x, y, z = np.zeros(3), np.zeros(3), np.zeros(3)
    pk.parallel_for(3, first, x=x)
    pk.parallel_for(3, second, x=y)
    pk.parallel_for(3, first, x=z[::-1])  # first again, after second's library was loaded
    np.testing.assert_array_equal(x, [1, 2, 3])
    np.testing.assert_array_equal(y, [10, 11, 12])
    np.testing.assert_array_equal(z, [3, 2, 1])


@pk.workunit
def assigns_parameters(i: int, out: pk.View1D[pk.int64], n: int):
    i -= 1  # Python lets a kernel assign its index and scalar parameters: kfuse reads them through local copies
    n = n * 2 + i
    out[i + 1] = n


@pk.workunit
def after_assigns(i: int, out: pk.View1D[pk.int64], total: pk.View1D[pk.int64]):
    total[i] = out[i] + i


def test_assigning_index_and_scalar_parameters():
    for fusion in (False, True):
        if fusion:
            pk.enable_fusion()
        out, total = pk.View([5], pk.int64), pk.View([5], pk.int64)
        pk.parallel_for(5, assigns_parameters, out=out, n=10)
        pk.parallel_for(5, after_assigns, out=out, total=total)
        i = np.arange(5)
        np.testing.assert_array_equal(np.asarray(out), 20 + i - 1)
        np.testing.assert_array_equal(np.asarray(total), 20 + 2 * i - 1)
