"""covariance as array code: NPBench's NumPy kernel, and the same statements as kfuse array operations.

Row i of the covariance is the product of column i with columns i..M-1 (a BLAS call, so a barrier), copied
into row i and column i: M rows of M different lengths.
"""
from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402

import kfuse as pk  # noqa: E402
from examples.npbench.common import main, results  # noqa: E402
from examples.npbench.covariance import SIZES, initialize  # noqa: E402,F401


def run_numpy(float_n: float, data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Returns (cov, centred data)."""
    data = data.copy()
    M = data.shape[1]
    mean = np.mean(data, axis=0)
    data -= mean
    cov = np.zeros((M, M), dtype=data.dtype)
    for i in range(M):
        cov[i:M, i] = cov[i, i:M] = data[:, i] @ data[:, i:M] / (float_n - 1.0)
    return cov, data


def run_array(float_n: float, data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    data = pk.from_numpy(data.copy())
    M = data.shape[1]
    mean = pk.mean(data, axis=0)
    pk.subtract(data, mean, out=data)
    cov = pk.zeros((M, M))
    for i in range(M):  # NumPy's chained assignment: the row, then the column copied from it
        row = pk.divide(pk.matmul(data[:, i], data[:, i:M]), float_n - 1.0, out=cov[i, i:M])
        pk.copyto(cov[i:M, i], row)
    return results(cov, data)


if __name__ == "__main__":
    main("covariance (array code)", SIZES, initialize, run_array)
