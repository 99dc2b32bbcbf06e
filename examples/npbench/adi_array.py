"""adi as array code: NPBench's NumPy kernel, and the same statements as kfuse array operations.

Every statement works on one grid line (a row or a column slice of N - 2 elements), so a step is about
4N statements of a few elementwise operations each. Coefficients are adi.py's (PolyBench's), so the three
versions compute the same steps.
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


def run_numpy(TSTEPS: int, N: int, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Returns (u, v) after TSTEPS steps."""
    u = u.copy()
    v, p, q = np.zeros_like(u), np.zeros_like(u), np.zeros_like(u)
    (a, b, c), (d, e, f) = coefficients(N, TSTEPS)
    for _ in range(TSTEPS):
        v[0, 1:N - 1] = 1.0
        p[1:N - 1, 0] = 0.0
        q[1:N - 1, 0] = v[0, 1:N - 1]
        for j in range(1, N - 1):
            p[1:N - 1, j] = -c / (a * p[1:N - 1, j - 1] + b)
            q[1:N - 1, j] = (-d * u[j, 0:N - 2] + (1.0 + 2.0 * d) * u[j, 1:N - 1] - f * u[j, 2:N]
                             - a * q[1:N - 1, j - 1]) / (a * p[1:N - 1, j - 1] + b)
        v[N - 1, 1:N - 1] = 1.0
        for j in range(N - 2, 0, -1):
            v[j, 1:N - 1] = p[1:N - 1, j] * v[j + 1, 1:N - 1] + q[1:N - 1, j]
        u[1:N - 1, 0] = 1.0
        p[1:N - 1, 0] = 0.0
        q[1:N - 1, 0] = u[1:N - 1, 0]
        for j in range(1, N - 1):
            p[1:N - 1, j] = -f / (d * p[1:N - 1, j - 1] + e)
            q[1:N - 1, j] = (-a * v[0:N - 2, j] + (1.0 + 2.0 * a) * v[1:N - 1, j] - c * v[2:N, j]
                             - d * q[1:N - 1, j - 1]) / (d * p[1:N - 1, j - 1] + e)
        u[1:N - 1, N - 1] = 1.0
        for j in range(N - 2, 0, -1):
            u[1:N - 1, j] = p[1:N - 1, j] * u[1:N - 1, j + 1] + q[1:N - 1, j]
    return u, v


def run_array(TSTEPS: int, N: int, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    u = pk.from_numpy(u.copy())
    v, p, q = pk.zeros((N, N)), pk.zeros((N, N)), pk.zeros((N, N))
    (a, b, c), (d, e, f) = coefficients(N, TSTEPS)
    for _ in range(TSTEPS):
        pk.fill(v[0, 1:N - 1], 1.0)
        pk.fill(p[1:N - 1, 0], 0.0)
        pk.copyto(q[1:N - 1, 0], v[0, 1:N - 1])
        for j in range(1, N - 1):
            pk.divide(-c, pk.add(pk.multiply(p[1:N - 1, j - 1], a), b), out=p[1:N - 1, j])
            pk.divide(pk.subtract(pk.subtract(pk.add(pk.multiply(u[j, 0:N - 2], -d),
                                                     pk.multiply(u[j, 1:N - 1], 1.0 + 2.0 * d)),
                                              pk.multiply(u[j, 2:N], f)),
                                  pk.multiply(q[1:N - 1, j - 1], a)),
                      pk.add(pk.multiply(p[1:N - 1, j - 1], a), b), out=q[1:N - 1, j])
        pk.fill(v[N - 1, 1:N - 1], 1.0)
        for j in range(N - 2, 0, -1):
            pk.add(pk.multiply(p[1:N - 1, j], v[j + 1, 1:N - 1]), q[1:N - 1, j], out=v[j, 1:N - 1])
        pk.fill(u[1:N - 1, 0], 1.0)
        pk.fill(p[1:N - 1, 0], 0.0)
        pk.copyto(q[1:N - 1, 0], u[1:N - 1, 0])
        for j in range(1, N - 1):
            pk.divide(-f, pk.add(pk.multiply(p[1:N - 1, j - 1], d), e), out=p[1:N - 1, j])
            pk.divide(pk.subtract(pk.subtract(pk.add(pk.multiply(v[0:N - 2, j], -a),
                                                     pk.multiply(v[1:N - 1, j], 1.0 + 2.0 * a)),
                                              pk.multiply(v[2:N, j], c)),
                                  pk.multiply(q[1:N - 1, j - 1], d)),
                      pk.add(pk.multiply(p[1:N - 1, j - 1], d), e), out=q[1:N - 1, j])
        pk.fill(u[1:N - 1, N - 1], 1.0)
        for j in range(N - 2, 0, -1):
            pk.add(pk.multiply(p[1:N - 1, j], u[1:N - 1, j + 1]), q[1:N - 1, j], out=u[1:N - 1, j])
    return results(u, v)


if __name__ == "__main__":
    main("adi (array code)", SIZES, initialize, run_array)
