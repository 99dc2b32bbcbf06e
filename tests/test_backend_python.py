"""The python backend (kfuse/backends/python.py): the typed IR the C++ is printed from, run by the interpreter.

Kernels are lowered as the engine lowers them (a specialisation, or a fused group after its transforms) and
checked against NumPy, and a few against the Kokkos backend for identical results.
"""
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import kfuse as pk
from kfuse import context, counters, pipeline, spaces
from kfuse.backends import pyops
from kfuse.backends.kokkos import KOKKOS
from kfuse.backends.python import PYTHON
from kfuse.calls import prepare
from kfuse.check import kernels as ck
from kfuse.frontend import workunit as workunit_module
from kfuse.ir.typing import BINARY_FLOAT_MATH, UNARY_FLOAT_MATH
from kfuse.runtime.launch import policy_slots

import test_constructs
from test_constructs import mixed_int_widths
from test_error_frames import load_module


@pytest.fixture(autouse=True)
def host_default_space():
    """Kernels here are specialised for the python backend directly (not through a runtime of its own, which
    would do this): a GPU default space (KFUSE_DEFAULT_SPACE=Cuda) runs on the host, as the engine runs it."""
    runtime = context.current()
    if spaces.on_device(runtime.default_space.value):
        runtime.default_space = spaces.ExecutionSpace.OpenMP


def call(wu, op="for", policy=None, backend=PYTHON, **kwargs):
    return prepare(wu, op, policy, (), kwargs, backend)


def launch(c):
    """Run one call as the engine does: lower its specialisation, render, load (pipeline.kernel_of), launch."""
    return pipeline.kernel_of(c.prepared).launch(policy_slots(c.policy), c.args)


def run(wu, op="for", policy=None, **kwargs):
    return launch(call(wu, op, policy, **kwargs))


def fused(calls, backend=PYTHON, names=PYTHON.transforms):
    """The fused kernel of ``calls`` (built and transformed by pipeline.lower_group) and its arguments."""
    args = tuple(a for c in calls for a in c.args)
    lowered, arg_index = pipeline.lower_group(calls, args, names)
    return backend.load(backend.render(lowered)), tuple(args[i] for i in arg_index)


# --- the constructs of tests/test_constructs.py, against its NumPy references -----------------------------------
CONSTRUCTS = [getattr(test_constructs, name) for name in dir(test_constructs) if name.startswith("test_")
              and name not in ("test_printf_output_reaches_stdout", "test_view_dtypes",
                               "test_printf_output_is_flushed_in_order_with_python_output")]  # a subprocess


@pytest.mark.backend("python")
@pytest.mark.parametrize("test", CONSTRUCTS, ids=lambda t: t.__name__)
def test_constructs_on_the_python_backend(test):
    test()
    assert pk.stats()["kernels_launched"] > 0 and pk.stats()["compiles"] == 0


@pytest.mark.backend("python")
@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.float32, np.float64, np.uint32, np.uint64])
def test_view_dtypes(dtype):
    test_constructs.test_view_dtypes(dtype)


@pytest.mark.backend("python")
def test_printf(capfd):
    test_constructs.test_printf_output_reaches_stdout(capfd)


@pk.workunit
def c_math(i, x, out):
    v = x[i]
    out[i, 0] = pk.sqrt(v)  # nan, not Python's ValueError
    out[i, 1] = pk.log(v)  # -inf at 0
    out[i, 2] = v / 0.0
    out[i, 3] = pk.exp(v * 1000.0)  # inf, not OverflowError
    out[i, 4] = pk.pow(v, 0.5)
    out[i, 5] = pk.fmin(v, pk.sqrt(-1.0))  # fmin ignores a nan
    out[i, 6] = v % 0.0
    out[i, 7] = round(v * 2.5)  # half to even


def test_math_keeps_c_results_where_python_would_raise():
    x = np.array([-1.0, 0.0, 1.0])
    out = np.zeros((3, 8))
    run(c_math, policy=3, x=x, out=out)
    with np.errstate(all="ignore"):
        expected = np.stack([np.sqrt(x), np.log(x), x / 0.0, np.exp(x * 1000.0), np.power(x, 0.5), x,
                             np.fmod(x, 0.0), np.round(x * 2.5)], axis=1)
    np.testing.assert_array_equal(out, expected)


