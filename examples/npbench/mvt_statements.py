"""mvt as a PyKokkos port writes it: one workunit per NumPy statement, the products summed inside the kernel.

NPBench's two statements, each a kernel over the N entries it updates:
  x1 += A @ y1    -> x1_plus_a_y1     (x1[i] += sum_j A[i, j] y1[j])
  x2 += y2 @ A    -> x2_plus_y2_a     (x2[i] += sum_j y2[j] A[j, i])
Group M (2 kernels, as in the paper): each kernel writes only its own entry of x1 or x2 and reads A, y1, y2,
which neither writes. The same program as mvt.py, which is already one kernel per statement.
"""
from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402

import kfuse as pk  # noqa: E402
from examples.npbench.common import main, results  # noqa: E402
from examples.npbench.mvt import SIZES, initialize  # noqa: E402,F401


@pk.workunit
def x1_plus_a_y1(i: int, x1: pk.View1D[pk.double], A: pk.View2D[pk.double], y1: pk.View1D[pk.double], n: int):
    s: float = 0.0
    for j in range(n):
        s += A[i][j] * y1[j]
    x1[i] = x1[i] + s


@pk.workunit
def x2_plus_y2_a(i: int, x2: pk.View1D[pk.double], A: pk.View2D[pk.double], y2: pk.View1D[pk.double], n: int):
    s: float = 0.0
    for j in range(n):
        s += y2[j] * A[j][i]
    x2[i] = x2[i] + s


def run_kfuse(A: np.ndarray, x1: np.ndarray, x2: np.ndarray, y1: np.ndarray, y2: np.ndarray):
    n = A.shape[0]
    a, v1, v2 = pk.from_numpy(A), pk.from_numpy(y1), pk.from_numpy(y2)  # read only: no copy
    r1, r2 = pk.from_numpy(x1.copy()), pk.from_numpy(x2.copy())
    pk.parallel_for(n, x1_plus_a_y1, x1=r1, A=a, y1=v1, n=n)
    pk.parallel_for(n, x2_plus_y2_a, x2=r2, A=a, y2=v2, n=n)
    return results(r1, r2)


if __name__ == "__main__":
    main("mvt (one kernel per statement)", SIZES, initialize, run_kfuse)
