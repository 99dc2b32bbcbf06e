"""adi: alternating-direction implicit solver of the 2-D heat equation on an N x N grid, TSTEPS steps.

Each step is a column sweep (u -> v) then a row sweep (v -> u); each sweep solves one tridiagonal system per
grid line i = 1..N-2 with the Thomas algorithm (forward coefficients p, q, then back substitution). The sweeps
have the same shape, so both use the same kernels over the lines i: v is kept transposed (vt[i][j] = v[j][i])
so that every array a sweep writes is indexed [i][...] by its own line. The kernels of one sweep are one per
array statement, all over range(1, N-1), and touch only line i of what they write, so a sweep fuses into one
kernel; the next sweep reads neighbouring lines (src[j][i-1], src[j][i+1]) and starts a new group.
"""
from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402

import kfuse as pk  # noqa: E402
from examples.npbench.common import main, random_matrix, results  # noqa: E402

SIZES = {"small": {"N": 40, "TSTEPS": 5}, "medium": {"N": 500, "TSTEPS": 50}, "large": {"N": 1000, "TSTEPS": 100}}


@pk.workunit
def set_entry(i: int, X: pk.View2D[pk.double], j: int, value: pk.double):
    X[i][j] = value


@pk.workunit
def copy_entry(i: int, dst: pk.View2D[pk.double], src: pk.View2D[pk.double], j: int):
    dst[i][j] = src[i][j]


@pk.workunit
def forward_p(i: int, p: pk.View2D[pk.double], lo: pk.double, diag: pk.double, up: pk.double, n: int):
    """p[i][j] = -up / (lo p[i][j-1] + diag): the eliminated super-diagonal."""
    for j in range(1, n - 1):
        p[i][j] = -up / (lo * p[i][j - 1] + diag)


@pk.workunit
def forward_q(i: int, q: pk.View2D[pk.double], p: pk.View2D[pk.double], src: pk.View2D[pk.double],
              lo: pk.double, diag: pk.double, s_lo: pk.double, s_up: pk.double, n: int):
    """q[i][j]: the eliminated right-hand side, which is the explicit half step across line i of src."""
    for j in range(1, n - 1):
        rhs: float = -s_lo * src[j][i - 1] + (1.0 + 2.0 * s_lo) * src[j][i] - s_up * src[j][i + 1]
        q[i][j] = (rhs - lo * q[i][j - 1]) / (lo * p[i][j - 1] + diag)


@pk.workunit
def back_substitute(i: int, out: pk.View2D[pk.double], p: pk.View2D[pk.double], q: pk.View2D[pk.double], n: int):
    for j in range(n - 2, 0, -1):
        out[i][j] = p[i][j] * out[i][j + 1] + q[i][j]


def coefficients(N: int, TSTEPS: int) -> tuple:
    """(a, b, c) of the column sweep and (d, e, f) of the row sweep (PolyBench's B1 = 2, B2 = 1, unit domain)."""
    dx = dy = 1.0 / N
    dt = 1.0 / TSTEPS
    mul1, mul2 = 2.0 * dt / (dx * dx), 1.0 * dt / (dy * dy)
    a, d = -mul1 / 2.0, -mul2 / 2.0
    return (a, 1.0 + mul1, a), (d, 1.0 + mul2, d)


def initialize(size: str) -> dict:
    p = SIZES[size]
    return {"TSTEPS": p["TSTEPS"], "N": p["N"], "u": random_matrix(61, p["N"], p["N"])}


def _sweep(lines, src, out, p, q, tri, side, n):
    """Solve every line i: out[i][0] = out[i][n-1] = 1, interior from the tridiagonal system."""
    lo, diag, up = tri
    pk.parallel_for(lines, set_entry, X=out, j=0, value=1.0)
    pk.parallel_for(lines, set_entry, X=p, j=0, value=0.0)
    pk.parallel_for(lines, copy_entry, dst=q, src=out, j=0)
    pk.parallel_for(lines, forward_p, p=p, lo=lo, diag=diag, up=up, n=n)
    pk.parallel_for(lines, forward_q, q=q, p=p, src=src, lo=lo, diag=diag, s_lo=side[0], s_up=side[2], n=n)
    pk.parallel_for(lines, set_entry, X=out, j=n - 1, value=1.0)
    pk.parallel_for(lines, back_substitute, out=out, p=p, q=q, n=n)


def run_kfuse(TSTEPS: int, N: int, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Returns (u, v) after TSTEPS steps."""
    col, row = coefficients(N, TSTEPS)
    vu = pk.from_numpy(u.copy())
    vt, p, q = (pk.View([N, N], pk.double) for _ in range(3))
    lines = pk.RangePolicy(1, N - 1)
    for _ in range(TSTEPS):
        _sweep(lines, vu, vt, p, q, col, row, N)  # column sweep: v[:, i] from u's columns i-1, i, i+1
        _sweep(lines, vt, vu, p, q, row, col, N)  # row sweep: u[i, :] from v's rows i-1, i, i+1
    u_out, vt_out = results(vu, vt)
    return u_out, vt_out.T.copy()


if __name__ == "__main__":
    main("adi", SIZES, initialize, run_kfuse)
