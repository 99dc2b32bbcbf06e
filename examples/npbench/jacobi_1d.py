"""jacobi_1d: TSTEPS steps of the 3-point average B = (A[i-1] + A[i] + A[i+1]) / 3 and back into A.

Per step the NumPy formulation has two array statements, ``B[1:-1] = avg(A)`` then ``A[1:-1] = avg(B)``; each is
one kernel over the interior. The second reads neighbours of what the first wrote, so the two must not fuse.
"""
from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402

import kfuse as pk  # noqa: E402
from examples.npbench.common import main, random_matrix, results  # noqa: E402

SIZES = {"small": {"N": 400, "TSTEPS": 20}, "medium": {"N": 40000, "TSTEPS": 500},
         "large": {"N": 400000, "TSTEPS": 1000}}


@pk.workunit
def average3(i: int, src: pk.View1D[pk.double], dst: pk.View1D[pk.double]):
    dst[i] = 0.33333 * (src[i - 1] + src[i] + src[i + 1])


def initialize(size: str) -> dict:
    p = SIZES[size]
    return {"TSTEPS": p["TSTEPS"], "A": random_matrix(1, p["N"]), "B": random_matrix(2, p["N"])}


def run_kfuse(TSTEPS: int, A: np.ndarray, B: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a, b = pk.from_numpy(A.copy()), pk.from_numpy(B.copy())
    interior = pk.RangePolicy(1, A.shape[0] - 1)
    for _ in range(TSTEPS):
        pk.parallel_for(interior, average3, src=a, dst=b)
        pk.parallel_for(interior, average3, src=b, dst=a)
    return results(a, b)


if __name__ == "__main__":
    main("jacobi_1d", SIZES, initialize, run_kfuse)
