"""fdtd_2d as array code: NPBench's NumPy kernel, and the same statements as kfuse array operations.

Column slices (``hz[:, 1:]``) are strided 2-D Views, which the generated kernels read and write in place
(2-D kernels, kfuse/ops/lazy.py): each statement is one kernel.
"""
from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402

import kfuse as pk  # noqa: E402
from examples.npbench.common import main, results  # noqa: E402
from kfuse.bench.numpy_refs import fdtd_2d as run_numpy  # noqa: E402,F401 - NPBench's NumPy kernel
from examples.npbench.fdtd_2d import SIZES, initialize  # noqa: E402,F401


def run_array(TMAX: int, ex: np.ndarray, ey: np.ndarray, hz: np.ndarray, _fict_: np.ndarray):
    ex, ey, hz = (pk.from_numpy(a.copy()) for a in (ex, ey, hz))
    _fict_ = pk.from_numpy(_fict_)
    for t in range(TMAX):
        pk.fill(ey[0, :], _fict_[t])
        pk.subtract(ey[1:, :], pk.multiply(pk.subtract(hz[1:, :], hz[:-1, :]), 0.5), out=ey[1:, :])
        pk.subtract(ex[:, 1:], pk.multiply(pk.subtract(hz[:, 1:], hz[:, :-1]), 0.5), out=ex[:, 1:])
        pk.subtract(hz[:-1, :-1], pk.multiply(pk.subtract(pk.add(pk.subtract(ex[:-1, 1:], ex[:-1, :-1]), ey[1:, :-1]),
                                                          ey[:-1, :-1]), 0.7), out=hz[:-1, :-1])
    return results(ex, ey, hz)


if __name__ == "__main__":
    main("fdtd_2d (array code)", SIZES, initialize, run_array)
