"""jacobi_1d as a PyKokkos port writes it: one workunit per NumPy statement, the time-step loop in Python.

NPBench's two statements per step, each a kernel over the interior i = 1..N-2:
  B[1:-1] = 0.33333 * (A[:-2] + A[1:-1] + A[2:])    -> b_from_a
  A[1:-1] = 0.33333 * (B[:-2] + B[1:-1] + B[2:])    -> a_from_b
No group forms: a_from_b reads B[i-1] and B[i+1], which b_from_a's neighbouring threads write, and the next
step's b_from_a reads A's neighbours, which a_from_b writes. The paper's J 0 and J 1 (4 kernels each) cannot
come from one kernel per statement; four is the number of NumPy operations in one statement (two additions, a
multiplication and the store), the granularity of jacobi_1d_array.py. This file is the same program as
jacobi_1d.py (already one kernel per statement), kept so every subject has its statement form.
NPBench steps ``range(1, TSTEPS)``; here TSTEPS steps, as numpy_refs.jacobi_1d.
"""
from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402

import kfuse as pk  # noqa: E402
from examples.npbench.common import main, results  # noqa: E402
from examples.npbench.jacobi_1d import SIZES, initialize  # noqa: E402,F401


@pk.workunit
def b_from_a(i: int, A: pk.View1D[pk.double], B: pk.View1D[pk.double]):
    B[i] = 0.33333 * (A[i - 1] + A[i] + A[i + 1])


@pk.workunit
def a_from_b(i: int, A: pk.View1D[pk.double], B: pk.View1D[pk.double]):
    A[i] = 0.33333 * (B[i - 1] + B[i] + B[i + 1])


def run_kfuse(TSTEPS: int, A: np.ndarray, B: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a, b = pk.from_numpy(A.copy()), pk.from_numpy(B.copy())
    interior = pk.RangePolicy(1, A.shape[0] - 1)
    for _ in range(TSTEPS):
        pk.parallel_for(interior, b_from_a, A=a, B=b)
        pk.parallel_for(interior, a_from_b, A=a, B=b)
    return results(a, b)


if __name__ == "__main__":
    main("jacobi_1d (one kernel per statement)", SIZES, initialize, run_kfuse)