# --- C++ conversions and widths ------------------------------------------------------------------------------
@pk.workunit
def widths(i, x: pk.View1D[pk.float32], w: pk.View1D[pk.int64], out: pk.View1D[pk.int64],
           f: pk.View1D[pk.float32]):
    s: pk.float32 = 0.0
    for k in range(x.extent(0)):
        s += x[k] * 3.0  # a float32 local: the double product is rounded when stored
    t: pk.float32 = x[0]
    t = t * x[1] + x[2]  # float32 arithmetic, rounded after each operation
    small: pk.int8 = 100
    small = small + 100  # wraps to -56 when stored
    out[0] = small
    out[1] = w[0] * w[1]  # int64 overflow wraps
    out[2] = int(-2.7)  # truncation toward zero
    out[3] = -w[2] // 2
    out[4] = 7 // -2
    f[0] = s
    f[1] = t
    f[2] = x[0] / 3  # float32 / int64: computed in float32


def test_typed_locals_convert_and_round_like_cxx():
    x = np.array([0.6369617, 0.26978672, 0.040973525], dtype=np.float32)
    w = np.array([2 ** 62, 5, 9], dtype=np.int64)
    out = np.zeros(5, dtype=np.int64)
    f = np.zeros(3, dtype=np.float32)
    run(widths, policy=1, x=x, w=w, out=out, f=f)
    s = np.float32(0)
    for v in x:
        s = np.float32(np.float64(s) + np.float64(v) * 3.0)
    with np.errstate(over="ignore"):
        product = w[0] * w[1]
    assert out.tolist() == [-56, product, -2, -5, -4]
    assert f.tolist() == [s, x[0] * x[1] + x[2], x[0] / np.float32(3)]
    assert f[1] != np.float32(np.float64(x[0]) * np.float64(x[1]) + np.float64(x[2]))  # rounding did happen


def test_the_longest_chain_the_front_end_takes_runs(tmp_path):
    """Each float32 floor division is four calls deep in Python: more parentheses than Python's tokenizer
    takes in one piece, so the emitter parses the chain apart."""
    n = workunit_module.MAX_NESTING - 4
    module = load_module(tmp_path / "chain_kernels.py", (
        "import kfuse as pk\n"
        "@pk.workunit\n"
        "def floors(i, f: pk.View1D[pk.float32], out: pk.View1D[pk.float32]):\n"
        f"    out[i] = {' // '.join(['f[i]'] * n)}\n"))
    out = np.zeros(2, dtype=np.float32)
    run(module.floors, policy=2, f=np.array([3.0, 1.0], dtype=np.float32), out=out)
    assert out.tolist() == [0.0, 1.0]


# --- check/kernels.py, the fuzzer's library ------------------------------------------------------------------
def test_fuzzer_kernels_range_reduce_scan():
    rng = np.random.default_rng(3)
    x, y = rng.uniform(-1, 1, 32), rng.uniform(-1, 1, 32)
    y0 = y.copy()
    run(ck.k_stencil, policy=32, x=x, y=y)
    np.testing.assert_array_equal(y, (np.r_[x[0], x[:-1]] + x + np.r_[x[1:], x[-1]]) / 3.0)
    xi, yi = np.arange(16.0), np.arange(16.0) * 2
    assert run(ck.k_dot, "reduce", 16, x=xi, y=yi) == (float(xi @ yi),)
    out = np.zeros(16)
    assert run(ck.k_scan, "scan", 16, x=xi, y=out) == (float(xi.sum()),)
    np.testing.assert_array_equal(out, np.cumsum(xi) / np.arange(1, 17))
    y = y0.copy()
    run(ck.k_helper, policy=32, x=x, y=y)
    np.testing.assert_array_equal(y, 0.25 * x + 0.5 * y0)
    f = np.ones(32, dtype=np.float32)
    run(ck.k_to_f32, policy=32, x=x, f=f)
    np.testing.assert_array_equal(f, (0.5 * np.float64(1) + x / 3.0).astype(np.float32))
    n, w = np.arange(8, dtype=np.int32), np.full(8, 2 ** 40, dtype=np.int64)
    flag = np.arange(8) % 2 == 0
    run(ck.k_count, policy=8, flag=flag, n=n)
    run(ck.k_widen, policy=8, n=n, w=w)
    np.testing.assert_array_equal(w, 2 ** 40 + 2 * np.where(flag, np.arange(8) + 3, np.arange(8) - 1) - np.arange(8))
    result = run(ck.k_isum, "reduce", 8, w=w)
    assert result == (int(w.sum()),) and type(result[0]) is int
    assert run(ck.k_fsum, "reduce", 4, f=np.array([0.5, 0.25, 1, 2], dtype=np.float32)) == (3.75,)


