"""syr2k as a PyKokkos port writes it: one workunit per NumPy statement, NPBench's loops over i and k in Python.

NPBench's kernel (numpy_refs.syr2k computes the same lower triangle in one expression):
  for i in range(N):
      C[i, :i+1] *= beta                                        -> scale_row    over t = 0..i
      for k in range(M):
          C[i, :i+1] += (A[:i+1, k] * alpha * B[i, k]
                         + B[:i+1, k] * alpha * A[i, k])        -> add_rank2    over t = 0..i (i, k as scalars)
Per row i the M + 1 kernels share the range 0..i and each writes only C[i, t] of its thread t, reading A and B
(never written): all of them fuse, up to KFUSE_MAX_GROUP (32) calls per group, so a row's calls form
ceil((M + 1) / 32) groups. The next row has another range (0..i+1), so a row never fuses with the next.
The paper's S 2 0 (4 kernels), S 2 1 (2) and S 2 2 (2) are smaller groups of a finer or different port; one
kernel per statement gives N (M + 1) launches per run: 3,570 at the small size.
"""
from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402

import kfuse as pk  # noqa: E402
from examples.npbench.common import main, results  # noqa: E402
from examples.npbench.syr2k import SIZES, initialize  # noqa: E402,F401
from examples.npbench.syrk_statements import scale_row  # noqa: E402 - the same first statement as syrk's


@pk.workunit
def add_rank2(t: int, C: pk.View2D[pk.double], A: pk.View2D[pk.double], B: pk.View2D[pk.double], i: int, k: int,
              alpha: pk.double):
    C[i][t] = C[i][t] + (A[t][k] * alpha * B[i][k] + B[t][k] * alpha * A[i][k])


def run_kfuse(alpha: float, beta: float, C: np.ndarray, A: np.ndarray, B: np.ndarray) -> np.ndarray:
    c, a, b = pk.from_numpy(C.copy()), pk.from_numpy(A), pk.from_numpy(B)
    for i in range(A.shape[0]):
        pk.parallel_for(i + 1, scale_row, C=c, i=i, beta=beta)
        for k in range(A.shape[1]):
            pk.parallel_for(i + 1, add_rank2, C=c, A=a, B=b, i=i, k=k, alpha=alpha)
    return results(c)[0]


if __name__ == "__main__":
    main("syr2k (one kernel per statement)", SIZES, initialize, run_kfuse)
