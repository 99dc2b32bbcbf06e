"""syr2k as array code: NPBench's NumPy kernel, and the same statements as kfuse array operations.

N x M statements on rows of growing length; ``A[i, k]`` and ``B[i, k]`` are read as numbers on the host
(inputs nothing writes, so the reads wait for no kernel).
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


def run_numpy(alpha: float, beta: float, C: np.ndarray, A: np.ndarray, B: np.ndarray) -> np.ndarray:
    C = C.copy()
    for i in range(A.shape[0]):
        C[i, :i + 1] *= beta
        for k in range(A.shape[1]):
            C[i, :i + 1] += (A[:i + 1, k] * alpha * B[i, k] + B[:i + 1, k] * alpha * A[i, k])
    return C


def run_array(alpha: float, beta: float, C: np.ndarray, A: np.ndarray, B: np.ndarray) -> np.ndarray:
    C, A, B = pk.from_numpy(C.copy()), pk.from_numpy(A), pk.from_numpy(B)
    for i in range(A.shape[0]):
        pk.multiply(C[i, :i + 1], beta, out=C[i, :i + 1])
        for k in range(A.shape[1]):
            pk.add(C[i, :i + 1], pk.add(pk.multiply(pk.multiply(A[:i + 1, k], alpha), B[i, k]),
                                        pk.multiply(pk.multiply(B[:i + 1, k], alpha), A[i, k])), out=C[i, :i + 1])
    return results(C)[0]


if __name__ == "__main__":
    main("syr2k (array code)", SIZES, initialize, run_array)