def test_team_kernels():
    m = np.arange(12.0).reshape(3, 4)
    out = np.zeros(3)
    run(ck.k_team_rowsum, policy=pk.TeamPolicy(3, pk.AUTO), m=m, out=out)
    np.testing.assert_array_equal(out, m @ np.arange(1.0, 5.0))
    x = np.array([1.0, 2.0, 3.0])
    m2 = m.copy()
    run(ck.k_team_scale, policy=pk.TeamPolicy(3, 1), alpha=-1.0, x=x, m=m2)
    np.testing.assert_array_equal(m2, 0.5 * m + x[:, None] / 2.0)
    assert run(ck.k_team_total, "reduce", pk.TeamPolicy(3, 1), m=m) == (float((m[:, 0] - m[:, -1]).sum()),)


@pk.workunit
def md_fill(i, j, acc, a, out):
    out[i][j] = a[i][j] * 10 + i - j
    acc += out[i][j]


@pk.workunit
def nested_scan_team(team: pk.TeamMember, x: pk.View2D[pk.int32], out: pk.View2D[pk.int32]):
    r: int = team.league_rank()

    def prefix(j: int, acc: pk.Acc[pk.int32], last: bool):
        acc += x[r][j]
        if last:
            out[r][j] = acc

    pk.parallel_scan(pk.ThreadVectorRange(team, 1, x.extent(1)), prefix)


def test_mdrange_and_nested_scan():
    a = np.arange(12).reshape(3, 4)
    out = np.zeros((3, 4), dtype=np.int64)
    total = run(md_fill, "reduce", pk.MDRangePolicy([1, 0], [3, 4]), a=a, out=out)
    expected = a * 10 + np.arange(3)[:, None] - np.arange(4)
    expected[0] = 0
    np.testing.assert_array_equal(out, expected)
    assert total == (float(expected.sum()),)
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    out = np.full((3, 4), -1, dtype=np.int32)
    run(nested_scan_team, policy=pk.TeamPolicy(3, 1), x=x, out=out)
    np.testing.assert_array_equal(out[:, 1:], np.cumsum(x[:, 1:], axis=1))
    assert (out[:, 0] == -1).all()


# --- fused kernels ---------------------------------------------------------------------------------------------
def test_fused_kernel_with_transforms_and_several_reductions():
    rng = np.random.default_rng(4)
    x, y = rng.uniform(-1, 1, 64), np.zeros(64)
    group = [call(ck.k_scale, "for", 64, x=x, y=y), call(ck.k_sin, "for", 64, x=y),
             call(ck.k_dot, "reduce", 64, x=y, y=y), call(ck.k_isum, "reduce", 64, w=np.arange(64))]
    before = counters.snapshot()
    kernel, args = fused(group)
    results = kernel.launch(policy_slots(group[0].policy), args)
    expected = np.sin(0.5 * x + 1.0) + 0.25
    np.testing.assert_array_equal(y, expected)
    assert results == (pytest.approx(float(expected @ expected), rel=1e-14), 2016)
    after = counters.snapshot()
    assert after["kernels_launched"] - before["kernels_launched"] == 1
    assert after["fused_kernels_launched"] - before["fused_kernels_launched"] == 1
    assert kernel.fused and kernel.last_seconds > 0


