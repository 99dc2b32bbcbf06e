"""syr2k: C = alpha (A B^T + B A^T) + beta C on the lower triangle of the N x N matrix C (A, B are N x M).

Two array statements, each one kernel over the rows of C (the scaling kernel is syrk's): both write only row i
of C, so they fuse.
"""
from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402

import kfuse as pk  # noqa: E402
from examples.npbench.common import main, random_matrix, results, scale_lower  # noqa: E402

SIZES = {"small": {"N": 70, "M": 50}, "medium": {"N": 600, "M": 500}, "large": {"N": 1200, "M": 1000}}


@pk.workunit
def add_syr2k_row(i: int, C: pk.View2D[pk.double], A: pk.View2D[pk.double], B: pk.View2D[pk.double],
                  alpha: pk.double, m: int):
    """C[i][j] += alpha * sum_k (A[j][k] B[i][k] + B[j][k] A[i][k]) for j <= i."""
    for j in range(i + 1):
        s: float = 0.0
        for k in range(m):
            s += A[j][k] * B[i][k] + B[j][k] * A[i][k]
        C[i][j] = C[i][j] + alpha * s


def initialize(size: str) -> dict:
    p = SIZES[size]
    return {"alpha": 1.5, "beta": 1.2, "C": random_matrix(31, p["N"], p["N"]),
            "A": random_matrix(32, p["N"], p["M"]), "B": random_matrix(33, p["N"], p["M"])}


def run_kfuse(alpha: float, beta: float, C: np.ndarray, A: np.ndarray, B: np.ndarray) -> np.ndarray:
    c, a, b = pk.from_numpy(C.copy()), pk.from_numpy(A), pk.from_numpy(B)
    pk.parallel_for(C.shape[0], scale_lower, C=c, beta=beta)
    pk.parallel_for(C.shape[0], add_syr2k_row, C=c, A=a, B=b, alpha=alpha, m=A.shape[1])
    return results(c)[0]


if __name__ == "__main__":
    main("syr2k", SIZES, initialize, run_kfuse)
