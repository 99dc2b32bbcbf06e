"""The fused-kernel transforms: each pass on small hand-made kernels (through ``check_pass``: flag,
structure, idempotence, input untouched, ``verify``), then numerically: every transform alone and all
together, on fused programs run through the real pipeline, must give eager execution's results.

Kernels are built from ``prepare``d calls without running them; where a pass's output is also run, it
is launched directly (``launch``) and compared with running the calls one by one.
"""
from __future__ import annotations

import ast
import math
import re

import numpy as np
import pytest

import kfuse as pk
import programs as progs
from kfuse.transforms import args as args_pass
from kfuse.transforms import loops as loops_pass
from kfuse.transforms import manager
from kfuse.transforms import memory as memory_pass
from kfuse.transforms import restrict as restrict_pass
from kfuse.errors import KfuseError
from transform_check import (add, assert_launch_matches_eager, call, check_pass, fused, mul, transformed)

pytestmark = pytest.mark.backend("python")  # the reference interpreter: no C++ compiler

T, N = 6, 5  # threads (rows) and columns of the 2-D arrays
W = 4  # a module constant: normalisation inlines it, so loops over range(W) match without argument fusion


# --- workunits (module level: each specialisation compiles once per cache) ---------------------------------
@pk.workunit
def shifted(tid: int, N: int, A: pk.View2D[pk.double], C: pk.View2D[pk.double]):
    for i in range(N):
        C[tid][i] = A[tid][i + 1]  # the element after the one add writes in the same iteration


@pk.workunit
def rowsum(tid: int, N: int, M: pk.View2D[pk.double], s: pk.View1D[pk.double]):
    for i in range(N):
        s[tid] += M[tid][i]  # every iteration updates the same element


@pk.workunit
def row_dot(tid: int, N: int, M: pk.View2D[pk.double], w: pk.View1D[pk.double], out: pk.View1D[pk.double]):
    s: float = 0.0
    for i in range(N):
        s += M[tid][i] * w[i]
    out[tid] = s * 0.5


@pk.workunit
def row_dot_after(tid: int, N: int, M: pk.View2D[pk.double], out: pk.View1D[pk.double], s0: float):
    s: float = s0 + out[tid]  # starts from what the first member stored after its loop
    for i in range(N):
        s += M[tid][i]
    out[tid] = s


@pk.workunit
def rownorm(tid: int, N: int, M: pk.View2D[pk.double], s: pk.View1D[pk.double], out: pk.View2D[pk.double]):
    for i in range(N):
        out[tid][i] = M[tid][i] / s[tid]


@pk.workunit
def centre(tid: int, N: int, M: pk.View2D[pk.double], out: pk.View2D[pk.double]):
    t: float = 0.0
    for i in range(N):
        t += M[tid][i]
    for i in range(N):
        out[tid][i] = M[tid][i] - t / N


@pk.workunit
def until_negative(tid: int, N: int, M: pk.View2D[pk.double], out: pk.View2D[pk.double]):
    for i in range(N):
        if M[tid][i] < 0.0:
            break
        out[tid][i] = M[tid][i]


@pk.workunit
def add3(tid: int, N: int, S: float, A: pk.View3D[pk.double], B: pk.View3D[pk.double]):
    for i in range(N):
        for j in range(N):
            A[tid][i][j] = S + B[tid][i][j]


@pk.workunit
def mul3(tid: int, N: int, A: pk.View3D[pk.double], B: pk.View3D[pk.double], C: pk.View3D[pk.double]):
    for i in range(N):
        for j in range(N):
            C[tid][i][j] = A[tid][i][j] * B[tid][i][j]


@pk.workunit
def fill_w(tid: int, S: float, A: pk.View2D[pk.double]):
    for i in range(W):
        A[tid][i] = S + i


@pk.workunit
def next_w(tid: int, A: pk.View2D[pk.double], C: pk.View2D[pk.double]):
    for i in range(W):
        C[tid][i] = A[tid][i + 1]


@pk.workunit
def same_w(tid: int, A: pk.View2D[pk.double], C: pk.View2D[pk.double]):
    for i in range(W):
        C[tid][i] = 2.0 * A[tid][i]


@pk.workunit
def grow(tid: int, cnt: pk.View1D[pk.int64], M: pk.View2D[pk.double]):
    for i in range(cnt[tid]):
        M[tid][i] += 1.0
        cnt[tid] = i + 2  # the next loop over range(cnt[tid]) runs one more time


@pk.workunit
def bump(tid: int, cnt: pk.View1D[pk.int64], M: pk.View2D[pk.double]):
    for i in range(cnt[tid]):
        M[tid][i] *= 2.0


@pk.workunit
def mirror(tid: int, N: int, A: pk.View2D[pk.double], C: pk.View2D[pk.double]):
    for i in range(N):
        i = N - 1 - i  # from here on, i names the mirrored column
        C[tid][i] = A[tid][i]


@pk.workunit
def guarded_pair(tid: int, N: int, A: pk.View2D[pk.double], C: pk.View2D[pk.double]):
    k: int = 0
    while k < 1:
        k += 1
    if tid >= 0:
        for i in range(N):
            A[tid][i] = 1.0 * tid
        for j in range(N):
            C[tid][j] = A[tid][j] + 1.0
        for i in range(N):
            C[tid][i] += A[tid][1 + i]  # the next element, written by the next iteration of the first loop


@pk.workunit
def countdown(i: int, n: int, x: pk.View1D[pk.double]):
    while n > 0:
        x[i] += 1.0
        n -= 1


