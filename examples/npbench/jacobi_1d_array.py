"""jacobi_1d as array code: NPBench's NumPy kernel, and the same statements as kfuse array operations.

Each kfuse line is the NumPy line above it: slices of Views are subviews sharing memory, results go to
``out=``. Each statement's three operations are one kernel; the two statements of a step read neighbours of
what the other wrote, so they are two kernels, each run as soon as the next statement starts.
NPBench steps ``range(1, TSTEPS)``; here TSTEPS steps, as the hand-written kernels in jacobi_1d.py.
"""
from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402

import kfuse as pk  # noqa: E402
from examples.npbench.common import main, results  # noqa: E402
from kfuse.bench.numpy_refs import jacobi_1d as run_numpy  # noqa: E402,F401 - NPBench's NumPy kernel
from examples.npbench.jacobi_1d import SIZES, initialize  # noqa: E402,F401


def run_array(TSTEPS: int, A: np.ndarray, B: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    A, B = pk.from_numpy(A.copy()), pk.from_numpy(B.copy())
    for _ in range(TSTEPS):
        pk.multiply(pk.add(pk.add(A[:-2], A[1:-1]), A[2:]), 0.33333, out=B[1:-1])
        pk.multiply(pk.add(pk.add(B[:-2], B[1:-1]), B[2:]), 0.33333, out=A[1:-1])
    return results(A, B)


if __name__ == "__main__":
    main("jacobi_1d (array code)", SIZES, initialize, run_array)
