"""adi as a PyKokkos port writes it: one workunit per NumPy statement, NPBench's loops over t and j in Python.

NPBench's statements (coefficients a..f from adi.py, PolyBench's), each a kernel over the lines i = 1..N-2:
  column sweep (u -> v)                                        row sweep (v -> u)
  v[0, 1:N-1] = 1.0                    fill_row                u[1:N-1, 0] = 1.0                  fill_column
  p[1:N-1, 0] = 0.0                    fill_column             p[1:N-1, 0] = 0.0                  fill_column
  q[1:N-1, 0] = v[0, 1:N-1]            q_start_from_row        q[1:N-1, 0] = u[1:N-1, 0]          q_start_from_column
  for j in 1..N-2:                                             for j in 1..N-2:
    p[1:N-1, j] = -c / (a p[.., j-1] + b)     p_forward          p[1:N-1, j] = -f / (d p + e)     p_forward
    q[1:N-1, j] = (u[j, i-1..i+1], q, p)     q_forward_columns  q[1:N-1, j] = (v[i-1..i+1, j], ..) q_forward_rows
  v[N-1, 1:N-1] = 1.0                  fill_row                u[1:N-1, N-1] = 1.0                fill_column
  for j in N-2..1:                                             for j in N-2..1:
    v[j, 1:N-1] = p[.., j] v[j+1] + q    v_backward              u[1:N-1, j] = p u[.., j+1] + q   u_backward
A sweep is 3N - 2 kernels, each touching only line i of what it writes (v[., i] in the column sweep; u[i, .],
p[i, .], q[i, .]), so a whole sweep fuses. It splits from the next sweep, which indexes the other dimension by
i: the row sweep's first statement writes u[i, 0], which the column sweep's q_forward_columns read as u[j, i-1]
(another thread's line), the column sweep's first writes v[0, i], which q_forward_rows read as v[i-1, j], and
each q_forward reads across lines what the other sweep's back substitution wrote. A group holds at most
KFUSE_MAX_GROUP (32) calls. With N = 7 a sweep (19 calls) is one group, the paper's A 0..A 4 (5, 7, 2, 2, 3
kernels) together, or A 5..A 9 (5, 7, 2, 3, 2). At the small size (N = 40, 118 calls a sweep) the bound cuts
each sweep into groups of 32, and the sweep's last group, holding no q_forward, also takes the next sweep's
first four calls (the split then falls before that sweep's first q_forward).
"""
from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402

import kfuse as pk  # noqa: E402
from examples.npbench.adi import SIZES, coefficients, initialize  # noqa: E402,F401
from examples.npbench.common import main, results  # noqa: E402


@pk.workunit
def fill_row(i: int, X: pk.View2D[pk.double], r: int, value: pk.double):
    X[r][i] = value


@pk.workunit
def fill_column(i: int, X: pk.View2D[pk.double], c: int, value: pk.double):
    X[i][c] = value


@pk.workunit
def q_start_from_row(i: int, q: pk.View2D[pk.double], v: pk.View2D[pk.double]):
    q[i][0] = v[0][i]


@pk.workunit
def q_start_from_column(i: int, q: pk.View2D[pk.double], u: pk.View2D[pk.double]):
    q[i][0] = u[i][0]


@pk.workunit
def p_forward(i: int, p: pk.View2D[pk.double], j: int, lo: pk.double, diag: pk.double, up: pk.double):
    p[i][j] = -up / (lo * p[i][j - 1] + diag)


@pk.workunit
def q_forward_columns(i: int, q: pk.View2D[pk.double], p: pk.View2D[pk.double], u: pk.View2D[pk.double], j: int,
                      a: pk.double, b: pk.double, d: pk.double, f: pk.double):
    q[i][j] = (-d * u[j][i - 1] + (1.0 + 2.0 * d) * u[j][i] - f * u[j][i + 1] - a * q[i][j - 1]) / (
        a * p[i][j - 1] + b)


@pk.workunit
def q_forward_rows(i: int, q: pk.View2D[pk.double], p: pk.View2D[pk.double], v: pk.View2D[pk.double], j: int,
                   a: pk.double, c: pk.double, d: pk.double, e: pk.double):
    q[i][j] = (-a * v[i - 1][j] + (1.0 + 2.0 * a) * v[i][j] - c * v[i + 1][j] - d * q[i][j - 1]) / (
        d * p[i][j - 1] + e)


@pk.workunit
def v_backward(i: int, v: pk.View2D[pk.double], p: pk.View2D[pk.double], q: pk.View2D[pk.double], j: int):
    v[j][i] = p[i][j] * v[j + 1][i] + q[i][j]


@pk.workunit
def u_backward(i: int, u: pk.View2D[pk.double], p: pk.View2D[pk.double], q: pk.View2D[pk.double], j: int):
    u[i][j] = p[i][j] * u[i][j + 1] + q[i][j]


def run_kfuse(TSTEPS: int, N: int, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Returns (u, v) after TSTEPS steps."""
    (a, b, c), (d, e, f) = coefficients(N, TSTEPS)
    u = pk.from_numpy(u.copy())
    v, p, q = (pk.View([N, N], pk.double) for _ in range(3))
    lines = pk.RangePolicy(1, N - 1)
    for _ in range(TSTEPS):
        pk.parallel_for(lines, fill_row, X=v, r=0, value=1.0)
        pk.parallel_for(lines, fill_column, X=p, c=0, value=0.0)
        pk.parallel_for(lines, q_start_from_row, q=q, v=v)
        for j in range(1, N - 1):
            pk.parallel_for(lines, p_forward, p=p, j=j, lo=a, diag=b, up=c)
            pk.parallel_for(lines, q_forward_columns, q=q, p=p, u=u, j=j, a=a, b=b, d=d, f=f)
        pk.parallel_for(lines, fill_row, X=v, r=N - 1, value=1.0)
        for j in range(N - 2, 0, -1):
            pk.parallel_for(lines, v_backward, v=v, p=p, q=q, j=j)
        pk.parallel_for(lines, fill_column, X=u, c=0, value=1.0)
        pk.parallel_for(lines, fill_column, X=p, c=0, value=0.0)
        pk.parallel_for(lines, q_start_from_column, q=q, u=u)
        for j in range(1, N - 1):
            pk.parallel_for(lines, p_forward, p=p, j=j, lo=d, diag=e, up=f)
            pk.parallel_for(lines, q_forward_rows, q=q, p=p, v=v, j=j, a=a, c=c, d=d, e=e)
        pk.parallel_for(lines, fill_column, X=u, c=N - 1, value=1.0)
        for j in range(N - 2, 0, -1):
            pk.parallel_for(lines, u_backward, u=u, p=p, q=q, j=j)
    return results(u, v)


if __name__ == "__main__":
    main("adi (one kernel per statement)", SIZES, initialize, run_kfuse)
