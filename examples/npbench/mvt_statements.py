"""mvt as a PyKokkos port writes it: one workunit per NumPy statement, the products summed inside the kernel.

NPBench's two statements, each a kernel over the N entries it updates:
  x1 += A @ y1    -> add_matvec             (x1[i] += sum_j A[i, j] y1[j])
  x2 += y2 @ A    -> add_matvec_transposed  (x2[i] += sum_j A[j, i] y2[j])
Group M (2 kernels, as in the paper): each kernel writes only its own entry of x1 or x2 and reads A, y1, y2,
which neither writes. mvt.py is already one kernel per statement, so this form is its program, under the
statement subject's name (every NPBench subject has its statement form).
"""
from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from examples.npbench.common import main  # noqa: E402
from examples.npbench.mvt import SIZES, initialize, run_kfuse  # noqa: E402,F401

if __name__ == "__main__":
    main("mvt (one kernel per statement)", SIZES, initialize, run_kfuse)
