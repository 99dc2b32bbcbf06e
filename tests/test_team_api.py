"""PyKokkos's team API beyond TeamThreadRange: pk.single, the MD nested ranges, team scratch memory.

Each construct runs eagerly and traced (fusion on) against NumPy on the python backend, once compiled with real
multi-thread teams, and in the Debug space; its IR, its C++ and its errors are checked without a compiler.
"""
import inspect

import numpy as np
import pytest

import kfuse as pk
from fusion_check import assert_same, run_eager_and_fused
from kfuse.codegen.kernel import generate
from kfuse.ir.dump import dump
from kfuse.ir.lower import lowered
from kfuse.ir.verify import verify
from kfuse.runtime import kokkos_runtime

PYTHON = pytest.mark.backend("python")
KOKKOS = pytest.mark.backend("kokkos")
L, N, M = 5, 7, 6  # league size, rows, columns


def team_size() -> int:
    """Teams of several threads where the machine has them (compiled kernels)."""
    return min(2, kokkos_runtime.concurrency())


def line_of(wu, text: str) -> int:
    """Absolute line number of the first line of ``wu``'s source containing ``text``."""
    lines, first = inspect.getsourcelines(wu.fn)
    return first + next(n for n, line in enumerate(lines) if text in line)


def data(seed: int, shape) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1.0, 1.0, shape)


def view_of(values, dtype=pk.double) -> pk.View:
    v = pk.View(np.shape(values), dtype)
    v[:] = values
    return v


def eager_and_traced(program):
    """``program()`` eagerly and with fusion on: both results, which must be equal."""
    expected, got, _, _ = run_eager_and_fused(program)
    assert_same(expected, got)
    return got


# --- pk.single ---------------------------------------------------------------------------------------------------
@pk.workunit
def row_sums(team: pk.TeamMember, A: pk.View2D[pk.double], out: pk.View1D[pk.double], count: pk.View1D[pk.int64]):
    r: int = team.league_rank()

    def add(j: int, acc: pk.Acc[pk.double]):
        acc += A[r][j]

    total: float = pk.parallel_reduce(pk.TeamThreadRange(team, A.extent(1)), add)
    bumps: int = 0

    def write():
        nonlocal bumps
        out[r] = total
        bumps += 1

    pk.single(pk.PerTeam(team), write)
    if team.team_rank() == 0:
        count[r] = bumps


@pk.workunit
def yAx(team_member, acc, rows, cols, y_view, x_view, A_view):
    """PyKokkos's team_vector_loop tutorial: the team's result added to the reduction by one thread."""
    e: int = team_member.league_rank()

    def team_reduce(j: int, team_acc: pk.Acc[float]):
        def vector_reduce(i: int, vector_acc: pk.Acc[float]):
            vector_acc += A_view[e][j][i] * x_view[e][i]

        tempM: float = pk.parallel_reduce(pk.ThreadVectorRange(team_member, cols), vector_reduce)
        team_acc += y_view[e][j] * tempM

    tempN: float = pk.parallel_reduce(pk.TeamThreadRange(team_member, rows), team_reduce)

    def single_closure():
        nonlocal acc
        acc += tempN

    pk.single(pk.PerTeam(team_member), single_closure)


@pk.workunit
def mark_positive(team: pk.TeamMember, A: pk.View2D[pk.double], marks: pk.View2D[pk.int32]):
    """ExaMiniMD's pattern: pk.single(pk.PerThread(team), ...) inside a TeamThreadRange body."""
    r: int = team.league_rank()

    def row(j: int):
        v: float = A[r][j]

        def mark():
            marks[r][j] = 1 if v > 0.0 else -1

        pk.single(pk.PerThread(team), mark)

    pk.parallel_for(pk.TeamThreadRange(team, A.extent(1)), row)


def single_program(policy):
    def program():
        A = view_of(data(1, (L, M)))
        out, count, marks = pk.View([L]), pk.View([L], pk.int64), pk.View([L, M], pk.int32)
        pk.parallel_for(policy, row_sums, A=A, out=out, count=count)
        pk.parallel_for(policy, mark_positive, A=A, marks=marks)
        return out.copy(), count.copy(), marks.copy()
    return program


