"""mvt as array code: NPBench's NumPy kernel, and the same statements as kfuse array operations.

Both products are BLAS calls on the host (kfuse/ops/linalg.py), so each is a barrier; the additions after
them are kernels.
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


def run_numpy(A: np.ndarray, x1: np.ndarray, x2: np.ndarray, y1: np.ndarray, y2: np.ndarray):
    x1, x2 = x1.copy(), x2.copy()
    x1 += A @ y1
    x2 += y2 @ A
    return x1, x2


def run_array(A: np.ndarray, x1: np.ndarray, x2: np.ndarray, y1: np.ndarray, y2: np.ndarray):
    A, y1, y2 = pk.from_numpy(A), pk.from_numpy(y1), pk.from_numpy(y2)
    x1, x2 = pk.from_numpy(x1.copy()), pk.from_numpy(x2.copy())
    pk.add(x1, pk.matmul(A, y1), out=x1)
    pk.add(x2, pk.matmul(y2, A), out=x2)
    return results(x1, x2)


if __name__ == "__main__":
    main("mvt (array code)", SIZES, initialize, run_array)
