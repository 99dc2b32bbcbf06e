"""Fusion that must happen: calls proven safe run as one kernel launch and give exactly the eager results.

Every test runs the same program twice, eagerly and with fusion on, on fresh data, and compares the
results bit for bit (the fused kernel runs the same operations per element in the same order).
Workunits live at module level and are shared, so the file compiles few kernels.
"""
import dataclasses
import re

import numpy as np
import pytest

import kfuse as pk
import programs as progs
from kfuse.compiler import cache
from kfuse import context
from fusion_check import assert_same, run_eager_and_fused, view_of

pytestmark = pytest.mark.backend("python")  # the reference interpreter: no C++ compiler

N = 64


def data(seed: int, shape=(N,)) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1.0, 1.0, shape)


# --- the PyFuser paper's Figure 2 ------------------------------------------------------------------
@pk.workunit
def add(tid: int, S: float, N: int, A: pk.View2D[pk.double], B: pk.View2D[pk.double]):
    for i in range(N):
        A[tid][i] = S + B[tid][i]


@pk.workunit
def mul(tid: int, N: int, A: pk.View2D[pk.double], B: pk.View2D[pk.double], C: pk.View2D[pk.double]):
    for i in range(N):
        C[tid][i] = A[tid][i] * B[tid][i]


def test_pyfuser_figure2_runs_as_one_kernel():
    rows, cols = 40, 7

    def program():
        A, B, C = pk.View((rows, cols)), view_of(data(1, (rows, cols))), pk.View((rows, cols))
        pk.parallel_for(rows, add, S=1.5, N=cols, A=A, B=B)
        pk.parallel_for(rows, mul, N=cols, A=A, B=B, C=C)
        return C.copy(), A.copy()

    expected, got, stats, text = run_eager_and_fused(program)
    assert_same(expected, got)
    b = data(1, (rows, cols))
    np.testing.assert_array_equal(got[0], (1.5 + b) * b)
    assert stats["kernels_launched"] == 1 and stats["fused_kernels_launched"] == 1
    assert stats["ops_traced"] == 2
    assert "group 1: add + mul  [fused 2 calls" in text
    assert list(context.current().records)[-1].fused_names == ["add__mul"]