@pk.workunit
def scale(i: int, x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    y[i] = 2.0 * x[i]


@pk.workunit
def combine(i: int, x: pk.View1D[pk.double], y: pk.View1D[pk.double], z: pk.View1D[pk.double]):
    z[i] = y[i] + x[i] * x[i]


@pk.workunit
def guarded_copy(i: int, n: int, y: pk.View1D[pk.double], z: pk.View1D[pk.double]):
    if i < n:
        z[i] = y[i]


@pk.workunit
def repeat_add(i: int, n: int, y: pk.View1D[pk.double], z: pk.View1D[pk.double]):
    for j in range(n):
        z[i] += y[i]


@pk.workunit
def guarded_reads(i: int, n: int, x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    nxt: float = x[i + 1] if i + 1 < n else 0.0
    pos: bool = i + 1 < n and x[i + 1] > 0.0
    neg: bool = i + 1 >= n or x[i + 1] < 0.0
    up: bool = 0 < i < x[i - 1] + 3.0  # a chained comparison: x[i - 1] is read only when 0 < i
    y[i] = nxt + x[i] * x[i] + (1.0 if pos else 0.0) + (2.0 if neg else 0.0) + (4.0 if up else 0.0)


@pk.workunit
def roundtrip(i: int, x: pk.View1D[pk.double], y: pk.View1D[pk.float32], k: pk.View1D[pk.int32],
              z: pk.View1D[pk.double], w: pk.View1D[pk.double]):
    y[i] = x[i] / 3.0
    k[i] = x[i] * 7.0
    z[i] = y[i]  # the float32-rounded value, not x[i] / 3.0
    w[i] = k[i] * 0.5  # the truncated integer


@pk.workunit
def chain_assign(i: int, x: pk.View1D[pk.double], y: pk.View1D[pk.double], z: pk.View1D[pk.double]):
    t: float = x[i] + y[i]
    x[i] = y[i] = 0.5 * t
    z[i] = x[i] * y[i]


@pk.workunit
def moving_index(i: int, x: pk.View1D[pk.double], y: pk.View2D[pk.double]):
    k: int = 0
    y[i][k] = x[i]
    k = k + 1
    y[i][k] = 2.0 * x[i]  # another element: the store above is not dead


@pk.workunit
def indirect(i: int, idx: pk.View1D[pk.int64], x: pk.View2D[pk.double], y: pk.View1D[pk.double]):
    a: float = x[i][idx[i]]
    x[i][idx[i]] = 5.0
    idx[i] = 2
    y[i] = a + x[i][idx[i]]  # another element now: neither the load nor the store above may be reused
    x[i][idx[i]] = 6.0  # and the store of 5.0 above is not dead


@pk.function
def first_of(v: pk.View1D[pk.double]) -> float:
    return v[0]


@pk.workunit
def add_first(i: int, x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    y[i] = x[i] + first_of(x)


@pk.function
def add_ten(v: pk.View1D[pk.double], i: int) -> float:
    v[i] += 10.0
    return 0.0


@pk.workunit
def read_then_add_ten(i: int, x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    y[i] = x[i] + 1.0
    y[i] = add_ten(x, i) + x[i]  # x[i] is read after the helper wrote it


# --- data and structure helpers ------------------------------------------------------------------------------
def view(shape, seed: int, dtype=pk.double, lo=-1.0, hi=1.0) -> pk.View:
    v = pk.View(shape, dtype)
    v[:] = np.random.default_rng(seed).uniform(lo, hi, shape)
    return v


def fig2(A, B, C, S=1.5, n=N):
    return [call(add, T, N=n, S=S, A=A, B=B), call(mul, T, N=n, A=A, B=B, C=C)]


def text(k) -> str:
    return ast.unparse(k.source.tree)


def params(k) -> list:
    return [n for n, _ in k.spec.params]


def values(k) -> list:
    """The argument each parameter receives."""
    return [k.args[i] for i in k.arg_index]


def n_loops(k) -> int:
    return sum(isinstance(n, ast.For) for n in ast.walk(k.source.tree))


def element_accesses(k, name: str) -> tuple[int, int]:
    """(loads, stores) of elements of View parameter ``name`` (``A[i][j]`` counts once)."""
    inner, loads, stores = set(), 0, 0
    for node in ast.walk(k.source.tree):  # breadth first: a chain's outer Subscript comes first
        if isinstance(node, ast.Subscript) and id(node) not in inner:
            base = node.value
            while isinstance(base, ast.Subscript):
                inner.add(id(base))
                base = base.value
            if isinstance(base, ast.Name) and base.id == name:
                if isinstance(node.ctx, ast.Store):
                    stores += 1
                else:
                    loads += 1
    return loads, stores


def locals_of(k, prefix: str) -> dict:
    """The transform's locals (``ld``/``st``): name -> (annotation, value source)."""
    return {n.target.id: (n.annotation.value, ast.unparse(n.value)) for n in ast.walk(k.source.tree)
            if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
            and re.fullmatch(prefix + r"\d+", n.target.id)}


# --- argument fusion ---------------------------------------------------------------------------------------------
def test_args_merges_same_storage_views_and_equal_scalars():
    A, B, C = pk.View((T, N)), view((T, N), 1), pk.View((T, N))
    # mul gets B's storage as a different View object (a full subview): still the same array
    calls = [call(add, T, N=N, S=1.5, A=A, B=B), call(mul, T, N=N, A=A, B=B.subview(slice(None)), C=C)]

    def merged(out):
        assert params(out) == ["k0_N", "k0_S", "k0_A", "k0_B", "k1_C"]
        got = values(out)
        assert got[:2] == [N, 1.5] and got[2] is A and got[3] is B and got[4] is C
        assert [a.arg for a in out.source.tree.args.args] == ["i0", *params(out)]
        assert not re.search(r"\bk1_[NAB]\b", text(out)), text(out)
        assert "k1_C[i0][k1_i] = k0_A[i0][k1_i] * k0_B[i0][k1_i]" in text(out)

    check_pass(args_pass.run, fused(*calls), True, merged)


def test_args_keeps_different_storage_and_different_values_apart():
    A, B, C = pk.View((T, N)), view((T, N), 1), pk.View((T, N))
    copy_of_a = pk.View((T, N))  # same shape and contents, other memory
    b_prefix = B.subview(slice(None), slice(0, N - 1))  # same first address, other shape
    calls = [call(add, T, N=3, S=3.0, A=A, B=B),  # 3 and 3.0: equal values of different types
             call(mul, T, N=N - 1, A=copy_of_a, B=b_prefix, C=C)]
    check_pass(args_pass.run, fused(*calls), False)


def test_args_keeps_zero_and_negative_zero_apart():
    A, B = pk.View((T, N)), view((T, N), 1)
    calls = [call(add, T, N=N, S=0.0, A=A, B=B), call(add, T, N=N, S=-0.0, A=pk.View((T, N)), B=B)]
    out = check_pass(args_pass.run, fused(*calls), True,
                     lambda out: params(out) == ["k0_N", "k0_S", "k0_A", "k0_B", "k1_S", "k1_A"])
    assert math.copysign(1.0, values(out)[4]) == -1.0


def test_args_never_merges_a_scalar_the_body_reassigns():
    x = view(T, 2)
    calls = [call(countdown, T, n=3, x=x), call(countdown, T, n=3, x=x)]
    out = check_pass(args_pass.run, fused(*calls), True,
                     lambda out: params(out) == ["k0_n", "k0_x", "k1_n"])
    start = np.asarray(x).copy()
    got = assert_launch_matches_eager(calls, out, [x])
    np.testing.assert_array_equal(got[0], start + 6.0)  # each body counts its own n down


# --- loop fusion -------------------------------------------------------------------------------------------------
def test_loops_merges_figure2_once_args_merged_the_bounds():
    A, B, C = pk.View((T, N)), view((T, N), 1), pk.View((T, N))
    kernel = fused(*fig2(A, B, C))
    check_pass(loops_pass.run, kernel, False)  # k0_N and k1_N: not known equal without argument fusion

    def one_loop(out):
        assert n_loops(out) == 1
        (loop,) = out.source.tree.body
        assert [ast.unparse(s) for s in loop.body] == ["k0_A[i0][k0_i] = k0_S + k0_B[i0][k0_i]",
                                                       "k1_C[i0][k0_i] = k0_A[i0][k0_i] * k0_B[i0][k0_i]"]

    out = check_pass(loops_pass.run, transformed(kernel, "args"), True, one_loop)
    calls = fig2(A, B, C)
    assert_launch_matches_eager(calls, out, [A, C])


def test_loops_merges_nested_loops_to_a_fixpoint():
    A, B, C = pk.View((T, N, N)), view((T, N, N), 3), pk.View((T, N, N))
    calls = [call(add3, T, N=N, S=0.5, A=A, B=B), call(mul3, T, N=N, A=A, B=B, C=C)]

    def nested_once(out):
        (outer,) = out.source.tree.body
        (inner,) = outer.body
        assert isinstance(inner, ast.For) and len(inner.body) == 2 and n_loops(out) == 2

    check_pass(loops_pass.run, transformed(fused(*calls), "args"), True, nested_once)


def test_loops_keeps_different_bounds_apart():
    A, B, C = pk.View((T, N)), view((T, N), 1), pk.View((T, N))
    calls = [call(add, T, N=N, S=1.5, A=A, B=B), call(mul, T, N=N - 1, A=A, B=B, C=C)]
    kernel = transformed(fused(*calls), "args")
    check_pass(loops_pass.run, kernel, False)


def test_loops_refuses_to_reverse_a_dependence_on_the_next_element():
    A, B, C = pk.View((T, N + 1)), view((T, N), 1), pk.View((T, N))
    calls = [call(add, T, N=N, S=1.5, A=A, B=B), call(shifted, T, N=N, A=A, C=C)]
    kernel = transformed(fused(*calls), "args")
    assert "k0_A[i0][k1_i + 1]" in text(kernel)  # one array, so only the index tells the accesses apart
    check_pass(loops_pass.run, kernel, False)


def test_loops_refuses_an_element_updated_by_every_iteration():
    M, s, out = view((T, N), 4, lo=1.0, hi=2.0), pk.View(T), pk.View((T, N))
    calls = [call(rowsum, T, N=N, M=M, s=s), call(rownorm, T, N=N, M=M, s=s, out=out)]
    kernel = transformed(fused(*calls), "args")
    check_pass(loops_pass.run, kernel, False)  # rownorm needs the finished sum, not a partial one


def test_loops_refuses_a_scalar_accumulated_in_the_first_loop():
    M, out = view((T, N), 5), pk.View((T, N))
    check_pass(loops_pass.run, fused(call(centre, T, N=N, M=M, out=out)), False)


def test_loops_refuses_a_body_that_breaks():
    M, out, C = view((T, N), 6), pk.View((T, N)), pk.View((T, N))
    calls = [call(until_negative, T, N=N, M=M, out=out), call(mul, T, N=N, A=out, B=M, C=C)]
    check_pass(loops_pass.run, transformed(fused(*calls), "args"), False)


def test_loops_compares_aliasing_views_by_storage():
    X, C = pk.View((T, W + 1)), pk.View((T, W))
    twin = X.subview(slice(None))  # the same array under a second name (argument fusion off)
    check_pass(loops_pass.run, fused(call(fill_w, T, S=1.0, A=X), call(next_w, T, A=twin, C=C)), False)
    # the same element through the twin: merging is legal
    merged = check_pass(loops_pass.run, fused(call(fill_w, T, S=1.0, A=X), call(same_w, T, A=twin, C=C)), True,
                        lambda out: n_loops(out) == 1)
    assert_launch_matches_eager([call(fill_w, T, S=1.0, A=X), call(same_w, T, A=twin, C=C)], merged, [X, C])
    # a shifted subview: A[tid][i] there is X[tid][i + 1], whatever the index expressions say
    calls = [call(fill_w, T, S=1.0, A=X), call(same_w, T, A=X.subview(slice(None), slice(1, None)), C=C)]
    kernel = fused(*calls)
    check_pass(loops_pass.run, kernel, False)
    assert_launch_matches_eager(calls, transformed(kernel, *manager.NAMES), [X, C])


def test_loops_reads_the_ir_loop_of_each_for_inside_compound_statements():
    A, C = pk.View((T, N + 1)), pk.View((T, N))
    calls = [call(guarded_pair, T, N=N, A=A, C=C)]
    merged = check_pass(loops_pass.run, fused(*calls), True, lambda out: n_loops(out) == 2)
    assert "k0_A[i0][1 + k0_i]" in text(merged)
    assert_launch_matches_eager(calls, merged, [A, C])


def test_loops_refuses_bounds_read_from_an_array_the_first_loop_writes():
    cnt, M = pk.View(T, pk.int64), view((T, N), 7)
    cnt[:] = 2
    calls = [call(grow, T, cnt=cnt, M=M), call(bump, T, cnt=cnt, M=M)]
    kernel = transformed(fused(*calls), "args")
    check_pass(loops_pass.run, kernel, False)
    assert_launch_matches_eager(calls, transformed(kernel, *manager.NAMES), [cnt, M])


def test_loops_moves_a_members_stores_after_the_next_members_loop_to_merge_them():
    M, w1, w2, o1, o2 = view((T, N), 8), view(N, 9), view(N, 10), pk.View(T), pk.View(T)
    calls = [call(row_dot, T, N=N, M=M, w=w1, out=o1), call(row_dot, T, N=N, M=M, w=w2, out=o2)]

    def one_loop_first(out):
        assert n_loops(out) == 1
        kinds = [type(s).__name__ for s in out.source.tree.body]
        assert kinds[kinds.index("For") - 2:kinds.index("For")] == ["AnnAssign", "AnnAssign"]  # both sums start
        assert "k0_out[i0] = k0_s * 0.5" in text(out).split("for ")[1]  # first member's store after the loop

    merged = check_pass(loops_pass.run, transformed(fused(*calls), "args"), True, one_loop_first)
    assert_launch_matches_eager(calls, merged, [o1, o2])


def test_loops_keeps_a_loop_after_a_store_it_depends_on():
    M, w, out = view((T, N), 11), view(N, 12), pk.View(T)
    calls = [call(row_dot, T, N=N, M=M, w=w, out=out), call(row_dot_after, T, N=N, M=M, out=out, s0=1.0)]
    kernel = transformed(fused(*calls), "args")
    check_pass(loops_pass.run, kernel, False)  # the second sum starts from the first member's store
    assert_launch_matches_eager(calls, transformed(kernel, *manager.NAMES), [out])


def test_loops_refuses_a_body_that_reassigns_the_loop_variable():
    A, B, C = pk.View((T, N)), view((T, N), 1), pk.View((T, N))
    calls = [call(add, T, N=N, S=1.5, A=A, B=B), call(mirror, T, N=N, A=A, C=C)]
    kernel = transformed(fused(*calls), "args")
    assert "k0_A[i0][k1_i]" in text(kernel)  # looks like add's element, but is column N - 1 - i
    check_pass(loops_pass.run, kernel, False)
    got = assert_launch_matches_eager(calls, transformed(kernel, *manager.NAMES), [A, C])
    np.testing.assert_array_equal(got[1], 1.5 + np.asarray(B))


# --- restrict ----------------------------------------------------------------------------------------------------
def test_restrict_marks_every_distinct_array_after_argument_fusion():
    A, B, C = pk.View((T, N)), view((T, N), 1), pk.View((T, N))
    kernel = transformed(fused(*fig2(A, B, C)), "args")
    check_pass(restrict_pass.run, kernel, True, lambda out: out.restrict == {"k0_A", "k0_B", "k1_C"})


def test_restrict_never_marks_two_parameters_that_are_one_array():
    A, B, C = pk.View((T, N)), view((T, N), 1), pk.View((T, N))
    if pk.get_default_space().value in ("Cuda", "HIP"):  # GPUs: nothing restrict once two Views overlap
        check_pass(restrict_pass.run, fused(*fig2(A, B, C)), False, lambda out: out.restrict == frozenset())
    else:
        check_pass(restrict_pass.run, fused(*fig2(A, B, C)), True, lambda out: out.restrict == {"k1_C"})


def test_restrict_marks_disjoint_subviews_but_not_overlapping_ones():
    a, p, q = view(10, 8), pk.View(5), pk.View(5)
    disjoint = [call(scale, 5, x=a.subview(slice(0, 5)), y=p), call(scale, 5, x=a.subview(slice(5, 10)), y=q)]
    check_pass(restrict_pass.run, fused(*disjoint), True,
               lambda out: out.restrict == {"k0_x", "k0_y", "k1_x", "k1_y"})
    overlapping = [call(scale, 5, x=a.subview(slice(0, 5)), y=p), call(scale, 5, x=a.subview(slice(3, 8)), y=q)]
    kernel = fused(*overlapping)
    if pk.get_default_space().value in ("Cuda", "HIP"):  # GPUs: nothing restrict once two Views overlap
        check_pass(restrict_pass.run, kernel, False, lambda out: out.restrict == frozenset())
    else:
        check_pass(restrict_pass.run, kernel, True, lambda out: out.restrict == {"k0_y", "k1_y"})
    assert_launch_matches_eager(overlapping, transformed(kernel, *manager.NAMES), [p, q])


def test_restrict_leaves_views_passed_to_helpers_alone():
    a, b, c, d = view(T, 9), pk.View(T), view(T, 10), pk.View(T)
    calls = [call(add_first, T, x=a, y=b), call(scale, T, x=c, y=d)]
    kernel = fused(*calls)
    out = check_pass(restrict_pass.run, kernel, True, lambda out: out.restrict == {"k0_y", "k1_x", "k1_y"})
    assert_launch_matches_eager(calls, out, [b, d])


def test_restrict_of_nothing_is_not_a_modification():
    a = view(T, 11)
    check_pass(restrict_pass.run, fused(call(scale, T, x=a, y=a.subview(slice(None)))), False)


# --- redundant-access elimination --------------------------------------------------------------------------------
def test_memory_reads_b_once_and_forwards_a_in_figure2():
    A, B, C = pk.View((T, N)), view((T, N), 1), pk.View((T, N))
    calls = fig2(A, B, C)
    kernel = transformed(fused(*calls), "args", "loops")

    def one_read_each(out):
        assert element_accesses(out, "k0_B") == (1, 0)
        assert element_accesses(out, "k0_A") == (0, 1)  # mul's read of A takes the value just stored
        assert element_accesses(out, "k1_C") == (0, 1)

    out = check_pass(memory_pass.run, kernel, True, one_read_each)
    assert_launch_matches_eager(calls, out, [A, C])


def test_memory_repeated_read_and_store_to_load_forwarding():
    x, y, z = view(T, 12), pk.View(T), pk.View(T)
    calls = [call(scale, T, x=x, y=y), call(combine, T, x=x, y=y, z=z)]
    kernel = transformed(fused(*calls), "args")

    def forwarded(out):
        assert element_accesses(out, "k0_x") == (1, 0)
        assert element_accesses(out, "k0_y") == (0, 1)
        assert element_accesses(out, "k1_z") == (0, 1)

    out = check_pass(memory_pass.run, kernel, True, forwarded)
    assert_launch_matches_eager(calls, out, [y, z])


def test_memory_removes_a_store_overwritten_before_any_read():
    x, w, y = view(T, 13), view(T, 14), pk.View(T)
    calls = [call(scale, T, x=x, y=y), call(scale, T, x=w, y=y)]

    def one_store(out):
        assert element_accesses(out, "k0_y") == (0, 1)
        (store,) = [s for s in out.source.tree.body if isinstance(s, ast.Assign)]
        value = locals_of(out, "st")[store.value.id][1]  # the second call's value, 2.0 * w[i]
        assert re.fullmatch(r"2\.0 \* (ld\d+)", value) and locals_of(out, "ld")[value[6:]][1] == "k1_x[i0]", value

    out = check_pass(memory_pass.run, transformed(fused(*calls), "args"), True, one_store)
    np.testing.assert_array_equal(assert_launch_matches_eager(calls, out, [y])[0], 2.0 * np.asarray(w))


def test_memory_removes_a_store_whose_only_read_between_was_forwarded():
    """store y, read y[i] (the stored value, from a local), store y again: memory never saw the first store
    (BabelStream's ten iterations fused store each array once, not ten times)."""
    x, w, y, z = view(T, 13), view(T, 14), pk.View(T), pk.View(T)
    calls = [call(scale, T, x=x, y=y), call(combine, T, x=x, y=y, z=z), call(scale, T, x=w, y=y)]

    def one_store_of_y(out):
        assert element_accesses(out, "k0_y") == (0, 1)
        assert element_accesses(out, "k1_z") == (0, 1)

    out = check_pass(memory_pass.run, transformed(fused(*calls), "args"), True, one_store_of_y)
    got_y, got_z = assert_launch_matches_eager(calls, out, [y, z])
    np.testing.assert_array_equal(got_y, 2.0 * np.asarray(w))
    np.testing.assert_array_equal(got_z, 2.0 * np.asarray(x) + np.asarray(x) * np.asarray(x))


@pytest.mark.parametrize("between", ["twin", "prefix subview", "if", "for"])
def test_memory_keeps_a_store_that_may_be_observed_before_it_is_overwritten(between):
    """store y, something that may read y, store y again: the first store stays."""
    x, w, y, z = view(T, 13), view(T, 14), view(T + 1, 15), pk.View(T)
    reader = {"twin": call(combine, T, x=x, y=y.subview(slice(None)), z=z),  # y under another name (args off)
              "prefix subview": call(combine, T, x=x, y=y.subview(slice(0, T)), z=z),  # other storage, same bytes
              "if": call(guarded_copy, T, n=T - 2, y=y, z=z),
              "for": call(repeat_add, T, n=3, y=y, z=z)}[between]
    calls = [call(scale, T, x=x, y=y), reader, call(scale, T, x=w, y=y)]
    kernel = fused(*calls) if between == "twin" else transformed(fused(*calls), "args", "loops")

    def both_stores(out):
        assert sum(element_accesses(out, n)[1] for n, v in zip(params(out), values(out)) if v is y) == 2

    # combine reads x a second time: that read is merged, so the pass does modify those kernels
    out = check_pass(memory_pass.run, kernel, reader.prepared.workunit is combine, both_stores)
    assert_launch_matches_eager(calls, out, [y, z])


def test_memory_never_hoists_a_guarded_read():
    n = 9
    x, y = view(n, 16), pk.View(n)  # x has exactly n elements: x[i + 1] is out of bounds for the last thread
    calls = [call(guarded_reads, n, n=n, x=x, y=y)]

    def guards_kept(out):
        hoisted = [source for _, source in locals_of(out, "ld").values()]
        assert hoisted == ["k0_x[i0]"], hoisted  # only the unguarded x[i] is read up front, once
        assert element_accesses(out, "k0_x")[0] == 5
        body = text(out)
        for guarded in ("k0_x[i0 + 1] if i0 + 1 < k0_n else 0.0", "i0 + 1 < k0_n and k0_x[i0 + 1] > 0.0",
                        "i0 + 1 >= k0_n or k0_x[i0 + 1] < 0.0", "0 < i0 < k0_x[i0 - 1] + 3.0"):
            assert guarded in body, body

    out = check_pass(memory_pass.run, fused(*calls), True, guards_kept)
    assert_launch_matches_eager(calls, out, [y])


def test_memory_forwards_stores_converted_to_the_element_type():
    n = 16
    x, y, k = view(n, 17, lo=-50.0, hi=50.0), pk.View(n, pk.float32), pk.View(n, pk.int32)
    z, w = pk.View(n), pk.View(n)
    calls = [call(roundtrip, n, x=x, y=y, k=k, z=z, w=w)]

    def typed_locals(out):
        assert element_accesses(out, "k0_y") == (0, 1) and element_accesses(out, "k0_k") == (0, 1)
        assert sorted(t.name for t, _ in locals_of(out, "st").values()) == ["float32", "float64", "float64",
                                                                            "int32"]

    out = check_pass(memory_pass.run, fused(*calls), True, typed_locals)
    got = assert_launch_matches_eager(calls, out, [y, k, z, w])
    xs = np.asarray(x)
    np.testing.assert_array_equal(got[2], (xs / 3.0).astype(np.float32).astype(np.float64))
    np.testing.assert_array_equal(got[3], np.trunc(xs * 7.0) * 0.5)
    assert not np.array_equal(got[2], xs / 3.0)  # the data does exercise the rounding


def test_memory_treats_overlapping_views_as_different_elements():
    a, p, q = view(T + 1, 18), pk.View(T), pk.View(T)
    calls = [call(scale, T, x=a, y=p), call(scale, T, x=a.subview(slice(1, T + 1)), y=q)]
    kernel = fused(*calls)
    out = check_pass(memory_pass.run, kernel, False)
    assert element_accesses(out, "k0_x") == (1, 0) and element_accesses(out, "k1_x") == (1, 0)
    assert_launch_matches_eager(calls, transformed(kernel, *manager.NAMES), [p, q])


def test_memory_sees_every_target_of_a_chained_assignment():
    x, y, z = view(T, 19), view(T, 20), pk.View(T)
    t = np.asarray(x) + np.asarray(y)
    calls = [call(chain_assign, T, x=x, y=y, z=z)]
    kernel = fused(*calls)
    check_pass(memory_pass.run, kernel, False)  # x[i] and y[i] are read again after the chained store
    got = assert_launch_matches_eager(calls, transformed(kernel, *manager.NAMES), [x, y, z])
    np.testing.assert_array_equal(got[2], (0.5 * t) * (0.5 * t))


def test_memory_keeps_stores_to_an_element_whose_index_changed():
    x, y = view(T, 21), view((T, 2), 22)
    calls = [call(moving_index, T, x=x, y=y)]
    out = check_pass(memory_pass.run, fused(*calls), True,  # x[i] is read once
                     lambda out: element_accesses(out, "k0_y")[1] == 2 and element_accesses(out, "k0_x")[0] == 1)
    got = assert_launch_matches_eager(calls, out, [y])
    xs = np.asarray(x)
    np.testing.assert_array_equal(got[0], np.stack([xs, 2.0 * xs], axis=1))


def test_memory_index_read_from_an_array_that_changes():
    idx, x, y = pk.View(T, pk.int64), view((T, 3), 23), pk.View(T)
    idx[:] = 1
    x0 = np.asarray(x).copy()
    calls = [call(indirect, T, idx=idx, x=x, y=y)]

    def stores_kept(out):
        assert element_accesses(out, "k0_x")[1] == 2
        assert element_accesses(out, "k0_idx")[0] == 1  # idx[i] read once, then forwarded from its store

    out = check_pass(memory_pass.run, fused(*calls), True, stores_kept)
    got = assert_launch_matches_eager(calls, out, [idx, x, y])
    np.testing.assert_array_equal(got[2], x0[:, 1] + x0[:, 2])
    np.testing.assert_array_equal(got[1][:, 1:], np.full((T, 2), [5.0, 6.0]))


def test_memory_keeps_the_reads_of_a_statement_whose_helper_writes_the_view():
    x, y = view(T, 24), pk.View(T)
    x0 = np.asarray(x).copy()
    calls = [call(read_then_add_ten, T, x=x, y=y)]
    out = check_pass(memory_pass.run, fused(*calls), False,
                     lambda out: "add_ten(k0_x, i0) + k0_x[i0]" in text(out))
    np.testing.assert_array_equal(assert_launch_matches_eager(calls, out, [x, y])[1], x0 + 10.0)


# --- the manager -------------------------------------------------------------------------------------------------
def test_manager_order_and_enabled_set(monkeypatch):
    A, B, C = pk.View((T, N)), view((T, N), 1), pk.View((T, N))
    kernel = fused(*fig2(A, B, C))
    out, ran = manager.apply(kernel, frozenset(manager.NAMES))
    assert ran == [("args", True), ("loops", True), ("restrict", True), ("memory", True)]
    manager.verify(out)
    _, ran = manager.apply(kernel, frozenset({"memory", "loops"}))
    assert [name for name, _ in ran] == ["loops", "memory"] and ran[0] == ("loops", False)
    monkeypatch.setenv("KFUSE_TRANSFORMS", "restrict, args")
    assert manager.enabled() == {"args", "restrict"}
    pk.set_transforms(["memory"])
    assert manager.enabled() == {"memory"}
    pk.set_transforms("none")
    assert manager.enabled() == frozenset()
    pk.set_transforms(None)
    assert manager.enabled() == {"args", "restrict"}
    monkeypatch.setenv("KFUSE_TRANSFORMS", "none")
    assert manager.apply(kernel) == (kernel, [])
    with pytest.raises(KfuseError, match="unknown transform"):
        pk.set_transforms(["args", "loop"])


# --- numerically: every transform alone and all together, through the pipeline ------------------------------------
SETTINGS = [["args"], ["loops"], ["restrict"], ["memory"], list(manager.NAMES)]
SETTING_IDS = ["args", "loops", "restrict", "memory", "all"]


@pk.workunit
def nstream(i: int, s: float, a: pk.View1D[pk.double], b: pk.View1D[pk.double], c: pk.View1D[pk.double]):
    a[i] += b[i] + s * c[i]


@pk.workunit
def dot(i: int, acc: pk.Acc[pk.double], x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    acc += x[i] * y[i]


@pk.workunit
def md_add(i: int, j: int, s: float, A: pk.View2D[pk.double], B: pk.View2D[pk.double]):
    A[i][j] = s + B[i][j]


@pk.workunit
def md_mul(i: int, j: int, A: pk.View2D[pk.double], B: pk.View2D[pk.double], C: pk.View2D[pk.double]):
    C[i][j] = A[i][j] * B[i][j] + A[i][j]


@pk.workunit
def scale32(i: int, s: float, x: pk.View1D[pk.float32], y: pk.View1D[pk.float32]):
    y[i] = s * x[i]


@pk.workunit
def widen32(i: int, y: pk.View1D[pk.float32], z: pk.View1D[pk.double]):
    z[i] = y[i] * 3.0 + y[i]


def p_figure2():
    A, B, C = pk.View((T, N)), view((T, N), 1), pk.View((T, N))
    pk.parallel_for(T, add, N=N, S=1.5, A=A, B=B)
    pk.parallel_for(T, mul, N=N, A=A, B=B, C=C)
    return [A, C]


def p_nstream():
    n = 40
    a, b, c = view(n, 30), view(n, 31), view(n, 32)
    for _ in range(10):
        pk.parallel_for(n, nstream, s=0.75, a=a, b=b, c=c)
    return [a]


def p_reductions():
    M, s, out = view((T, N), 4, lo=1.0, hi=2.0), pk.View(T), pk.View((T, N))
    x, y = view(T, 33), view(T, 34)
    pk.parallel_for(T, rowsum, N=N, M=M, s=s)
    pk.parallel_for(T, rownorm, N=N, M=M, s=s, out=out)
    r1 = pk.parallel_reduce(T, dot, x=x, y=y)
    r2 = pk.parallel_reduce(T, dot, x=x, y=x)
    return [s, out, r1, r2]


def p_loop_hazards():
    A, B, C, D = pk.View((T, N + 1)), view((T, N), 1), pk.View((T, N)), pk.View((T, N))
    M, cnt = view((T, N), 7), pk.View(T, pk.int64)
    cnt[:] = 2
    pk.parallel_for(T, add, N=N, S=0.5, A=A, B=B)
    pk.parallel_for(T, shifted, N=N, A=A, C=C)
    pk.parallel_for(T, centre, N=N, M=B, out=D)
    pk.parallel_for(T, until_negative, N=N, M=B, out=D)
    pk.parallel_for(T, grow, cnt=cnt, M=M)
    pk.parallel_for(T, bump, cnt=cnt, M=M)
    return [A, C, D, M, cnt]


def p_mdrange():
    rows, cols = 7, 5
    A, B, C = pk.View((rows, cols)), view((rows, cols), 35), pk.View((rows, cols))
    policy = pk.MDRangePolicy([0, 0], [rows, cols])
    pk.parallel_for(policy, md_add, s=0.25, A=A, B=B)
    pk.parallel_for(policy, md_mul, A=A, B=B, C=C)
    pk.parallel_for(policy, md_add, s=-1.0, A=B, B=C)
    return [A, B, C]


def p_float32():
    n = 24
    x, y, z = view(n, 36, pk.float32), pk.View(n, pk.float32), pk.View(n)
    pk.parallel_for(n, scale32, s=1.0 / 3.0, x=x, y=y)
    pk.parallel_for(n, widen32, y=y, z=z)
    pk.parallel_for(n, scale32, s=0.1, x=y, y=x)
    return [x, y, z]


def p_aliasing():
    A, C = view((T, N), 37), pk.View((T, N))
    a, p, q = view(T + 1, 38), pk.View(T), pk.View(T)
    buf = np.linspace(-1.0, 1.0, T)
    z = pk.View(T)
    pk.parallel_for(T, add, N=N, S=1.0, A=A, B=A)  # one array as two parameters of one call
    pk.parallel_for(T, mul, N=N, A=A, B=A.subview(slice(None)), C=C)
    pk.parallel_for(T, scale, x=a, y=p)
    pk.parallel_for(T, scale, x=a.subview(slice(1, T + 1)), y=q)  # overlaps a, read only: fused
    pk.parallel_for(T, scale, x=buf, y=z)  # a NumPy array and a View of it
    pk.parallel_for(T, combine, x=pk.from_numpy(buf), y=z, z=p)
    return [A, C, p, q, z]


def p_memory_edges():
    n = 9
    x, y = view(n, 16), pk.View(n)
    xs, ys = view(T, 19), view(T, 20)
    z, m2 = pk.View(T), view((T, 2), 22)
    idx, x3, y3 = pk.View(T, pk.int64), view((T, 3), 23), pk.View(T)
    idx[:] = 1
    pk.parallel_for(n, guarded_reads, n=n, x=x, y=y)
    pk.parallel_for(n, scale, x=x, y=x)
    pk.parallel_for(T, chain_assign, x=xs, y=ys, z=z)
    pk.parallel_for(T, moving_index, x=z, y=m2)
    pk.parallel_for(T, indirect, idx=idx, x=x3, y=y3)
    pk.parallel_for(T, combine, x=y3, y=z, z=xs)
    return [x, y, xs, ys, z, m2, idx, x3, y3]


def p_signed_zero():
    B = pk.View((T, N))
    B[:] = -0.0
    A1, A2 = pk.View((T, N)), pk.View((T, N))
    got = []
    for s1, s2 in ((0.0, 0.0), (0.0, -0.0), (-0.0, 0.0)):  # the first pattern's kernel must not serve the others
        pk.parallel_for(T, add, N=N, S=s1, A=A1, B=B)
        pk.parallel_for(T, add, N=N, S=s2, A=A2, B=B)
        pk.fence()  # run both calls as one partition (reading A1 alone would run only its producer)
        got += [np.signbit(np.asarray(A1)), np.signbit(np.asarray(A2))]
    return got


FUSED_PROGRAMS = {"figure2": p_figure2, "nstream": p_nstream, "reductions": p_reductions,
                  "loop_hazards": p_loop_hazards, "mdrange": p_mdrange, "float32": p_float32,
                  "aliasing": p_aliasing, "memory_edges": p_memory_edges}


def observe(results) -> list:
    """Host copies of a program's results (reading a Future or View runs what it waits for)."""
    return [float(r) if isinstance(r, (float, pk.Future)) else np.asarray(r).copy() for r in results]


def assert_close(expected: list, got: list, where: str):
    assert len(expected) == len(got)
    for e, g in zip(expected, got):
        if isinstance(e, float):
            assert g == pytest.approx(e, rel=1e-12, abs=1e-12), where  # reductions may sum in another order
        else:
            assert e.dtype == g.dtype and e.shape == g.shape, where
            np.testing.assert_array_equal(g, e, err_msg=where)


_eager_results: dict = {}


@pytest.mark.parametrize("names", SETTINGS, ids=SETTING_IDS)
@pytest.mark.parametrize("program", sorted(FUSED_PROGRAMS))
def test_fused_program_equals_eager_under_each_transform_setting(program, names):
    if program not in _eager_results:
        _eager_results[program] = observe(FUSED_PROGRAMS[program]())
    pk.set_transforms(names)
    pk.reset_stats()
    with pk.fusion():
        results = FUSED_PROGRAMS[program]()
    got = observe(results)  # after the whole trace ran as one partition (reading inside would split it)
    assert_close(_eager_results[program], got, f"{program} with {names}")
    assert pk.stats()["fused_kernels_launched"] >= 1  # the program did go through the fuser


@pytest.mark.parametrize("names", [["args"], list(manager.NAMES)], ids=["args", "all"])
def test_zero_and_negative_zero_scalars_get_their_own_kernels(names):
    """Only argument fusion merges scalars: the kernel built for S1 == S2 == 0.0 must not serve -0.0."""
    expected = p_signed_zero()
    pk.set_transforms(names)
    pk.reset_stats()
    with pk.fusion():
        got = p_signed_zero()
    assert_close(expected, got, f"signed zero with {names}")
    assert pk.stats()["fused_kernels_launched"] == 3
    assert [g.any() for g in got] == [False, False, False, True, True, False]  # the data tells them apart


# --- the differential program library (tests/programs.py) under each transform setting -------------------------
#: two Views and a NumPy array over one buffer (d, d2, buf), subviews (lo, hi), a 2-D array, reductions
LIBRARY_PROGRAMS = {
    "aliases": [progs.Call("scale", ("d", "b")), progs.Call("axpy", ("d2", "b"), 0.5), progs.Call("dot", ("buf", "b")),
                progs.Call("rank1", ("b", "d2", "M")), progs.Call("rowsum", ("M", "c")),
                progs.Call("axpy", ("c", "d"), ("r", 0)), progs.Call("sin", ("lo",)), progs.Call("scale", ("hi", "lo")),
                progs.Read("d2", "asarray"), progs.UseResult(0, "float")],
}


@pytest.mark.parametrize("names", SETTINGS, ids=SETTING_IDS)
@pytest.mark.parametrize("name", sorted(LIBRARY_PROGRAMS))
def test_program_library_under_each_transform_setting(name, names):
    program = LIBRARY_PROGRAMS[name]
    expected = progs.run_program(program, "eager")
    pk.set_transforms(names)
    try:
        got = progs.run_program(program, "fused")
    finally:
        pk.set_transforms(None)
    progs.assert_same(expected, got, f"{name} with {names}")
