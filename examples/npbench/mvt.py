"""mvt: x1 += A y1 and x2 += A^T y2, one kernel each over the N entries of the result.

Both kernels write only their own entry (x1[i], x2[i]) and read A, y1, y2, which neither writes: a fusible pair.
"""
from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402

import kfuse as pk  # noqa: E402
from examples.npbench.common import main, random_matrix, results  # noqa: E402

SIZES = {"small": {"N": 120}, "medium": {"N": 2500}, "large": {"N": 5000}}


@pk.workunit
def add_matvec(i: int, x: pk.View1D[pk.double], A: pk.View2D[pk.double], y: pk.View1D[pk.double], n: int):
    """x[i] += sum_j A[i][j] y[j]."""
    s: float = 0.0
    for j in range(n):
        s += A[i][j] * y[j]
    x[i] = x[i] + s


@pk.workunit
def add_matvec_transposed(i: int, x: pk.View1D[pk.double], A: pk.View2D[pk.double], y: pk.View1D[pk.double],
                          n: int):
    """x[i] += sum_j A[j][i] y[j]."""
    s: float = 0.0
    for j in range(n):
        s += A[j][i] * y[j]
    x[i] = x[i] + s


def initialize(size: str) -> dict:
    n = SIZES[size]["N"]
    return {"A": random_matrix(11, n, n), "x1": random_matrix(12, n), "x2": random_matrix(13, n),
            "y1": random_matrix(14, n), "y2": random_matrix(15, n)}


def run_kfuse(A: np.ndarray, x1: np.ndarray, x2: np.ndarray, y1: np.ndarray, y2: np.ndarray):
    n = A.shape[0]
    a, v1, v2 = pk.from_numpy(A), pk.from_numpy(y1), pk.from_numpy(y2)  # read only: no copy
    r1, r2 = pk.from_numpy(x1.copy()), pk.from_numpy(x2.copy())
    pk.parallel_for(n, add_matvec, x=r1, A=a, y=v1, n=n)
    pk.parallel_for(n, add_matvec_transposed, x=r2, A=a, y=v2, n=n)
    return results(r1, r2)


if __name__ == "__main__":
    main("mvt", SIZES, initialize, run_kfuse)