def check_single(out, count, marks):
    A = data(1, (L, M))
    np.testing.assert_allclose(out, A.sum(axis=1), rtol=1e-13)
    np.testing.assert_array_equal(count, np.ones(L))
    np.testing.assert_array_equal(marks, np.where(A > 0, 1, -1))


@PYTHON
def test_single_per_team_and_per_thread():
    check_single(*eager_and_traced(single_program(pk.TeamPolicy(L, pk.AUTO))))


@PYTHON
def test_single_adds_the_team_result_to_the_reduction_once():
    y, x, A = data(2, (L, N)), data(3, (L, M)), data(4, (L, N, M))

    def program():
        return pk.parallel_reduce(pk.TeamPolicy(L, pk.AUTO, 4), yAx, rows=N, cols=M, y_view=view_of(y),
                                  x_view=view_of(x), A_view=view_of(A)) + 0.0

    assert eager_and_traced(program) == pytest.approx(np.einsum("ej,eji,ei->", y, A, x), rel=1e-12)


# --- TeamThreadMDRange, ThreadVectorMDRange, TeamVectorMDRange ------------------------------------------------
@pk.workunit
def md_fill(team, A, B, C, N1, N2):
    """PyKokkos's team_thread_mdrange example."""
    league_rank: int = team.league_rank()

    def inner_for(i0: int, i1: int):
        A[league_rank][i0][i1] = B[league_rank][i0] + C[i1]

    pk.parallel_for(pk.TeamThreadMDRange(team, N1, N2), inner_for)
    team.team_barrier()


@pk.workunit
def md_weighted(team: pk.TeamMember, A: pk.View3D[pk.double], out: pk.View1D[pk.double], n0: int):
    r: int = team.league_rank()

    def add(i: int, j: int, k: int, acc: pk.Acc[pk.double]):
        acc += A[r][i][j] * (i + 2 * j + 3 * k)

    s: float = pk.parallel_reduce(pk.TeamThreadMDRange(team, n0, A.extent(2), 3), add)
    if team.team_rank() == 0:
        out[r] = s


@pk.workunit
def md_vector(team: pk.TeamMember, A: pk.View3D[pk.double], B: pk.View3D[pk.double], out: pk.View1D[pk.double]):
    r: int = team.league_rank()

    def row(i: int):
        def cell(j: int, k: int):
            B[r][i][j] = A[r][i][j] * 2.0 + k

        pk.parallel_for(pk.ThreadVectorMDRange(team, A.extent(2), 1), cell)

    pk.parallel_for(pk.TeamThreadRange(team, A.extent(1)), row)
    team.team_barrier()

    def total(i: int, j: int, acc: pk.Acc[pk.double]):
        acc += B[r][i][j]

    s: float = pk.parallel_reduce(pk.TeamVectorMDRange(team, A.extent(1), A.extent(2)), total)
    if team.team_rank() == 0:
        out[r] = s


def md_program(policy, n0=N):
    def program():
        A3 = view_of(data(5, (L, N, M)))
        A, B, C = pk.View((L, 4, 3)), view_of(data(6, (L, 4))), view_of(data(7, (3,)))
        weighted, B2, total = pk.View([L]), pk.View([L, N, M]), pk.View([L])
        pk.parallel_for(policy, md_fill, A=A, B=B, C=C, N1=4, N2=3)
        pk.parallel_for(policy, md_weighted, A=A3, out=weighted, n0=n0)
        pk.parallel_for(policy, md_vector, A=A3, B=B2, out=total)
        return A.copy(), weighted.copy(), B2.copy(), total.copy()
    return program


