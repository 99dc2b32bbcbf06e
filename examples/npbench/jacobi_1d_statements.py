"""jacobi_1d as a PyKokkos port writes it: one workunit per NumPy statement, the time-step loop in Python.

NPBench's two statements per step, each a kernel over the interior i = 1..N-2:
  B[1:-1] = 0.33333 * (A[:-2] + A[1:-1] + A[2:])    -> average3(src=A, dst=B)
  A[1:-1] = 0.33333 * (B[:-2] + B[1:-1] + B[2:])    -> average3(src=B, dst=A)
No group forms: the second reads B[i-1] and B[i+1], which the first one's neighbouring threads write, and the
next step's first reads A's neighbours, which the second writes. The paper's J 0 and J 1 (4 kernels each) cannot
come from one kernel per statement; four is the number of NumPy operations in one statement (two additions, a
multiplication and the store), the granularity of jacobi_1d_array.py. jacobi_1d.py is already one kernel per
statement, so this form is its program, under the statement subject's name (every subject has its statement form).
NPBench steps ``range(1, TSTEPS)``; here TSTEPS steps, as numpy_refs.jacobi_1d.
"""
from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from examples.npbench.common import main  # noqa: E402
from examples.npbench.jacobi_1d import SIZES, initialize, run_kfuse  # noqa: E402,F401

if __name__ == "__main__":
    main("jacobi_1d (one kernel per statement)", SIZES, initialize, run_kfuse)
