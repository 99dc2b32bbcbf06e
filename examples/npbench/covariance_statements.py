"""covariance as a PyKokkos port writes it: one workunit per NumPy statement, sums and products inside kernels.

NPBench's kernel, statement by statement (numpy_refs.covariance is the same in whole-matrix form):
  mean = np.mean(data, axis=0)          -> column_mean      over columns j (sums data[:, j] inside)
  data -= mean                          -> center_column    over columns j (walks data[:, j])
  cov = np.zeros((M, M))                -> zero_row         over rows i of cov
  for i in range(M):
      cov[i:M, i] = cov[i, i:M] = data[:, i] @ data[:, i:M] / (float_n - 1.0)
                                        -> covariance_row   over j = i..M-1 (the dot product inside; one
                                           statement, so one kernel storing both targets)
Group C (3 kernels, as in the paper): the first three run over 0..M-1 and each touches only column j of data
and mean, or row i of cov (which the others do not touch). Each covariance_row has a range of its own (i..M-1),
and the first (i = 0, the same range) reads column 0 of data at every thread, which center_column's thread 0
writes: it runs alone, as every later one does.
"""
from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402

import kfuse as pk  # noqa: E402
from examples.npbench.common import main, results  # noqa: E402
from examples.npbench.covariance import SIZES, center_column, column_mean, initialize  # noqa: E402,F401


@pk.workunit
def zero_row(i: int, cov: pk.View2D[pk.double], m: int):
    for j in range(m):
        cov[i][j] = 0.0


@pk.workunit
def covariance_row(j: int, cov: pk.View2D[pk.double], data: pk.View2D[pk.double], i: int, float_n: pk.double,
                   n: int):
    s: float = 0.0
    for k in range(n):
        s += data[k][i] * data[k][j]
    value: float = s / (float_n - 1.0)
    cov[j][i] = value
    cov[i][j] = value


def run_kfuse(float_n: float, data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Returns (cov, centred data)."""
    n, m = data.shape
    d, mean, cov = pk.from_numpy(data.copy()), pk.View([m], pk.double), pk.View([m, m], pk.double)
    pk.parallel_for(m, column_mean, mean=mean, data=d, float_n=float_n, n=n)
    pk.parallel_for(m, center_column, data=d, mean=mean, n=n)
    pk.parallel_for(m, zero_row, cov=cov, m=m)
    for i in range(m):
        pk.parallel_for(pk.RangePolicy(i, m), covariance_row, cov=cov, data=d, i=i, float_n=float_n, n=n)
    return results(cov, d)


if __name__ == "__main__":
    main("covariance (one kernel per statement)", SIZES, initialize, run_kfuse)
