"""The NPBench subjects of examples/npbench, eager and traced/fused, against NumPy written here from the math.

The references are deliberately a different formulation where one exists (adi: a direct tridiagonal solve
instead of the Thomas recurrences; covariance: a full matrix product instead of triangle + mirror).
"""
import sys
from pathlib import Path

import numpy as np
import pytest

import kfuse as pk

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # the examples are imported as a package from the repository root
    sys.path.insert(0, str(ROOT))

from examples.npbench import adi, covariance, fdtd_2d, jacobi_1d, mvt, syr2k, syrk  # noqa: E402
from examples.npbench.common import results  # noqa: E402

# Eager runs check the program against NumPy on the reference interpreter (no compiler); fused runs compile
# every kernel, fused or left alone, so the C++ of these programs is still built and checked end to end.
MODES = pytest.mark.parametrize("fused", [pytest.param(False, id="eager", marks=pytest.mark.backend("python")),
                                       pytest.param(True, id="fused")])


def run(module, fused: bool, inputs: dict):
    """The subject's outputs (a tuple), inputs untouched; in fused mode every call must have been traced."""
    before = {k: v.copy() for k, v in inputs.items() if isinstance(v, np.ndarray)}
    pk.reset_stats()
    if fused:
        with pk.fusion():
            out = module.run_kfuse(**inputs)
        assert pk.stats()["ops_traced"] > 0
    else:
        out = module.run_kfuse(**inputs)
        assert pk.stats()["ops_traced"] == 0
    for k, v in before.items():
        np.testing.assert_array_equal(inputs[k], v, err_msg=f"run_kfuse changed its input '{k}'")
    return out if isinstance(out, tuple) else (out,)


def assert_close(got, want):
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-13 * np.abs(want).max())


# --- references, from the definitions ----------------------------------------------------------
def ref_jacobi_1d(TSTEPS, A, B):
    A, B = A.copy(), B.copy()
    for _ in range(TSTEPS):
        B[1:-1] = 0.33333 * (A[:-2] + A[1:-1] + A[2:])
        A[1:-1] = 0.33333 * (B[:-2] + B[1:-1] + B[2:])
    return A, B


def ref_mvt(A, x1, x2, y1, y2):
    return x1 + A @ y1, x2 + A.T @ y2


def ref_lower_update(C, full):
    """C with its lower triangle (diagonal included) replaced by that of ``full``."""
    out = C.copy()
    lower = np.tril_indices(C.shape[0])
    out[lower] = full[lower]
    return out


def ref_covariance(float_n, data):
    centred = data - data.sum(axis=0) / float_n
    return centred.T @ centred / (float_n - 1.0), centred


def ref_fdtd_2d(TMAX, ex, ey, hz, _fict_):
    ex, ey, hz = ex.copy(), ey.copy(), hz.copy()
    for t in range(TMAX):
        ey[0, :] = _fict_[t]
        ey[1:, :] -= 0.5 * (hz[1:, :] - hz[:-1, :])
        ex[:, 1:] -= 0.5 * (hz[:, 1:] - hz[:, :-1])
        hz[:-1, :-1] -= 0.7 * (ex[:-1, 1:] - ex[:-1, :-1] + ey[1:, :-1] - ey[:-1, :-1])
    return ex, ey, hz


def ref_adi(TSTEPS, N, u):
    """Each half step solves, for every line, lo x[j-1] + diag x[j] + up x[j+1] = explicit step of the other
    array across the line, with x = 1 at both ends: here as one dense solve for all lines at once."""
    dt, h2 = 1.0 / TSTEPS, (1.0 / N) ** 2
    mul1, mul2 = 2.0 * dt / h2, dt / h2
    m = N - 2

    def half_step(src_lines, mul_implicit, mul_explicit):
        # src_lines[j, i]: the value at position j along the solve direction, line i; lines 1..N-2 are solved.
        rhs = (mul_explicit / 2) * src_lines[1:-1, :-2] + (1 - mul_explicit) * src_lines[1:-1, 1:-1] + \
            (mul_explicit / 2) * src_lines[1:-1, 2:]
        off = -mul_implicit / 2
        T = np.diag(np.full(m, 1 + mul_implicit)) + np.diag(np.full(m - 1, off), 1) + np.diag(np.full(m - 1, off), -1)
        rhs[0] -= off  # x[0] = 1
        rhs[-1] -= off  # x[N-1] = 1
        x = np.zeros((N, N))
        x[0, 1:-1] = x[-1, 1:-1] = 1.0
        x[1:-1, 1:-1] = np.linalg.solve(T, rhs)
        return x  # x[j, i]

    u, v = u.copy(), np.zeros((N, N))
    for _ in range(TSTEPS):
        v[:, 1:-1] = half_step(u, mul1, mul2)[:, 1:-1]  # column i of v from columns i-1, i, i+1 of u
        u[1:-1, :] = half_step(v.T, mul2, mul1).T[1:-1, :]  # row i of u from rows i-1, i, i+1 of v
    return u, v


