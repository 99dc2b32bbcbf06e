"""PyKokkos's explicit fusion, ``pk.parallel_for(n, [wu1, wu2], args_0={...}, args_1={...})``: the calls run as one
fused group when the fuser proves it safe, in order with the reason in ``explain()`` when not, with fusion on or
off, and always give what the same calls run one after another give."""
import numpy as np
import pytest

import kfuse as pk
from kfuse import context
from kfuse.errors import ArgumentError

pytestmark = pytest.mark.backend("python")  # the reference interpreter: no C++ compiler

N = 48


def data(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1.0, 1.0, N)


@pk.workunit
def scale(tid: int, view: pk.View1D[pk.double], src: pk.View1D[pk.double], factor: float):
    view[tid] = factor * src[tid]


@pk.workunit
def add_to(tid: int, view: pk.View1D[pk.double], src: pk.View1D[pk.double]):
    view[tid] = view[tid] + src[tid]


@pk.workunit
def shift_left(tid: int, view: pk.View1D[pk.double], src: pk.View1D[pk.double]):
    if tid + 1 < src.extent(0):
        view[tid] = src[tid + 1]


@pk.workunit
def dot(tid: int, acc: pk.Acc[pk.double], a: pk.View1D[pk.double], b: pk.View1D[pk.double]):
    acc += a[tid] * b[tid]


@pk.workunit
def total(tid: int, acc: pk.Acc[pk.double], a: pk.View1D[pk.double]):
    acc += a[tid]


def fused_groups() -> tuple:
    """(names of the fused kernels launched, explain() text) of the last flush."""
    record = list(context.current().records)[-1]
    return record.fused_names, pk.explain(1)


@pytest.mark.parametrize("fusion", [False, True])
def test_safe_calls_run_as_one_group_and_match_separate_calls(fusion):
    a, b = data(1), data(2)
    A, B, C = pk.array(a.copy()), pk.array(b.copy()), pk.View((N,))
    if fusion:
        pk.enable_fusion()
    pk.parallel_for(N, [scale, add_to], args_0={"view": C, "src": A, "factor": 2.5}, args_1={"view": C, "src": B})
    names, text = fused_groups()
    assert names == ["scale__add_to"] and "group 1: scale + add_to  [fused 2 calls" in text, text
    got = np.asarray(C).copy()
    pk.disable_fusion()

    D = pk.View((N,))
    pk.parallel_for(N, scale, view=D, src=pk.array(a.copy()), factor=2.5)
    pk.parallel_for(N, add_to, view=D, src=pk.array(b.copy()))
    np.testing.assert_array_equal(got, np.asarray(D))
    np.testing.assert_array_equal(got, 2.5 * a + b)


def test_unsafe_calls_run_in_order_and_explain_says_why():
    a = data(3)
    A, C = pk.array(a.copy()), pk.View((N,))
    pk.parallel_for(N, [scale, shift_left], args_0={"view": A, "src": A, "factor": 3.0}, args_1={"view": C, "src": A})
    names, text = fused_groups()
    assert names == [], text
    assert "split before call 1 (shift_left): unsafe access to 'view/src'" in text, text
    assert "group 2: shift_left  [single call" in text, text
    expected = np.zeros(N)
    expected[:-1] = 3.0 * a[1:]
    np.testing.assert_array_equal(np.asarray(C), expected)


def test_reduce_returns_the_sum_of_its_members_reductions():
    a, b = data(4), data(5)
    A, B = pk.array(a.copy()), pk.array(b.copy())
    got = pk.parallel_reduce(N, [dot, total], args_0={"a": A, "b": B}, args_1={"a": A})
    names, text = fused_groups()
    assert names == ["dot__total"], text
    separate = pk.parallel_reduce(N, dot, a=A, b=B) + pk.parallel_reduce(N, total, a=A)
    assert got == separate
    assert got == pytest.approx(a @ b + a.sum())


def test_reduce_with_a_for_member_runs_it_first():
    """PyKokkos's own pattern: a parallel_for body fused before the reduction that reads its output."""
    a = data(6)
    A, C = pk.array(a.copy()), pk.View((N,))
    got = pk.parallel_reduce(N, [scale, total], args_0={"view": C, "src": A, "factor": 2.0}, args_1={"a": C})
    assert fused_groups()[0] == ["scale__total"]
    np.testing.assert_array_equal(np.asarray(C), 2.0 * a)
    assert got == pk.parallel_reduce(N, total, a=C)


def test_pending_writer_runs_before_the_group():
    a = data(7)
    A, C = pk.array(a.copy()), pk.View((N,))
    pk.enable_fusion()
    pk.parallel_for(N, scale, view=A, src=A, factor=-1.0)
    pk.parallel_for(N, [add_to, add_to], args_0={"view": C, "src": A}, args_1={"view": C, "src": A})
    np.testing.assert_array_equal(np.asarray(C), -2.0 * a)


@pytest.mark.parametrize("call, message", [
    (lambda C: pk.parallel_for(N, [scale, len], args_0={}, args_1={}), "element 1 of the workunit list is not a workunit"),
    (lambda C: pk.parallel_for(N, [add_to, add_to], args_0={"view": C, "src": C}), "missing args_1"),
    (lambda C: pk.parallel_for(N, [add_to], args_0={"view": C, "src": C}, args_1={}), "got 'args_1'"),
    (lambda C: pk.parallel_for(N, [add_to], args_0={"view": C}, src=C), "not as plain keywords"),
    (lambda C: pk.parallel_for(N, [add_to], args_0={"view": C, "src": C, "x": 1}), "no parameter 'x'"),
    (lambda C: pk.parallel_for(N, [add_to], args_0=[C, C]), "args_0 must be a dict"),
    (lambda C: pk.parallel_scan(N, [add_to], args_0={"view": C, "src": C}), "parallel_scan takes one workunit"),
    (lambda C: pk.parallel_reduce(N, [add_to], args_0={"view": C, "src": C}), "no workunit in the list has an accumulator"),
])
def test_bad_input_is_an_argument_error_naming_it(call, message):
    with pytest.raises(ArgumentError, match=message):
        call(pk.View((N,)))


@pytest.mark.backend("kokkos")
def test_compiled_backend_fuses_and_matches():
    a, b = data(8), data(9)
    A, B, C = pk.array(a.copy()), pk.array(b.copy()), pk.View((N,))
    got = pk.parallel_reduce(N, [scale, dot], args_0={"view": C, "src": A, "factor": 0.5}, args_1={"a": C, "b": B})
    assert fused_groups()[0] == ["scale__dot"]
    np.testing.assert_array_equal(np.asarray(C), 0.5 * a)
    assert got == pytest.approx((0.5 * a) @ b)


@pk.workunit
def divide(tid: int, out: pk.View1D[pk.int64], d: int):
    out[tid] = 7 // d


def test_a_failing_member_raises_at_the_call_as_eager_does():
    C, Q = pk.View((N,)), pk.View((N,), pk.int64)
    with pytest.raises(ZeroDivisionError):
        pk.parallel_for(N, [scale, divide], args_0={"view": C, "src": pk.array(data(10)), "factor": 1.0},
                        args_1={"out": Q, "d": 0})
    np.testing.assert_array_equal(np.asarray(C), data(10))  # the member that did not fail kept its results