def test_fault_in_fused_kernel_names_its_member_and_keeps_reductions():
    x, y, z = np.arange(8.0), np.zeros(8), np.zeros(8)
    group = [call(ck.k_scale, "for", 8, x=x, y=y), call(ck.k_divide, "for", 8, flag=5, x=x, y=z),
             call(ck.k_dot, "reduce", 8, x=x, y=x)]
    kernel, args = fused(group)
    with pytest.raises(pk.KernelZeroDivisionError) as info:
        kernel.launch(policy_slots(group[0].policy), args)
    fault = info.value
    assert (fault.member, fault.workunit, fault.dividend, fault.divisor, fault.kernel) == (1, "k_divide", 7, 0,
                                                                                          kernel.name)
    assert fault.filename == ck.__file__ and fault.lineno == ck.k_divide.fn.__code__.co_firstlineno + 2
    assert fault.results == (float(x @ x),)  # the launch ran to its end
    np.testing.assert_array_equal(y, 0.5 * x + 1.0)
    i = np.arange(8)
    np.testing.assert_array_equal(z, np.where(i == 5, 0.5 * x, 0.5 * x + 0.125 * (7 // np.where(i == 5, 1, i - 5))))


# --- faults -----------------------------------------------------------------------------------------------------
@pk.workunit
def divide_by(i, acc, d: pk.View1D[pk.int64], out: pk.View1D[pk.int64]):
    out[i] = 100 // d[i] + d[i] % d[i]
    acc += 1


@pk.function
def at(v: pk.View1D[pk.double], k: int) -> float:
    return v[k]


@pk.workunit
def reach(i, k: int, v: pk.View1D[pk.double], out: pk.View1D[pk.double]):
    out[i] = at(v, i - k)


def test_division_fault_runs_the_launch_to_its_end():
    d = np.array([5, 0, -3, 0], dtype=np.int64)
    out = np.full(4, -1, dtype=np.int64)
    with pytest.raises(pk.KernelZeroDivisionError) as info:
        run(divide_by, "reduce", 4, d=d, out=out)
    fault = info.value
    assert isinstance(fault, ZeroDivisionError) and fault.member is None and fault.function is None
    assert (fault.workunit, fault.dividend, fault.divisor, fault.results) == ("divide_by", 100, 0, (4.0,))
    assert "integer division by zero (100 // 0)" in str(fault)
    assert out.tolist() == [20, 0, -34, 0]  # faulting threads computed with 0 and went on
    with pytest.raises(pk.KernelZeroDivisionError, match="does not fit") as info:
        run(int_floor, policy=2, a=np.array([-2 ** 63, -2 ** 63]), b=np.array([-1, 1]), out=out)
    assert (info.value.dividend, info.value.divisor) == (-2 ** 63, -1)
    assert out[:2].tolist() == [0, -2 ** 63]  # x % -1 is 0, not a fault


@pk.workunit
def int_floor(i, a, b, out):
    out[i] = a[i] // b[i] + a[i] % b[i]


def test_every_integer_division_goes_through_the_checked_helper():
    c = call(divide_by, "reduce", 1, d=np.ones(1, dtype=np.int64), out=np.zeros(1, dtype=np.int64))
    assert PYTHON.render(pipeline.lower_call(c.prepared)).python.count("_kf_divide(") == 2


def test_index_faults_name_the_view_and_the_helper():
    v, out = np.arange(4.0), np.zeros(4)
    with pytest.raises(pk.KernelIndexError) as info:
        run(reach, policy=4, k=2, v=v, out=out)
    fault = info.value
    assert (fault.view, fault.dim, fault.index, fault.extent, fault.function) == ("v", 0, -2, 4, "at")
    assert "negative indices are errors" in str(fault) and fault.lineno == at.fn.__code__.co_firstlineno + 2
    assert out.tolist() == [0.0, 0.0, 0.0, 1.0]
    with pytest.raises(pk.KernelIndexError, match=r"index 4 is out of range for dimension 0 of View 'v' \(extent 4\)"):
        run(reach, policy=4, k=-2, v=v, out=out)


# --- the backend's contract -------------------------------------------------------------------------------------
def test_contract_space_types_and_argument_range():
    with pytest.raises(pk.ArgumentError, match="workunit 'k_scale'.*Cuda"):
        PYTHON.check_space("Cuda", "k_scale")
    PYTHON.check_space("Serial", "k_scale")
    c = call(ck.k_scale, "for", 4, x=np.zeros(4), y=np.zeros(4))
    assert PYTHON.translate(c.prepared.source, c.prepared.spec, "k_scale") is None
    assert PYTHON.name == "python" and not PYTHON.persistent and "restrict" not in PYTHON.transforms
    assert set(pyops.PK_MATH.__dict__) == UNARY_FLOAT_MATH | BINARY_FLOAT_MATH | {"fma", "isnan", "isinf", "isfinite"}
    with pytest.raises(pk.ArgumentError, match="parameter 'k' got 2147483648, which does not fit int32"):
        run(small_param, policy=1, k=2 ** 31, out=np.zeros(1, dtype=np.int64))


@pk.workunit
def small_param(i, k: pk.int32, out):
    out[i] = k


@pk.workunit
def bad_syntax(i, out):
    out[i] = [1, 2][0]


def test_translate_raises_the_lowerings_errors():
    with pytest.raises(pk.UnsupportedSyntaxError, match="list literal"):
        call(bad_syntax, "for", 1, out=np.zeros(1))


@pk.workunit
def update_order(i, k: int, z: pk.View1D[pk.int64], out: pk.View1D[pk.int64]):
    out[i + k] += 7 // z[i]


def test_an_updates_value_is_computed_before_its_element_is_located():
    """C++17 evaluates the right side of an assignment first: its fault is the one raised."""
    with pytest.raises(pk.KernelZeroDivisionError):
        run(update_order, policy=1, k=5, z=np.zeros(1, dtype=np.int64), out=np.zeros(2, dtype=np.int64))


@pk.function
def negated(v: pk.int8) -> pk.int8:
    return -v


@pk.workunit
def conversions(i, acc, s: pk.View1D[pk.int8], u: pk.View1D[pk.uint64], f: pk.View1D[pk.float32],
                w: pk.View1D[pk.int64], out: pk.View1D[pk.int64], g: pk.View1D[pk.double]):
    x: pk.int8 = s[i]
    out[i * 8 + 0] = -x  # computed in int: 128 for -128
    out[i * 8 + 1] = negated(x) + 1  # returned as int8: -128
    out[i * 8 + 2] = min(w[i], u[i], 3.5) > 0  # pairwise: int64 with uint64 first, in uint64
    out[i * 8 + 3] = w[i] < f[i]  # the int64 as a float32
    out[i * 8 + 4] = (x if i > 1 else s[0]) * 2
    out[i * 8 + 5] = (w[i] or u[i]) % 1000
    out[i * 8 + 6] = ~u[i] >> 60
    out[i * 8 + 7] = abs(x) + int(f[i] * 1e10)
    g[i * 4 + 0] = f[i] * f[i] + 0.1
    g[i * 4 + 1] = f[i] // 0.3 + f[i] % -0.7
    g[i * 4 + 2] = pk.sqrt(f[i]) + pk.floor(f[i] * 3)
    g[i * 4 + 3] = max(f[i], w[i]) + w[i] / 7
    k = 3
    k //= 2
    k **= 5
    acc += k + x


# --- against the Kokkos backend -------------------------------------------------------------------------------
@pytest.mark.parametrize("make", [
    lambda b: call(widths, "for", 1, b, x=np.array([0.6369617, 0.26978672, 0.040973525], dtype=np.float32),
                 w=np.array([2 ** 62, 5, 9]), out=np.zeros(5, dtype=np.int64), f=np.zeros(3, dtype=np.float32)),
    lambda b: call(mixed_int_widths, "for", 4, b, u=np.array([3, 0, 7, 4000000000], dtype=np.uint32),
                 a=np.array([100000, -100000, 46341, 7], dtype=np.int32), out=np.zeros((4, 5), dtype=np.int64)),
    lambda b: call(ck.k_scan, "scan", 16, b, x=np.arange(16.0) / 7, y=np.zeros(16)),
    lambda b: call(ck.k_team_rowsum, "for", pk.TeamPolicy(3, 1), b, m=np.arange(12.0).reshape(3, 4) / 3,
                   out=np.zeros(3)),
    lambda b: call(conversions, "reduce", 4, b, s=np.array([-128, 127, 5, -3], dtype=np.int8),
                   u=np.array([0, 2 ** 64 - 1, 7, 2 ** 63], dtype=np.uint64),
                   f=np.array([0.1, -2.5, 1e30, 3.3], dtype=np.float32), w=np.array([-1, 2 ** 62, 0, -2 ** 63]),
                   out=np.zeros(32, dtype=np.int64), g=np.zeros(16)),
], ids=["float32-int8-int64", "uint32-int32", "scan", "team", "conversions"])
def test_same_results_as_kokkos(make):
    outputs = []
    for backend in (PYTHON, KOKKOS):
        c = make(backend)
        results = launch(c)
        outputs.append((results, [np.asarray(a).copy() for a in c.args if hasattr(a, "ptr")]))
    (r_py, views_py), (r_cxx, views_cxx) = outputs
    assert r_py == r_cxx
    for a, b in zip(views_py, views_cxx):
        np.testing.assert_array_equal(a, b)


def test_same_fault_as_kokkos():
    faults = []
    for backend in (PYTHON, KOKKOS):
        x, y = np.arange(8.0), np.zeros(8)
        group = [call(ck.k_scale, "for", 8, backend, x=x, y=y), call(ck.k_divide, "for", 8, backend, flag=3, x=y, y=x)]
        kernel, args = fused(group, backend, backend.transforms)
        with pytest.raises(pk.KernelZeroDivisionError) as info:
            kernel.launch(policy_slots(group[0].policy), args)
        faults.append((str(info.value), info.value.member, info.value.results, x.tolist(), y.tolist()))
    assert faults[0] == faults[1]
    assert math.isfinite(faults[0][3][0])


@pytest.mark.backend("python")
def test_the_engine_traces_and_fuses_on_the_python_backend():
    pk.enable_fusion()
    x, y = pk.View(16, pk.double), pk.View(16, pk.double)
    x.data[:] = np.linspace(-1, 1, 16)
    pk.parallel_for(16, ck.k_scale, x=x, y=y)
    pk.parallel_for(16, ck.k_sin, x=y)
    total = pk.parallel_reduce(16, ck.k_dot, x=y, y=y)
    expected = np.sin(0.5 * np.linspace(-1, 1, 16) + 1.0) + 0.25
    assert float(total) == pytest.approx(float(expected @ expected), rel=1e-14)
    np.testing.assert_array_equal(y.copy(), expected)
    assert pk.stats()["fused_kernels_launched"] == 1 and pk.stats()["compiles"] == 0


PROGRAM = """
import numpy as np
import kfuse as pk
from kfuse.check.kernels import k_dot, k_scale

pk.enable_fusion()
x, y = pk.View(8), pk.View(8)
x[:] = np.arange(8.0)
pk.parallel_for(8, k_scale, x=x, y=y)
print(float(pk.parallel_reduce(8, k_dot, x=y, y=y)), pk.stats()["fused_kernels_launched"], pk.stats()["compiles"])
"""


def test_kfuse_backend_runs_an_unmodified_program_without_a_compiler(tmp_path):
    env = dict(os.environ, KFUSE_BACKEND="python", KFUSE_CXX="/bin/false", KFUSE_CACHE_DIR=str(tmp_path),
               PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    proc = subprocess.run([sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    y = 0.5 * np.arange(8.0) + 1.0
    assert proc.stdout.split() == [repr(float(y @ y)), "1", "0"]


def test_an_unknown_backend_is_named_in_the_error(tmp_path):
    env = dict(os.environ, KFUSE_BACKEND="numba", PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    proc = subprocess.run([sys.executable, "-c", "import kfuse"], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "KFUSE_BACKEND='numba': choose one of kokkos, python, null" in proc.stderr


@pk.workunit
def _fill_with(i: int, x: pk.View1D[pk.double], value: float):
    x[i] = value


@pytest.mark.backend("python")
def test_a_read_only_view_a_kernel_writes_is_a_clear_error_naming_the_parameter():
    """Compiled kernels write through a View's pointer; NumPy refuses stores into read-only memory, so the python
    backend says so before the kernel starts, instead of failing inside it."""
    memory = np.zeros(4)
    memory.flags.writeable = False
    with pytest.raises(pk.ArgumentError, match="parameter 'x' is written, but its memory is read-only"):
        pk.parallel_for(4, _fill_with, x=pk.from_numpy(memory), value=1.0)
    assert not memory.any()
