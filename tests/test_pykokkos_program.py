"""A small PyKokkos program, written as a PyKokkos user would, run unmodified with ``import kfuse as pk``.

Two classic pieces: a 2-D Jacobi solve of the Poisson equation (MDRange sweeps, a residual reduction,
host-side boundary set-up element by element, buffer swapping) and the ``y^T A x`` team kernel (a
TeamPolicy reduction with a nested TeamThreadRange reduction). Checked against NumPy.
"""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import kfuse as pk


@pk.workunit
def init_source(i: int, j: int, f: pk.View2D[pk.double], h: float):
    x: float = i * h
    y: float = j * h
    f[i][j] = 2.0 * pk.pi * pk.pi * pk.sin(pk.pi * x) * pk.sin(pk.pi * y)


@pk.workunit
def jacobi_sweep(i: int, j: int, u: pk.View2D[pk.double], u_new: pk.View2D[pk.double], f: pk.View2D[pk.double],
                 h2: float):
    u_new[i][j] = 0.25 * (u[i - 1][j] + u[i + 1][j] + u[i][j - 1] + u[i][j + 1] + h2 * f[i][j])


@pk.workunit
def change_norm(i: int, j: int, acc: pk.Acc[pk.double], u: pk.View2D[pk.double], u_new: pk.View2D[pk.double]):
    d: float = u_new[i][j] - u[i][j]
    acc += d * d


def jacobi(n: int, tol: float, max_iters: int):
    h = 1.0 / (n - 1)
    u = pk.View([n, n], pk.double)
    u_new = pk.View([n, n], pk.double)
    f = pk.View([n, n], pk.double)
    pk.parallel_for("init", pk.MDRangePolicy([0, 0], [n, n]), init_source, f=f, h=h)
    for k in range(n):  # boundary values, set on the host one element at a time
        u[0][k] = u_new[0][k] = 1.0
        u[n - 1][k] = u_new[n - 1][k] = 0.0
    interior = pk.MDRangePolicy([1, 1], [n - 1, n - 1])
    iters = 0
    change = tol + 1
    while change > tol and iters < max_iters:
        pk.parallel_for("sweep", interior, jacobi_sweep, u=u, u_new=u_new, f=f, h2=h * h)
        change = pk.parallel_reduce("norm", interior, change_norm, u=u, u_new=u_new) ** 0.5
        u, u_new = u_new, u
        iters += 1
    return np.asarray(u), iters, change


def jacobi_numpy(n: int, tol: float, max_iters: int):
    h = 1.0 / (n - 1)
    x = np.arange(n) * h
    f = 2.0 * np.pi ** 2 * np.outer(np.sin(np.pi * x), np.sin(np.pi * x))
    u = np.zeros((n, n))
    u[0, :] = 1.0
    iters, change = 0, tol + 1
    while change > tol and iters < max_iters:
        new = u.copy()
        new[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] + h * h * f[1:-1, 1:-1])
        change = np.sqrt(np.sum((new - u) ** 2))
        u = new
        iters += 1
    return u, iters, change


@pk.workunit
def yAx(team_member: pk.TeamMember, acc: pk.Acc[pk.double], cols: int, y: pk.View1D[pk.double],
        x: pk.View1D[pk.double], A: pk.View2D[pk.double]):
    j: int = team_member.league_rank()

    def inner_reduce(i: int, inner_acc: pk.Acc[pk.double]):
        inner_acc += A[j][i] * x[i]

    temp2: float = pk.parallel_reduce(pk.TeamThreadRange(team_member, cols), inner_reduce)
    if team_member.team_rank() == 0:
        acc += y[j] * temp2


def y_a_x(rows: int, cols: int):
    y = pk.View([rows], pk.double)
    x = pk.View([cols], pk.double)
    A = pk.View([rows, cols], pk.double)
    for i in range(rows):
        y[i] = 1.0 + i % 3
        for j in range(cols):
            A[i][j] = (i - j) / cols
    for j in range(cols):
        x[j] = 0.5 * j
    policy = pk.TeamPolicy(rows, pk.AUTO)
    return pk.parallel_reduce(policy, yAx, cols=cols, y=y, x=x, A=A), np.asarray(y), np.asarray(x), np.asarray(A)


def test_jacobi_poisson_matches_numpy():
    u, iters, change = jacobi(24, 1e-6, 300)
    ref, ref_iters, ref_change = jacobi_numpy(24, 1e-6, 300)
    assert iters == ref_iters
    assert change == pytest.approx(ref_change, rel=1e-9)
    np.testing.assert_allclose(u, ref, rtol=1e-12, atol=1e-14)


def test_team_y_a_x_matches_numpy():
    result, y, x, A = y_a_x(37, 50)
    assert A[2, 7] == (2 - 7) / 50  # host element writes through A[i][j] reached the View
    assert result == pytest.approx(y @ A @ x, rel=1e-12)


# Live Views in module globals at interpreter exit. With fusion on, the last kernel is still pending then:
# it writes into a memory-mapped file, so the test can see that it ran before Kokkos was finalised.
PROGRAM = """
import sys
sys.path.insert(0, {tests!r})
import numpy as np
import kfuse as pk
import test_pykokkos_program as prog

u, iters, change = prog.jacobi(16, 1e-4, 50)
total, y, x, A = prog.y_a_x(5, 8)
last = pk.from_numpy(np.memmap({out!r}, dtype=np.float64, mode="r+", shape=(16, 16)))
pk.parallel_for(pk.MDRangePolicy([1, 1], [15, 15]), prog.jacobi_sweep, u=pk.from_numpy(u), u_new=last,
                f=pk.View([16, 16], pk.double), h2=0.0)
print("done", iters, round(float(total), 6))
"""


@pytest.mark.parametrize("fusion", ["0", "1"])
def test_program_ending_with_live_views_exits_cleanly(fusion, tmp_path):
    out = tmp_path / "last.bin"
    np.zeros((16, 16)).tofile(out)
    script = tmp_path / "program.py"
    script.write_text(PROGRAM.format(tests=str(Path(__file__).resolve().parent), out=str(out)))
    env = {**os.environ, "KFUSE_FUSION": fusion}
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "error" not in proc.stderr.lower() and "kokkos" not in proc.stderr.lower(), proc.stderr
    _, y, x, A = y_a_x(5, 8)
    ref_u, ref_iters, _ = jacobi_numpy(16, 1e-4, 50)
    assert proc.stdout.split() == ["done", str(ref_iters), str(round(float(y @ A @ x), 6))]
    expected = np.zeros((16, 16))
    expected[1:-1, 1:-1] = 0.25 * (ref_u[:-2, 1:-1] + ref_u[2:, 1:-1] + ref_u[1:-1, :-2] + ref_u[1:-1, 2:])
    np.testing.assert_allclose(np.fromfile(out).reshape(16, 16), expected, rtol=1e-12, atol=1e-14)
