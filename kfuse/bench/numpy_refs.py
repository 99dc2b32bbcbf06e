"""NumPy versions of the NPBench subjects (whole-array statements, as NPBench's NumPy baselines), written from
the math so the bench can time NumPy on the same inputs and check kfuse's outputs against them."""
from __future__ import annotations

import numpy as np


def jacobi_1d(TSTEPS, A, B):
    A, B = A.copy(), B.copy()
    for _ in range(TSTEPS):
        B[1:-1] = 0.33333 * (A[:-2] + A[1:-1] + A[2:])
        A[1:-1] = 0.33333 * (B[:-2] + B[1:-1] + B[2:])
    return A, B


def mvt(A, x1, x2, y1, y2):
    return x1 + A @ y1, x2 + A.T @ y2


def syrk(alpha, beta, C, A):
    lower = np.tril_indices(C.shape[0])
    out = C.copy()
    out[lower] = (beta * C + alpha * (A @ A.T))[lower]
    return out


def syr2k(alpha, beta, C, A, B):
    lower = np.tril_indices(C.shape[0])
    out = C.copy()
    out[lower] = (beta * C + alpha * (A @ B.T + B @ A.T))[lower]
    return out


def covariance(float_n, data):
    centred = data - data.sum(axis=0) / float_n
    return centred.T @ centred / (float_n - 1.0), centred


def fdtd_2d(TMAX, ex, ey, hz, _fict_):
    ex, ey, hz = ex.copy(), ey.copy(), hz.copy()
    for t in range(TMAX):
        ey[0, :] = _fict_[t]
        ey[1:, :] -= 0.5 * (hz[1:, :] - hz[:-1, :])
        ex[:, 1:] -= 0.5 * (hz[:, 1:] - hz[:, :-1])
        hz[:-1, :-1] -= 0.7 * (ex[:-1, 1:] - ex[:-1, :-1] + ey[1:, :-1] - ey[:-1, :-1])
    return ex, ey, hz


def adi(TSTEPS, N, u):
    """Alternating sweeps of tridiagonal solves (Thomas algorithm), every line at once, one j at a time."""
    dt, h2 = 1.0 / TSTEPS, (1.0 / N) ** 2
    mul1, mul2 = 2.0 * dt / h2, dt / h2
    col, row = (-mul1 / 2, 1 + mul1, -mul1 / 2), (-mul2 / 2, 1 + mul2, -mul2 / 2)
    u, vt = u.copy(), np.zeros((N, N))
    p, q = np.zeros((N, N)), np.zeros((N, N))
    lines = slice(1, N - 1)

    def sweep(src, out, tri, side):
        lo, diag, up = tri
        s_lo, s_up = side[0], side[2]
        out[lines, 0] = 1.0
        p[lines, 0] = 0.0
        q[lines, 0] = 1.0
        for j in range(1, N - 1):
            denom = lo * p[lines, j - 1] + diag
            p[lines, j] = -up / denom
            rhs = -s_lo * src[j, :-2] + (1.0 + 2.0 * s_lo) * src[j, 1:-1] - s_up * src[j, 2:]
            q[lines, j] = (rhs - lo * q[lines, j - 1]) / denom
        out[lines, N - 1] = 1.0
        for j in range(N - 2, 0, -1):
            out[lines, j] = p[lines, j] * out[lines, j + 1] + q[lines, j]

    for _ in range(TSTEPS):
        sweep(u, vt, col, row)
        sweep(vt, u, row, col)
    return u, vt.T.copy()