# --- tests -------------------------------------------------------------------------------------
@MODES
def test_jacobi_1d(fused):
    inputs = jacobi_1d.initialize("small")
    for got, want in zip(run(jacobi_1d, fused, inputs), ref_jacobi_1d(**inputs)):
        assert_close(got, want)


@MODES
def test_mvt(fused):
    inputs = mvt.initialize("small")
    for got, want in zip(run(mvt, fused, inputs), ref_mvt(**inputs)):
        assert_close(got, want)


@MODES
@pytest.mark.parametrize("n", [1, 15, 16, 17, 255, 257, 300])
def test_mvt_gpu_shapes(fused, n):
    """The one-pass tile kernel at sizes around its tile (16 rows by 256 columns): a last, short tile each way, a
    single tile, one row."""
    rng = np.random.default_rng(n)
    inputs = {"A": rng.random((n, n)), "x1": rng.random(n), "x2": rng.random(n), "y1": rng.random(n),
              "y2": rng.random(n)}
    if fused:
        with pk.fusion():
            got = mvt.run_kfuse_gpu(**inputs)
    else:
        got = mvt.run_kfuse_gpu(**inputs)
    for g, want in zip(got, ref_mvt(**inputs)):
        assert_close(g, want)


@pytest.mark.parametrize("rows,columns,team", [(1, 1, 2), (3, 1, 1), (3, 5, 2), (7, 4, 1), (16, 2, 2)])
def test_mvt_tiles_of_any_shape(rows, columns, team):
    """Tiles narrower and wider than the team, with rows and columns that do not divide N: every column and row
    summed once."""
    n = 11
    rng = np.random.default_rng(rows * 100 + columns)
    A, x1, x2, y1, y2 = rng.random((n, n)), rng.random(n), rng.random(n), rng.random(n), rng.random(n)
    r1, r2 = pk.from_numpy(x1.copy()), pk.from_numpy(x2.copy())
    blocks = -(-n // columns)
    policy = pk.TeamPolicy(-(-n // rows) * blocks, team).set_scratch_size(
        0, pk.PerTeam(pk.ScratchView2D[pk.double].shmem_size(rows, columns + 1)))
    pk.parallel_for(policy, mvt.add_matvecs_tiles, x1=r1, x2=r2, A=pk.from_numpy(A), y1=pk.from_numpy(y1),
                    y2=pk.from_numpy(y2), n=n, rows=rows, width=columns + 1, blocks=blocks)
    for g, want in zip(results(r1, r2), ref_mvt(A, x1, x2, y1, y2)):
        assert_close(g, want)


@MODES
def test_syrk(fused):
    inputs = syrk.initialize("small")
    A, C, alpha, beta = inputs["A"], inputs["C"], inputs["alpha"], inputs["beta"]
    (got,) = run(syrk, fused, inputs)
    assert_close(got, ref_lower_update(C, alpha * A @ A.T + beta * C))


@MODES
def test_syr2k(fused):
    inputs = syr2k.initialize("small")
    A, B, C, alpha, beta = inputs["A"], inputs["B"], inputs["C"], inputs["alpha"], inputs["beta"]
    (got,) = run(syr2k, fused, inputs)
    assert_close(got, ref_lower_update(C, alpha * (A @ B.T + B @ A.T) + beta * C))


@MODES
def test_covariance(fused):
    inputs = covariance.initialize("small")
    for got, want in zip(run(covariance, fused, inputs), ref_covariance(**inputs)):
        assert_close(got, want)


@MODES
def test_fdtd_2d(fused):
    inputs = fdtd_2d.initialize("small")
    for got, want in zip(run(fdtd_2d, fused, inputs), ref_fdtd_2d(**inputs)):
        assert_close(got, want)


@MODES
def test_adi(fused):
    inputs = adi.initialize("small")
    u, v = run(adi, fused, inputs)
    want_u, want_v = ref_adi(**inputs)
    assert_close(u, want_u)
    assert_close(v, want_v)


# Kernel launches per run with fusion on, from each module's docstring: the groups the subjects are written to
# form (same range, each thread touching only its own slice), and the boundaries that neighbour reads force.
EXPECTED_LAUNCHES = {
    jacobi_1d: lambda p: 2 * p["TSTEPS"],  # B from A's neighbours, then A from B's: never fused
    mvt: lambda p: 1,
    syrk: lambda p: 1,
    syr2k: lambda p: 1,
    covariance: lambda p: 3,  # [mean, centre], covariance rows, mirror
    # the ey source row, then the ey and ex updates (other row ranges, independent: one launch horizontally),
    # then hz, which reads ey[i + 1]
    fdtd_2d: lambda p: 3 * p["TMAX"],
    adi: lambda p: 2 * p["TSTEPS"],  # one fused kernel per sweep
}


@pytest.mark.parametrize("module", list(EXPECTED_LAUNCHES), ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_fusion_groups(module):
    inputs = module.initialize("small")
    run(module, True, inputs)
    assert pk.stats()["kernels_launched"] == EXPECTED_LAUNCHES[module](inputs), pk.explain()