# --- offsets: the same tid + c in both kernels --------------------------------------------------------
@pk.workunit
def shift_write(i: int, x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    y[i + 1] = 2.0 * x[i + 1] + x[i]


@pk.workunit
def shift_read(i: int, y: pk.View1D[pk.double], z: pk.View1D[pk.double]):
    z[i] = y[1 + i] - 0.25


@pk.workunit
def offset_write(i: int, s: int, x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    y[i + s] = 3.0 * x[i]


@pk.workunit
def offset_read(i: int, s: int, y: pk.View1D[pk.double], z: pk.View1D[pk.double]):
    z[i] = y[i + s] + 0.5


def test_same_constant_offset_in_both_kernels_is_fused():
    def program():
        x, y, z = view_of(data(2)), view_of(data(3)), pk.View(N)
        pk.parallel_for(N - 1, shift_write, x=x, y=y)
        pk.parallel_for(N - 1, shift_read, y=y, z=z)
        return z.copy(), y.copy()

    expected, got, stats, _ = run_eager_and_fused(program)
    assert_same(expected, got)
    assert stats["kernels_launched"] == 1 and stats["fused_kernels_launched"] == 1


@pytest.mark.parametrize("s", [0, 2, 5])
def test_same_scalar_offset_value_is_fused(s):
    def program():
        x, y, z = view_of(data(4)), view_of(data(5)), pk.View(N)
        pk.parallel_for(N - 5, offset_write, s=s, x=x, y=y)
        pk.parallel_for(N - 5, offset_read, s=s, y=y, z=z)
        return z.copy(), y.copy()

    expected, got, stats, _ = run_eager_and_fused(program)
    assert_same(expected, got)
    assert stats["kernels_launched"] == 1 and stats["fused_kernels_launched"] == 1


def test_scalar_offset_matches_a_constant_offset_by_value():
    """``y[i + s]`` with s == 1 meets ``y[1 + i]``: the analysis compares offsets by run-time value."""
    def program():
        x, y, z = view_of(data(6)), view_of(data(7)), pk.View(N)
        pk.parallel_for(N - 1, offset_write, s=1, x=x, y=y)
        pk.parallel_for(N - 1, shift_read, y=y, z=z)
        return z.copy(), y.copy()

    expected, got, stats, _ = run_eager_and_fused(program)
    assert_same(expected, got)
    assert stats["kernels_launched"] == 1 and stats["fused_kernels_launched"] == 1


# --- read-only sharing of an array read anywhere --------------------------------------------------------
@pk.workunit
def weighted_sum(i: int, x: pk.View1D[pk.double], out: pk.View1D[pk.double]):
    t: float = 0.0
    for j in range(x.extent(0)):
        t += x[j] * (i - j)
    out[i] = t


@pk.workunit
def max_distance(i: int, x: pk.View1D[pk.double], out: pk.View1D[pk.double]):
    m: float = 0.0
    for j in range(x.extent(0)):
        m = max(m, abs(x[j] - x[i]))
    out[i] = m


def test_read_only_array_read_anywhere_is_shared_by_fused_kernels():
    def program():
        x, u, v = view_of(data(8)), pk.View(N), pk.View(N)
        pk.parallel_for(N, weighted_sum, x=x, out=u)
        pk.parallel_for(N, max_distance, x=x, out=v)
        pk.fence()  # independent calls: run both in one flush
        return u.copy(), v.copy()

    expected, got, stats, _ = run_eager_and_fused(program)
    assert_same(expected, got)
    x = data(8)
    np.testing.assert_allclose(got[1], np.abs(x[None, :] - x[:, None]).max(axis=1), rtol=0, atol=0)
    assert stats["kernels_launched"] == 1 and stats["fused_kernels_launched"] == 1


# --- independent work interleaved (fuser/planner.py _pull) ----------------------------------------------
@pk.workunit
def class_step(i: int, p: pk.View1D[pk.double], out: pk.View1D[pk.double]):
    out[i] = 2.0 * p[i] - 1.0


@pk.workunit
def column_pass(i: int, x: pk.View1D[pk.double], s: pk.View1D[pk.double], col: pk.View1D[pk.double]):
    col[i] = x[i] * s[0] + 1.0


def test_small_steps_and_the_passes_reading_them_each_run_as_one_kernel():
    """Per class: a one-element step, then a pass over the samples that reads it and writes the class's column of
    a matrix. The steps run first, as one kernel, then the passes as another (columns share no element)."""
    def program():
        x, priors, m = view_of(data(11)), view_of(data(12, (3,))), pk.View((N, 3))
        small = [pk.View(1) for _ in range(3)]
        for c in range(3):
            pk.parallel_for(1, class_step, p=priors[c:c + 1], out=small[c])
            pk.parallel_for(N, column_pass, x=x, s=small[c], col=m[:, c])
        return m.copy()

    expected, got, stats, text = run_eager_and_fused(program)
    assert_same(expected, got)
    np.testing.assert_array_equal(got, data(11)[:, None] * (2.0 * data(12, (3,)) - 1.0)[None, :] + 1.0)
    assert stats["kernels_launched"] == 2 and "calls 0, 2, 4" in text and "calls 1, 3, 5" in text, text


# --- MDRange ----------------------------------------------------------------------------------------------
@pk.workunit
def md_axpy(i: int, j: int, a: float, X: pk.View2D[pk.double], Y: pk.View2D[pk.double]):
    Y[i][j] = a * X[i][j] + Y[i][j]


@pk.workunit
def md_square(i: int, j: int, Y: pk.View2D[pk.double], Z: pk.View2D[pk.double]):
    Z[i, j] = Y[i, j] * Y[i, j] - 1.0


@pk.workunit
def md_total(i: int, j: int, acc: pk.Acc[pk.double], Z: pk.View2D[pk.double]):
    acc += Z[i][j]


def test_mdrange_elementwise_kernels_and_a_reduction_are_fused():
    shape = (12, 9)

    def program():
        X, Y, Z = view_of(data(9, shape)), view_of(data(10, shape)), pk.View(shape)
        policy = pk.MDRangePolicy([1, 0], [12, 8])
        pk.parallel_for(policy, md_axpy, a=0.75, X=X, Y=Y)
        pk.parallel_for(policy, md_square, Y=Y, Z=Z)
        total = pk.parallel_reduce(policy, md_total, Z=Z)
        return float(total), Z.copy(), Y.copy()

    expected, got, stats, text = run_eager_and_fused(program)
    assert_same(expected, got)
    y = data(10, shape)
    y[1:, :8] += 0.75 * data(9, shape)[1:, :8]
    np.testing.assert_array_equal(got[2], y)
    assert stats["kernels_launched"] == 1 and stats["fused_kernels_launched"] == 1
    assert "md_axpy + md_square + md_total  [fused 3 calls" in text


@pk.workunit
def cube_fill(i: int, j: int, k: int, A: pk.View3D[pk.double]):
    A[i][j][k] = A[i][j][k] + i * 100 + j * 10 + k


@pk.workunit
def cube_mix(i: int, j: int, k: int, A: pk.View3D[pk.double], B: pk.View3D[pk.double]):
    B[i, j, k] = 2.0 * A[i, j, k] - A[i][j][k] * A[i][j][k]


def test_rank3_mdrange_kernels_are_fused():
    shape = (3, 5, 4)

    def program():
        A, B = view_of(data(21, shape)), pk.View(shape)
        policy = pk.MDRangePolicy([0, 1, 0], [3, 5, 4])
        pk.parallel_for(policy, cube_fill, A=A)
        pk.parallel_for(policy, cube_mix, A=A, B=B)
        return B.copy(), A.copy()

    expected, got, stats, _ = run_eager_and_fused(program)
    assert_same(expected, got)
    i, j, k = np.indices(shape)
    d = data(21, shape)
    a = np.where(j >= 1, d + i * 100 + j * 10 + k, d)  # left to right, as the kernel adds
    np.testing.assert_array_equal(got[1], a)
    assert stats["kernels_launched"] == 1 and stats["fused_kernels_launched"] == 1


# --- reductions ------------------------------------------------------------------------------------------
@pk.workunit
def r_sum(i: int, acc: pk.Acc[pk.double], x: pk.View1D[pk.double]):
    acc += x[i]


@pk.workunit
def r_sumsq(i: int, acc: pk.Acc[pk.double], x: pk.View1D[pk.double]):
    acc += x[i] * x[i]


@pk.workunit
def r_count_positive(i: int, acc: pk.Acc[pk.int64], x: pk.View1D[pk.double]):
    if x[i] > 0.0:
        acc += 1


@pk.workunit
def scale_in_place(i: int, x: pk.View1D[pk.double]):
    x[i] = 2.0 * x[i] + 1.0


@pk.workunit
def minus(i: int, m: float, x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    y[i] = x[i] - m


def test_two_reductions_float_and_int_in_one_kernel():
    def program():
        x = view_of(data(11, (1000,)))
        total = pk.parallel_reduce(1000, r_sum, x=x)
        positive = pk.parallel_reduce(1000, r_count_positive, x=x)
        return int(positive), float(total)  # reading one pulls its sibling into the same launch

    expected, got, stats, text = run_eager_and_fused(program)
    assert_same(expected, got)
    assert isinstance(got[0], int) and got[0] == int((data(11, (1000,)) > 0).sum())
    assert stats["kernels_launched"] == 1 and stats["fused_kernels_launched"] == 1
    assert "r_sum + r_count_positive  [fused 2 calls" in text


def test_three_reductions_in_one_kernel():
    def program():
        x = view_of(data(12, (1000,)))
        results = [pk.parallel_reduce(1000, wu, x=x) for wu in (r_sum, r_sumsq, r_count_positive)]
        return [float(results[0]), float(results[1]), int(results[2])]

    expected, got, stats, _ = run_eager_and_fused(program)
    assert_same(expected, got)
    x = data(12, (1000,))
    assert got[1] == pytest.approx(float(np.sum(x * x)), rel=1e-12)
    assert stats["kernels_launched"] == 1 and stats["fused_kernels_launched"] == 1


@pk.workunit
def count_mod3(i: int, acc: pk.Acc[pk.int32]):
    acc += i % 3


@pk.workunit
def harmonic(i: int, acc: pk.Acc[pk.double]):
    acc += 1.0 / (i + 1)


def test_reductions_without_views_int32_and_float_in_one_kernel():
    def program():
        ones = pk.parallel_reduce(1000, count_mod3)
        h = pk.parallel_reduce(1000, harmonic)
        return float(h), int(ones)

    expected, got, stats, _ = run_eager_and_fused(program)
    assert_same(expected, got)
    assert got[1] == sum(i % 3 for i in range(1000))
    assert got[0] == pytest.approx(sum(1.0 / k for k in range(1, 1001)), rel=1e-13)
    assert stats["kernels_launched"] == 1 and stats["fused_kernels_launched"] == 1


def test_reduction_then_for_kernel_overwriting_its_input_in_one_group():
    """The reduction reads x[i] before the same thread overwrites it, so it sees the old values."""
    def program():
        x = view_of(data(13))
        total = pk.parallel_reduce(N, r_sum, x=x)
        pk.parallel_for(N, scale_in_place, x=x)
        new_x = x.copy()  # host read of x: runs both calls (the reduction must read x first)
        return new_x, float(total)

    expected, got, stats, text = run_eager_and_fused(program)
    assert_same(expected, got)
    assert got[1] == pytest.approx(float(data(13).sum()), rel=1e-12)
    assert stats["kernels_launched"] == 1 and stats["fused_kernels_launched"] == 1
    assert "r_sum + scale_in_place  [fused 2 calls" in text


def test_future_consumed_in_the_same_partition_starts_a_new_group():
    def program():
        x, y = view_of(data(14)), pk.View(N)
        total = pk.parallel_reduce(N, r_sum, x=x)
        pk.parallel_for(N, minus, m=total, x=x, y=y)  # needs the reduction's value
        spread = pk.parallel_reduce(N, r_sumsq, x=y)
        return float(spread), y.copy()

    expected, got, stats, text = run_eager_and_fused(program)
    assert_same(expected, got)
    np.testing.assert_allclose(got[1], data(14) - data(14).sum(), rtol=1e-12)
    assert stats["kernels_launched"] == 2 and stats["fused_kernels_launched"] == 1
    assert "split before call 1 (minus): reduction consumer: uses the result of r_sum" in text
    assert "group 2: minus + r_sumsq  [fused 2 calls; calls 1..2]" in text


# --- fused bodies with inner loops (loop fusion must respect reads of other iterations) ---------------------
@pk.workunit
def row_plus_one(i: int, n: int, x: pk.View2D[pk.double], y: pk.View2D[pk.double]):
    for j in range(n):
        y[i][j] = x[i][j] + 1.0


@pk.workunit
def row_double(i: int, n: int, y: pk.View2D[pk.double]):
    for j in range(n):
        y[i][j] = y[i][j] * 2.0


@pk.workunit
def row_reverse_mix(i: int, n: int, y: pk.View2D[pk.double], z: pk.View2D[pk.double]):
    for j in range(n):
        z[i][j] = y[i][n - 1 - j] + y[i][0] * y[i][(j + 1) % n]


def test_fused_row_loops_that_read_other_iterations():
    rows, cols = 10, 9

    def program():
        x, y, z = view_of(data(20, (rows, cols))), pk.View((rows, cols)), pk.View((rows, cols))
        pk.parallel_for(rows, row_plus_one, n=cols, x=x, y=y)
        pk.parallel_for(rows, row_double, n=cols, y=y)
        pk.parallel_for(rows, row_reverse_mix, n=cols, y=y, z=z)
        return z.copy(), y.copy()

    expected, got, stats, _ = run_eager_and_fused(program)
    assert_same(expected, got)
    y = 2.0 * (data(20, (rows, cols)) + 1.0)
    np.testing.assert_array_equal(got[0], y[:, ::-1] + y[:, :1] * np.roll(y, -1, axis=1))
    assert stats["kernels_launched"] == 1 and stats["fused_kernels_launched"] == 1


# --- helpers shared by fused kernels ---------------------------------------------------------------------
@pk.function
def smooth_step(v: float) -> float:
    return v * v * (3.0 - 2.0 * v)


@pk.workunit
def step_forward(i: int, x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    i0: float = smooth_step(x[i])  # a local named like the fused kernel's thread index
    y[i] = i0 + 1.0


@pk.workunit
def step_back(tid: int, y: pk.View1D[pk.double], z: pk.View1D[pk.double]):
    z[tid] = smooth_step(y[tid] - 1.0) * 0.5


def test_kernels_calling_the_same_helper_are_fused():
    def program():
        x, y, z = view_of(data(15)), pk.View(N), pk.View(N)
        pk.parallel_for(N, step_forward, x=x, y=y)
        pk.parallel_for(N, step_back, y=y, z=z)
        return z.copy(), y.copy()

    expected, got, stats, _ = run_eager_and_fused(program)
    assert_same(expected, got)
    x = data(15)
    np.testing.assert_allclose(got[1], x * x * (3 - 2 * x) + 1.0, rtol=1e-14)
    assert stats["kernels_launched"] == 1 and stats["fused_kernels_launched"] == 1


# --- a repeated partition: replayed, its plan and kernel reused ----------------------------------------------
@pk.workunit
def relax_rhs(i: int, dt: float, u: pk.View1D[pk.double], f: pk.View1D[pk.double], un: pk.View1D[pk.double]):
    un[i] = u[i] + dt * (f[i] - u[i])


@pk.workunit
def relax_mix(i: int, u: pk.View1D[pk.double], un: pk.View1D[pk.double]):
    u[i] = 0.5 * (u[i] + un[i])


@pytest.mark.backend("kokkos")  # counts compiles and cache hits
def test_time_step_loop_compiles_the_fused_kernel_once_and_replays_the_partition():
    steps = 20
    loads: list = []

    def hook(event, name, key):
        loads.append((event, name))

    def program():
        u, f, un = view_of(data(16)), view_of(data(17)), pk.View(N)
        norms, builds, flushes = [], [], []
        for _ in range(steps):
            pk.parallel_for(N, relax_rhs, dt=0.1, u=u, f=f, un=un)
            pk.parallel_for(N, relax_mix, u=u, un=un)
            norms.append(float(pk.parallel_reduce(N, r_sumsq, x=u)))  # a host read every step
            builds.append((pk.stats()["compiles"], pk.stats()["cache_hits"], len(loads)))
            if pk.fusion_enabled():  # the explain line of this step's flush
                flushes.append(pk.explain().splitlines()[-2])
        return norms, u.copy(), builds, flushes

    cache.hooks.append(hook)
    try:
        expected, got, stats, _ = run_eager_and_fused(program)
    finally:
        cache.hooks.remove(hook)
    assert_same(expected[:2], got[:2])
    builds = got[2]
    assert all(b == builds[0] for b in builds)  # nothing compiled or even loaded after the first step
    fused = [name for _, name in loads if name == "relax_rhs__relax_mix__r_sumsq"]
    assert len(fused) == 1
    assert stats["kernels_launched"] == steps and stats["fused_kernels_launched"] == steps
    assert stats["flushes"] == steps
    flushes = got[3]
    assert len(flushes) == steps and all(line.startswith("flush #") for line in flushes)
    assert "(plan cached)" not in flushes[0] and "(replayed)" not in flushes[0]
    assert flushes[1].endswith("(replayed)")  # then its calls match the replayed flush's: rerun (kfuse/rerun.py)
    assert all("(rerun" in line and "3 call(s) -> 1 kernel launch(es)" in line for line in flushes[2:])


# --- what the fused kernels are called, and KFUSE_DUMP_DIR --------------------------------------------------------
@pk.workunit
def first_stage_of_the_pipeline(i: int, x: pk.View1D[pk.double]):
    x[i] = x[i] + 1.0


@pk.workunit
def second_stage_of_the_pipeline(i: int, x: pk.View1D[pk.double]):
    x[i] = x[i] * 3.0


@pk.workunit
def third_stage_of_the_pipeline(i: int, x: pk.View1D[pk.double]):
    x[i] = x[i] - 2.0


@pk.workunit
def fourth_stage_of_the_pipeline(i: int, x: pk.View1D[pk.double]):
    x[i] = 0.5 * x[i]


def test_long_fused_names_are_shortened_with_a_hash():
    stages = [first_stage_of_the_pipeline, second_stage_of_the_pipeline, third_stage_of_the_pipeline,
              fourth_stage_of_the_pipeline]

    def program():
        x = view_of(data(18))
        for wu in stages:
            pk.parallel_for(N, wu, x=x)
        return x.copy()

    expected, got, stats, _ = run_eager_and_fused(program)
    assert_same(expected, got)
    np.testing.assert_array_equal(got, 0.5 * ((data(18) + 1.0) * 3.0 - 2.0))
    assert stats["kernels_launched"] == 1 and stats["fused_kernels_launched"] == 1
    (name,) = list(context.current().records)[-1].fused_names
    # the first three names, each cut to 24 characters (bounded file names), the count, and a hash of all names
    prefix = "first_stage_of_the_pipel__second_stage_of_the_pipe__third_stage_of_the_pipel__4k_"
    assert re.fullmatch(re.escape(prefix) + "[0-9a-f]{8}", name), name


@pytest.mark.backend("kokkos")  # the C++ of compiled kernels
def test_dump_dir_gets_the_cpp_of_every_kernel_named_after_it(tmp_path, monkeypatch):
    # Workunits made here are new to this process, so their kernels are loaded (and dumped) now.
    @pk.workunit
    def dump_add(i: int, x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
        y[i] = x[i] + 1.0

    @pk.workunit
    def dump_mul(i: int, y: pk.View1D[pk.double], z: pk.View1D[pk.double]):
        z[i] = y[i] * 2.0

    @pk.workunit
    def dump_neighbours(i: int, z: pk.View1D[pk.double], w: pk.View1D[pk.double]):
        w[i] = z[i - 1] + z[i]

    monkeypatch.setenv("KFUSE_DUMP_DIR", str(tmp_path / "dump"))
    pk.enable_fusion()
    x, y, z, w = view_of(data(19)), pk.View(N), pk.View(N), pk.View(N)
    pk.parallel_for(pk.RangePolicy(1, N), dump_add, x=x, y=y)
    pk.parallel_for(pk.RangePolicy(1, N), dump_mul, y=y, z=z)
    pk.parallel_for(pk.RangePolicy(1, N), dump_neighbours, z=z, w=w)  # reads z[i-1]: runs on its own
    result = w.copy()
    expected_z = np.zeros(N)
    expected_z[1:] = (data(19)[1:] + 1.0) * 2.0
    np.testing.assert_array_equal(result[1:], expected_z[:-1] + expected_z[1:])
    files = {p.name: p.read_text() for p in (tmp_path / "dump").glob("*.cpp")}
    assert {"dump_add__dump_mul.cpp", "dump_neighbours.cpp"} <= set(files)
    assert "dump_add.cpp" not in files and "dump_mul.cpp" not in files  # never compiled on their own
    assert "kfuse kernel dump_add__dump_mul" in files["dump_add__dump_mul.cpp"]
    assert "kfuse_launch" in files["dump_neighbours.cpp"]


# --- the differential-program library of tests/programs.py -------------------------------------------------------
# test_tracer_properties.py runs random programs in every mode of programs.MODES, "fused" included; this
# program checks that those runs really fuse (and stay exact), so that the random runs cannot silently
# degrade to one launch per call.
FIXED_PROGRAM = [
    progs.Call("scale", ("a", "b")), progs.Call("axpy", ("b", "c"), 0.5), progs.Call("dot", ("b", "c")),
    progs.Call("axpy", ("c", "b"), ("r", 0)), progs.Call("sin", ("b",)), progs.Call("stencil", ("b", "d")),
    progs.Call("rank1", ("b", "c", "M")), progs.Call("rowsum", ("M", "hi")), progs.Call("scale", ("lo", "a")),
    progs.Call("dot", ("a", "lo")), progs.Call("dot", ("b", "hi")),  # subviews of one array, fused reads
    progs.Read("a", "asarray"), progs.Call("scan", ("c", "d2")), progs.UseResult(1, "float"),
    progs.Read("d", "slice"),
]


def test_program_library_fused_mode_fuses_and_equals_eager():
    expected = progs.run_program(FIXED_PROGRAM, "eager")
    pk.reset_stats()
    progs.assert_same(expected, progs.run_program(FIXED_PROGRAM, "fused"), "fused")
    stats = pk.stats()
    assert stats["fused_kernels_launched"] >= 3
    assert stats["kernels_launched"] < stats["ops_traced"] == 12
    progs.assert_same(expected, progs.run_program(FIXED_PROGRAM, "traced"), "traced")


PERSIST_PROGRAM = """
import sys
import numpy as np
import kfuse as pk
from kfuse.fuser import build

@pk.workunit
def persist_add(i: int, x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    y[i] = x[i] + 1.0

@pk.workunit
def persist_mul(i: int, y: pk.View1D[pk.double], z: pk.View1D[pk.double]):
    z[i] = y[i] * 3.0

if sys.argv[1] == "second":  # a second process must reuse the stored fused kernel, not rebuild it
    def refuse(calls):
        raise AssertionError("fused kernel rebuilt")
    build.build = refuse
pk.enable_fusion()
x, y, z = pk.View(16), pk.View(16), pk.View(16)
x[:] = np.arange(16.0)
pk.parallel_for(16, persist_add, x=x, y=y)
pk.parallel_for(16, persist_mul, y=y, z=z)
assert np.array_equal(np.asarray(z), (np.arange(16.0) + 1.0) * 3.0)
assert pk.stats()["fused_kernels_launched"] == 1
print("ok")
"""


@pytest.mark.backend("kokkos")  # the compiled-kernel store across processes
def test_fused_kernels_are_remembered_across_processes(tmp_path):
    import subprocess
    import sys

    script = tmp_path / "persist.py"
    script.write_text(PERSIST_PROGRAM)
    for run in ("first", "second"):
        proc = subprocess.run([sys.executable, str(script), run], capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


# --- compiling a partition's new kernels together -------------------------------------------------------
@pk.workunit
def ahead_scale(i: int, x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    y[i] = 0.25 * x[i] + 4.0


@pk.workunit
def ahead_neighbours(i: int, x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    y[i] = x[i - 1] + x[i + 1]


@pk.workunit
def ahead_broken(i: int, x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    y[i] = 7.0 * x[i]


def three_groups(x, y, z, w):
    policy = pk.RangePolicy(1, N - 1)
    pk.parallel_for(policy, ahead_scale, x=x, y=y)
    pk.parallel_for(policy, ahead_neighbours, x=y, y=z)  # reads neighbours of what the first wrote: a new group
    pk.parallel_for(policy, ahead_broken, x=z, y=w)  # thread-local on z: fused with the second call


@pytest.mark.backend("kokkos")  # the C++ compiler runs once per kernel, several at once
def test_a_partitions_new_kernels_compile_together_and_a_failure_is_raised_in_turn(monkeypatch):
    """compile_ahead starts every new kernel's compile before the first group runs; a kernel that fails to
    compile still fails at its own group, naming its call, after the groups before it ran."""
    from kfuse.backends import kokkos

    real = kokkos.generate

    def generate(src, spec, name, *restrict):
        gen = real(src, spec, name, *restrict)
        if "ahead_broken" in name:
            gen = dataclasses.replace(gen, source=gen.source + '\nstatic_assert(false, "ahead breakage");\n')
        return gen

    monkeypatch.setattr(kokkos, "generate", generate)
    monkeypatch.setattr(kokkos.KOKKOS, "stored", lambda digest: None)
    for wu in (ahead_scale, ahead_neighbours, ahead_broken):
        wu.specializations.clear()
        wu.__dict__.pop("_kfuse_plans", None)
    started = []
    real_ahead = kokkos.KOKKOS.compile_ahead
    monkeypatch.setattr(kokkos.KOKKOS, "compile_ahead", lambda rendered: (started.append(
        sorted(r.generated.name for r in rendered)), real_ahead(rendered)))
    x, y, z, w = (pk.View(N) for _ in range(4))
    x[:] = data(7)
    pk.enable_fusion()
    three_groups(x, y, z, w)
    with pytest.raises(pk.DeferredError, match="(?s)ahead_broken.*ahead breakage"):
        np.asarray(w)
    assert len(started) == 1 and "ahead_neighbours" in " ".join(started[0]) and len(started[0]) == 2
    expected_y = np.zeros(N)  # the policy leaves both ends unwritten
    expected_y[1:-1] = 0.25 * data(7)[1:-1] + 4.0
    np.testing.assert_array_equal(np.asarray(y), expected_y)  # the groups before the failure ran
    np.testing.assert_array_equal(np.asarray(z)[1:-1], expected_y[:-2] + expected_y[2:])
