"""syrk as array code: NPBench's NumPy kernel, and the same statements as kfuse array operations.

N x M statements on rows of growing length: ``A[i, k]`` is read as a number on the host (A is an input
nothing writes, so the read waits for no kernel).
"""
from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402

import kfuse as pk  # noqa: E402
from examples.npbench.common import main, results  # noqa: E402
from examples.npbench.syrk import SIZES, initialize  # noqa: E402,F401


def run_numpy(alpha: float, beta: float, C: np.ndarray, A: np.ndarray) -> np.ndarray:
    C = C.copy()
    for i in range(A.shape[0]):
        C[i, :i + 1] *= beta
        for k in range(A.shape[1]):
            C[i, :i + 1] += alpha * A[i, k] * A[:i + 1, k]
    return C


def run_array(alpha: float, beta: float, C: np.ndarray, A: np.ndarray) -> np.ndarray:
    C, A = pk.from_numpy(C.copy()), pk.from_numpy(A)
    for i in range(A.shape[0]):
        pk.multiply(C[i, :i + 1], beta, out=C[i, :i + 1])
        for k in range(A.shape[1]):
            pk.add(C[i, :i + 1], pk.multiply(A[:i + 1, k], alpha * A[i, k]), out=C[i, :i + 1])
    return results(C)[0]


if __name__ == "__main__":
    main("syrk (array code)", SIZES, initialize, run_array)
