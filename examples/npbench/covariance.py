"""covariance: the M x M covariance of N observations (rows) of M variables, normalised by float_n - 1.

Array statements, one kernel each: column means, centring of each column, the upper triangle of
data^T data / (float_n - 1), then the mirrored lower triangle. The mean and centring kernels both run over
columns and touch only column j, so they fuse; the covariance row reads other columns and the mirror reads other
rows, so neither fuses with what precedes it.
"""
from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402

import kfuse as pk  # noqa: E402
from examples.npbench.common import main, random_matrix, results  # noqa: E402

SIZES = {"small": {"N": 60, "M": 50}, "medium": {"N": 800, "M": 700}, "large": {"N": 1400, "M": 1200}}


@pk.workunit
def column_mean(j: int, mean: pk.View1D[pk.double], data: pk.View2D[pk.double], float_n: pk.double, n: int):
    s: float = 0.0
    for k in range(n):
        s += data[k][j]
    mean[j] = s / float_n


@pk.workunit
def center_column(j: int, data: pk.View2D[pk.double], mean: pk.View1D[pk.double], n: int):
    for k in range(n):
        data[k][j] = data[k][j] - mean[j]


@pk.workunit
def covariance_row(i: int, cov: pk.View2D[pk.double], data: pk.View2D[pk.double], float_n: pk.double, n: int,
                   m: int):
    """cov[i, i:] = data[:, i] . data[:, i:] / (float_n - 1), accumulated row by row of data."""
    for j in range(i, m):
        cov[i][j] = 0.0
    for k in range(n):
        dki: float = data[k][i]
        for j in range(i, m):
            cov[i][j] += dki * data[k][j]
    for j in range(i, m):
        cov[i][j] = cov[i][j] / (float_n - 1.0)


@pk.workunit
def mirror_lower(i: int, cov: pk.View2D[pk.double]):
    for j in range(i):
        cov[i][j] = cov[j][i]


def initialize(size: str) -> dict:
    p = SIZES[size]
    return {"float_n": float(p["N"]), "data": random_matrix(41, p["N"], p["M"])}


def run_kfuse(float_n: float, data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Returns (cov, centred data)."""
    n, m = data.shape
    d, mean, cov = pk.from_numpy(data.copy()), pk.View([m], pk.double), pk.View([m, m], pk.double)
    pk.parallel_for(m, column_mean, mean=mean, data=d, float_n=float_n, n=n)
    pk.parallel_for(m, center_column, data=d, mean=mean, n=n)
    pk.parallel_for(m, covariance_row, cov=cov, data=d, float_n=float_n, n=n, m=m)
    pk.parallel_for(m, mirror_lower, cov=cov)
    return results(cov, d)


if __name__ == "__main__":
    main("covariance", SIZES, initialize, run_kfuse)