def check_md(A, weighted, B2, total, n0=N):
    A3 = data(5, (L, N, M))
    np.testing.assert_array_equal(A, data(6, (L, 4))[:, :, None] + data(7, (3,))[None, None, :])
    i, j, k = np.meshgrid(np.arange(max(n0, 0)), np.arange(M), np.arange(3), indexing="ij")
    expected = np.einsum("rij,ijk->r", A3[:, :max(n0, 0)], (i + 2 * j + 3 * k).astype(float))
    np.testing.assert_allclose(weighted, expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(B2, A3 * 2.0)
    np.testing.assert_allclose(total, (A3 * 2.0).sum(axis=(1, 2)), rtol=1e-12)


@PYTHON
def test_md_ranges():
    check_md(*eager_and_traced(md_program(pk.TeamPolicy(L, 1))))


@PYTHON
@pytest.mark.parametrize("n0", [0, -3])
def test_md_range_with_an_empty_extent_runs_nothing(n0):
    check_md(*eager_and_traced(md_program(pk.TeamPolicy(L, 1), n0)), n0=n0)


# --- team scratch memory ---------------------------------------------------------------------------------------
@pk.workunit
def scratch_yAx(team_member: pk.TeamMember, acc: pk.Acc[float], y: pk.View2D[float], x: pk.View2D[float],
                A: pk.View3D[float], M: int):
    """PyKokkos's team_scratch_memory tutorial: x's row staged in scratch by one thread."""
    e: int = team_member.league_rank()
    s_x: pk.ScratchView1D[float] = pk.ScratchView1D(team_member.team_scratch(0), M)

    def init_scratch(i: int):
        s_x[i] = x[e][i]

    if team_member.team_rank() == 0:
        pk.parallel_for(pk.ThreadVectorRange(team_member, M), init_scratch)

    team_member.team_barrier()

    def team_reduce(j: int, team_acc: pk.Acc[float]):
        def vector_reduce(i: int, vector_acc: pk.Acc[float]):
            vector_acc += A[e][j][i] * s_x[i]

        tempM: float = pk.parallel_reduce(pk.ThreadVectorRange(team_member, M), vector_reduce)
        team_acc += y[e][j] * tempM

    tempN: float = pk.parallel_reduce(pk.TeamThreadRange(team_member, y.extent(1)), team_reduce)

    def single_closure():
        nonlocal acc
        acc += tempN

    pk.single(pk.PerTeam(team_member), single_closure)


@pk.function
def tile_sum(tile: pk.View2D[pk.double], row: int, n: int) -> float:
    s: float = 0.0
    for j in range(n):
        s += tile[row][j]
    return s


@pk.workunit
def scratch_tiles(team: pk.TeamMember, a: pk.View2D[pk.double], out: pk.View2D[pk.double]):
    """ScratchViews of different element sizes (the int8 one misaligns the double one, which shmem_size's extra
    element pays for), filled by the team, read after a barrier, one handed to a helper, one counted atomically."""
    r: int = team.league_rank()
    n: int = a.extent(1)
    weights: pk.ScratchView1D[pk.int8] = pk.ScratchView1D(team.team_scratch(0), 3)
    tile: pk.ScratchView2D[pk.double] = pk.ScratchView2D(team.team_scratch(0), 2, a.extent(1))
    positive: pk.ScratchView1D[pk.int64] = pk.ScratchView1D(team.team_scratch(0), 1)

    def fill(j: int):
        tile[0][j] = a[r][j]
        tile[1][j] = a[r][j] * a[r][j]

    pk.parallel_for(pk.TeamThreadRange(team, n), fill)

    def set_weights():
        weights[0] = 1
        weights[1] = -2
        weights[2] = 3
        positive[0] = 0

    pk.single(pk.PerTeam(team), set_weights)
    team.team_barrier()

    def shifted(j: int):
        out[r][j] = tile[0][(j + 1) % n] * weights[0] + tile[1][j] * weights[2] + weights[1] + len(weights)
        if a[r][j] > 0.0:
            pk.atomic_add(positive, [0], 1)

    pk.parallel_for(pk.TeamThreadRange(team, n), shifted)
    team.team_barrier()
    if team.team_rank() == 0:
        out[r][n] = tile_sum(tile, 1, n)
        out[r][n + 1] = positive[0]


@pk.workunit
def per_thread_counts(team: pk.TeamMember, a: pk.View2D[pk.int64], sums: pk.View1D[pk.int64],
                      seen: pk.View1D[pk.int64]):
    """thread_scratch(1): each thread's own counters, in level-1 scratch, added up atomically."""
    r: int = team.league_rank()
    mine: pk.ScratchView1D[pk.int64] = pk.ScratchView1D(team.thread_scratch(1), 2)
    mine[0] = 0
    mine[1] = 0

    def part(j: int):
        mine[0] += a[r][j]
        mine[1] += 1

    pk.parallel_for(pk.TeamThreadRange(team, a.extent(1)), part)
    pk.atomic_add(sums, [r], mine[0])
    pk.atomic_add(seen, [r], mine[1])


def tiles_policy(league: int, team: int, n: int) -> pk.TeamPolicy:
    size = pk.ScratchView1D[pk.int8].shmem_size(3) + pk.ScratchView2D[pk.double].shmem_size(2, n) + \
        pk.ScratchView1D[pk.int64].shmem_size(1)
    return pk.TeamPolicy(league, team).set_scratch_size(0, pk.PerTeam(size))


def scratch_program(team: int):
    y, x, A, a = data(8, (L, N)), data(9, (L, M)), data(10, (L, N, M)), data(11, (L, M))
    ints = np.arange(L * M, dtype=np.int64).reshape(L, M) - 7

    def program():
        policy = pk.TeamPolicy(L, team).set_scratch_size(0, pk.PerTeam(pk.ScratchView1D[float].shmem_size(M)))
        r = pk.parallel_reduce(policy, scratch_yAx, y=view_of(y), x=view_of(x), A=view_of(A), M=M)
        out = pk.View([L, M + 2])
        pk.parallel_for(tiles_policy(L, team, M), scratch_tiles, a=view_of(a), out=out)
        sums, seen = pk.View([L], pk.int64), pk.View([L], pk.int64)
        counters = pk.TeamPolicy(L, team).set_scratch_size(1, pk.PerThread(pk.ScratchView1D[pk.int64].shmem_size(2)))
        pk.parallel_for(counters, per_thread_counts, a=view_of(ints, pk.int64), sums=sums, seen=seen)
        return r + 0.0, out.copy(), sums.copy(), seen.copy()

    def check(r, out, sums, seen):
        assert r == pytest.approx(np.einsum("ej,eji,ei->", y, A, x), rel=1e-12)
        expected = np.roll(a, -1, axis=1) * 1 + a * a * 3 - 2 + 3
        np.testing.assert_allclose(out[:, :M], expected, rtol=1e-14)
        np.testing.assert_allclose(out[:, M], (a * a).sum(axis=1), rtol=1e-13)
        np.testing.assert_array_equal(out[:, M + 1], (a > 0).sum(axis=1))
        np.testing.assert_array_equal(sums, ints.sum(axis=1))
        np.testing.assert_array_equal(seen, np.full(L, M))

    return program, check


@PYTHON
def test_scratch_views():
    program, check = scratch_program(1)
    check(*eager_and_traced(program))


def test_shmem_size_is_kokkos_view_shmem_size():
    """The bytes of the elements plus one element (Kokkos' allowance for aligning the View)."""
    assert pk.ScratchView1D[float].shmem_size(10) == 88
    assert pk.ScratchView1D[pk.double].shmem_size(0) == 8
    assert pk.ScratchView2D[pk.int32].shmem_size(3, 4) == 52
    assert pk.ScratchView3D[pk.int8].shmem_size(2, 3, 4) == 25
    with pytest.raises(TypeError, match="element type"):
        pk.ScratchView1D.shmem_size(3)
    with pytest.raises(TypeError, match="takes 2 non-negative integer extent"):
        pk.ScratchView2D[pk.double].shmem_size(3)
    with pytest.raises(TypeError, match="non-negative"):
        pk.ScratchView1D[pk.double].shmem_size(-1)


def test_set_scratch_size_returns_a_policy_with_the_sizes():
    base = pk.TeamPolicy(4, "auto", 8)
    assert base.team_size == pk.AUTO and base.scratch == ((0, 0), (0, 0))
    p = base.set_scratch_size(0, pk.PerTeam(64)).set_scratch_size(1, pk.PerThread(16), pk.PerTeam(32))
    assert p.scratch == ((64, 0), (32, 16)) and base.scratch == ((0, 0), (0, 0))
    assert (p.league_size, p.team_size, p.vector_length) == (4, pk.AUTO, 8)
    assert p.set_scratch_size(0, pk.PerThread(8)).scratch == ((64, 8), (32, 16))
    with pytest.raises(TypeError, match="level is 0 or 1"):
        base.set_scratch_size(2, pk.PerTeam(8))
    with pytest.raises(TypeError, match="set_scratch_size expects"):
        base.set_scratch_size(0, 64)
    with pytest.raises(TypeError, match="set_scratch_size expects"):
        base.set_scratch_size(0, pk.PerTeam(8), pk.PerTeam(8))
    with pytest.raises(ValueError, match="from 0 to 2\\*\\*31 - 1"):
        base.set_scratch_size(0, pk.PerTeam(-1))


# --- scratch memory that does not fit ----------------------------------------------------------------------------
@pk.workunit
def two_views(team: pk.TeamMember, out: pk.View1D[pk.double], n: int):
    first: pk.ScratchView1D[pk.int32] = pk.ScratchView1D(team.team_scratch(0), 3)
    second: pk.ScratchView1D[pk.double] = pk.ScratchView1D(team.team_scratch(0), n)
    first[0] = 1
    second[0] = 2.0
    out[team.league_rank()] = first[0] + second[0]


def run_two_views(n: int, level0_bytes: int):
    out = pk.View([3])
    policy = pk.TeamPolicy(3, 1).set_scratch_size(0, pk.PerTeam(level0_bytes))
    pk.parallel_for(policy, two_views, out=out, n=n)
    return out


@PYTHON
def test_scratch_sized_with_shmem_size_fits_exactly():
    size = pk.ScratchView1D[pk.int32].shmem_size(3) + pk.ScratchView1D[pk.double].shmem_size(4)
    assert size == 16 + 40
    np.testing.assert_array_equal(run_two_views(4, size), [3.0, 3.0, 3.0])
    np.testing.assert_array_equal(run_two_views(4, 16 + 32), [3.0, 3.0, 3.0])  # first at 0..12, second at 16..48


def check_does_not_fit(fault, needed: int, available: int):
    assert isinstance(fault, pk.KernelScratchError) and isinstance(fault, pk.KernelFault)
    assert (fault.view, fault.level, fault.needed, fault.available) == ("second", 0, needed, available)
    assert fault.workunit == "two_views" and fault.lineno == line_of(two_views, "second: pk")
    assert f"{__file__}:{fault.lineno}: in workunit 'two_views': ScratchView 'second' does not fit in level-0 " \
           f"scratch memory" in str(fault)
    assert f"the team needs {needed} bytes, its TeamPolicy sets {available}" in str(fault)


@PYTHON
def test_scratch_view_that_does_not_fit_is_a_fault():
    with pytest.raises(pk.KernelScratchError) as info:
        run_two_views(4, 47)
    check_does_not_fit(info.value, 48, 47)
    with pytest.raises(pk.KernelScratchError) as info:
        run_two_views(2 ** 61, 64)
    check_does_not_fit(info.value, 2 ** 63 - 1, 64)  # the bytes needed, saturated


@PYTHON
def test_scratch_fault_traced_reaches_the_read():
    pk.enable_fusion()
    out = run_two_views(5, 40)
    with pytest.raises(pk.DeferredError) as info:
        np.asarray(out)
    check_does_not_fit(info.value.__cause__, 56, 40)


@PYTHON
def test_negative_scratch_extent_is_a_fault():
    with pytest.raises(pk.KernelScratchError, match="ScratchView 'second' got the negative extent -2 in dimension 0") \
            as info:
        run_two_views(-2, 64)
    assert (info.value.kind, info.value.dim, info.value.extent) == ("scratch_extent", 0, -2)


@PYTHON
def test_scratch_without_set_scratch_size_is_an_argument_error():
    with pytest.raises(pk.ArgumentError) as info:
        pk.parallel_for(pk.TeamPolicy(3, 1), two_views, out=pk.View([3]), n=2)
    message = str(info.value)
    assert f"workunit 'two_views' ({__file__}:{line_of(two_views, 'first: pk')})" in message
    assert "ScratchView 'first' takes level-0 scratch memory, which its TeamPolicy does not set" in message
    assert "set_scratch_size(0, pk.PerTeam(bytes))" in message
    with pytest.raises(pk.ArgumentError, match="ScratchView 'mine' takes level-1 scratch memory.*"
                                               "set_scratch_size\\(1, pk.PerThread\\(bytes\\)\\)"):
        pk.parallel_for(pk.TeamPolicy(3, 1).set_scratch_size(0, pk.PerTeam(64)), per_thread_counts,
                        a=pk.View([3, 2], pk.int64), sums=pk.View([3], pk.int64), seen=pk.View([3], pk.int64))


# --- fusion ------------------------------------------------------------------------------------------------------
@PYTHON
def test_team_kernels_with_scratch_are_not_fused_and_explain_says_why():
    a = data(12, (L, M))

    def program():  # the second call reads what the first wrote: one partition
        out, out2 = pk.View([L, M + 2]), pk.View([L, M + 4])
        pk.parallel_for(tiles_policy(L, 1, M), scratch_tiles, a=view_of(a), out=out)
        pk.parallel_for(tiles_policy(L, 1, M + 2), scratch_tiles, a=out, out=out2)
        return out2.copy()

    expected, got, stats, text = run_eager_and_fused(program)
    assert_same(expected, got)
    assert stats["fused_kernels_launched"] == 0 and stats["kernels_launched"] == 2
    assert "| split before call 1" in text
    assert "scratch_tiles: a TeamPolicy kernel with team scratch memory" in text


# --- the Debug space ---------------------------------------------------------------------------------------------
def test_debug_space_runs_the_team_api():
    check_single(*single_program(pk.TeamPolicy(pk.Debug, L, 1))())
    check_md(*md_program(pk.TeamPolicy(pk.Debug, L, 1))())
    program, check = scratch_program(1)
    y, x, A = data(8, (L, N)), data(9, (L, M)), data(10, (L, N, M))
    policy = pk.TeamPolicy(pk.Debug, L, 1).set_scratch_size(0, pk.PerTeam(pk.ScratchView1D[float].shmem_size(M)))
    r = pk.parallel_reduce(policy, scratch_yAx, y=view_of(y), x=view_of(x), A=view_of(A), M=M)
    assert r == pytest.approx(np.einsum("ej,eji,ei->", y, A, x), rel=1e-12)
    with pytest.raises(pk.KernelScratchError) as info:
        out = pk.View([3])
        pk.parallel_for(pk.TeamPolicy(pk.Debug, 3, 1).set_scratch_size(0, pk.PerTeam(47)), two_views, out=out, n=4)
    check_does_not_fit(info.value, 48, 47)


# --- compiled, with teams of several threads ---------------------------------------------------------------------
@KOKKOS
def test_compiled_team_api():
    ts = team_size()
    check_single(*single_program(pk.TeamPolicy(L, ts))())
    check_md(*md_program(pk.TeamPolicy(L, ts))())
    program, check = scratch_program(ts)
    check(*program())
    with pytest.raises(pk.KernelScratchError) as info:
        run_two_views(4, 47)
    check_does_not_fit(info.value, 48, 47)
    with pytest.raises(pk.KernelScratchError) as info:
        run_two_views(2 ** 61, 64)
    check_does_not_fit(info.value, 2 ** 63 - 1, 64)
    with pytest.raises(pk.KernelScratchError, match="negative extent -2 in dimension 0"):
        run_two_views(-2, 64)
    np.testing.assert_array_equal(run_two_views(4, 48), [3.0, 3.0, 3.0])


# --- IR and C++, no compiler -------------------------------------------------------------------------------------
@pytest.mark.backend("null")
def test_ir_and_cpp_of_the_team_api(kfuse_runtime):
    pk.parallel_for(tiles_policy(2, 1, 3), scratch_tiles, a=pk.View([2, 3]), out=pk.View([2, 5]))
    pk.parallel_for(pk.TeamPolicy(2, 1), md_fill, A=pk.View([2, 2, 2]), B=pk.View([2, 2]), C=pk.View([2]), N1=2, N2=2)
    pk.parallel_for(pk.TeamPolicy(2, 1).set_scratch_size(1, pk.PerThread(24)), per_thread_counts,
                    a=pk.View([2, 2], pk.int64), sums=pk.View([2], pk.int64), seen=pk.View([2], pk.int64))
    specs = {wu: next(p for p in wu.specializations.values() if p.backend is kfuse_runtime.backend)
             for wu in (scratch_tiles, md_fill, per_thread_counts)}
    kernels = {wu: lowered(p.source, p.spec) for wu, p in specs.items()}
    for kernel in kernels.values():
        verify(kernel)
    text = dump(kernels[scratch_tiles])
    assert "  weights: ScratchView1D[int8] = team.team_scratch(0)[3]\n" in text
    assert "  tile: ScratchView2D[float64] = team.team_scratch(0)[2, a.extent(0)]\n" not in text
    assert "  tile: ScratchView2D[float64] = team.team_scratch(0)[2, a.extent(1)]\n" in text
    assert "  def set_weights():\n" in text and "  single(PerTeam(team), set_weights)\n" in text
    assert "parallel_for(TeamThreadMDRange(team, N1, N2), inner_for)" in dump(kernels[md_fill])
    assert "mine: ScratchView1D[int64] = team.thread_scratch(1)[2]" in dump(kernels[per_thread_counts])

    cpp = {wu: generate(p.source, p.spec, wu.__name__).source for wu, p in specs.items()}
    scratch_type = "Kokkos::View<double**, Kokkos::LayoutRight, KfExec::scratch_memory_space"
    assert f"const {scratch_type}, Kokkos::MemoryTraits<Kokkos::Unmanaged>> tile(team.team_scratch(0), " in \
        cpp[scratch_tiles]
    assert f"tile_sum_h0({scratch_type}" in cpp[scratch_tiles]  # the helper takes the scratch View's type
    assert "KfScratch kf_scratch = kf_scratch_start(kf_scratch_bytes, team.team_size());" in cpp[scratch_tiles]
    assert "Kokkos::single(Kokkos::PerTeam(team), set_weights);" in cpp[scratch_tiles]
    assert ".set_scratch_size(0, Kokkos::PerTeam(kf_f.kf_scratch_bytes[0]), Kokkos::PerThread(" in cpp[scratch_tiles]
    assert "Kokkos::TeamThreadRange(team, kf_md_count(kf_md0, kf_md1))" in cpp[md_fill]
    assert "inner_for(kf_k / (kf_md1), (kf_k) % kf_md1)" in cpp[md_fill]
    assert "kf_scratch_take(kf_scratch, 1, static_cast<int64_t>(team.team_size()), sizeof(int64_t)" in \
        cpp[per_thread_counts]
    assert "team.thread_scratch(1)" in cpp[per_thread_counts]


# --- errors: each names the workunit, its file:line and what to change ----------------------------------------------
@pk.workunit
def single_in_range_kernel(i, x):
    def body():
        x[i] = 1.0

    pk.single(pk.PerTeam(i), body)


@pk.workunit
def single_as_value(team: pk.TeamMember, x):
    def body():
        x[0] = 1.0

    v = pk.single(pk.PerTeam(team), body)


@pk.workunit
def single_not_per(team: pk.TeamMember, x):
    def body():
        x[0] = 1.0

    pk.single(team, body)


@pk.workunit
def single_body_with_index(team: pk.TeamMember, x):
    def body(j):
        x[j] = 1.0

    pk.single(pk.PerTeam(team), body)


@pk.workunit
def scratch_in_block(team: pk.TeamMember, x):
    if team.league_rank() == 0:
        s: pk.ScratchView1D[pk.double] = pk.ScratchView1D(team.team_scratch(0), 4)


@pk.workunit
def scratch_without_dtype(team: pk.TeamMember, x):
    s: pk.ScratchView1D = pk.ScratchView1D(team.team_scratch(0), 4)


@pk.workunit
def scratch_by_rank(team: pk.TeamMember, x):
    s: pk.ScratchView1D[pk.double] = pk.ScratchView1D(team.team_scratch(0), team.team_rank() + 1)


@pk.workunit
def scratch_by_local(team: pk.TeamMember, x, n: int):
    n = n + 1
    s: pk.ScratchView1D[pk.double] = pk.ScratchView1D(team.team_scratch(0), n)


@pk.workunit
def scratch_level_two(team: pk.TeamMember, x):
    s: pk.ScratchView1D[pk.double] = pk.ScratchView1D(team.team_scratch(2), 4)


@pk.workunit
def scratch_wrong_rank(team: pk.TeamMember, x):
    s: pk.ScratchView2D[pk.double] = pk.ScratchView2D(team.team_scratch(0), 4)


@pk.workunit
def scratch_used_early(team: pk.TeamMember, x):
    def early(j: int):
        s[j] = 1.0

    s: pk.ScratchView1D[pk.double] = pk.ScratchView1D(team.team_scratch(0), 4)
    pk.parallel_for(pk.TeamThreadRange(team, 4), early)


@pk.workunit
def scratch_handle_alone(team: pk.TeamMember, x):
    space = team.team_scratch(0)


@pk.workunit
def scratch_unannotated(team: pk.TeamMember, x):
    s = pk.ScratchView1D(team.team_scratch(0), 4)


@pk.workunit
def md_scan(team: pk.TeamMember, x):
    def body(i: int, j: int, acc: pk.Acc[pk.double], last: bool):
        acc += 1.0

    pk.parallel_scan(pk.TeamThreadMDRange(team, 2, 2), body)


@pk.workunit
def md_one_extent(team: pk.TeamMember, x):
    def body(i: int):
        x[i] = 1.0

    pk.parallel_for(pk.TeamThreadMDRange(team, 2), body)


@pk.workunit
def body_used_twice(team: pk.TeamMember, x):
    def body(i: int, j: int):
        x[i] = 1.0

    pk.parallel_for(pk.TeamThreadMDRange(team, 2, 2), body)
    pk.parallel_for(pk.TeamThreadRange(team, 2), body)


ERRORS = [
    (single_in_range_kernel, "pk.single(pk.PerTeam(i)", pk.KernelTypeError, "pk.single needs the team member"),
    (single_as_value, "v = pk.single", pk.KernelTypeError, "has no value"),
    (single_not_per, "pk.single(team, body)", pk.KernelTypeError, "is not pk.PerTeam(team_member)"),
    (single_body_with_index, "def body(j)", pk.KernelTypeError, "nested def 'body' takes 1 parameters; its use "
                                                                "passes none (pk.single calls its body without"),
    (scratch_in_block, "s: pk", pk.UnsupportedSyntaxError, "a ScratchView declared inside a block"),
    (scratch_without_dtype, "s: pk", pk.KernelTypeError, "ScratchView 's' needs its element type"),
    (scratch_by_rank, "s: pk", pk.UnsupportedSyntaxError, "which may differ between the threads of a team"),
    (scratch_by_local, "s: pk", pk.UnsupportedSyntaxError, "which may differ between the threads of a team"),
    (scratch_level_two, "s: pk", pk.KernelTypeError, "scratch level '2' of ScratchView 's' is not 0 or 1"),
    (scratch_wrong_rank, "s: pk", pk.KernelTypeError, "ScratchView2D 's' needs 2 extent(s), got 1"),
    (scratch_used_early, "s[j] = 1.0", pk.KernelTypeError, "ScratchView 's' is used before its declaration"),
    (scratch_handle_alone, "space = team", pk.UnsupportedSyntaxError, "outside a ScratchView declaration"),
    (scratch_unannotated, "s = pk", pk.UnsupportedSyntaxError, "not the value of an annotated declaration"),
    (md_scan, "pk.parallel_scan", pk.UnsupportedSyntaxError, "pk.parallel_scan over a TeamThreadMDRange"),
    (md_one_extent, "pk.parallel_for", pk.KernelTypeError, "takes 2 to 8 extents"),
    (body_used_twice, "TeamThreadRange(team, 2), body", pk.KernelTypeError,
     "nested def 'body' is given 1 and 2 indices by its uses"),
]


@PYTHON
@pytest.mark.parametrize("wu, marker, cls, phrase", ERRORS, ids=[e[0].__name__ for e in ERRORS])
def test_team_api_errors_name_workunit_and_line(wu, marker, cls, phrase):
    policy = pk.RangePolicy(0, 2) if wu is single_in_range_kernel else \
        pk.TeamPolicy(2, 1).set_scratch_size(0, pk.PerTeam(64))
    args = dict(x=pk.View([4]), n=3) if wu is scratch_by_local else dict(x=pk.View([4]))
    with pytest.raises(cls) as info:
        pk.parallel_for(policy, wu, **args)
    message = str(info.value)
    assert phrase in message
    assert f"{__file__}:{line_of(wu, marker)}:" in message and f"in workunit '{wu.__name__}'" in message
