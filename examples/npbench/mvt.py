"""mvt: x1 += A y1 and x2 += A^T y2, one kernel each over the N entries of the result.

Both kernels write only their own entry (x1[i], x2[i]) and read A, y1, y2, which neither writes: a fusible pair.

On a GPU a thread per entry is a poor shape: N threads are too few to fill the card, and the threads of
``add_matvec`` each walk a row of their own, N doubles apart. ``run_kfuse_gpu`` writes the products as a GPU
programmer would: a team per row whose threads read the row side by side (``add_matvec_rows``), and for A^T y2 a
thread per column and block of rows, next threads on next columns, each adding its block's share to x2 with an
atomic (``add_matvec_transposed_blocks``). Both add in another order than NumPy (rounding differs in the last
bits); neither fuses (a team kernel, an atomic), so fusion runs them as they are.
"""
from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402

import kfuse as pk  # noqa: E402
from examples.npbench.common import main, random_matrix, results  # noqa: E402

SIZES = {"small": {"N": 120}, "medium": {"N": 2500}, "large": {"N": 5000}}


@pk.workunit
def add_matvec(i: int, x: pk.View1D[pk.double], A: pk.View2D[pk.double], y: pk.View1D[pk.double], n: int):
    """x[i] += sum_j A[i][j] y[j]."""
    s: float = 0.0
    for j in range(n):
        s += A[i][j] * y[j]
    x[i] = x[i] + s


@pk.workunit
def add_matvec_transposed(i: int, x: pk.View1D[pk.double], A: pk.View2D[pk.double], y: pk.View1D[pk.double],
                          n: int):
    """x[i] += sum_j A[j][i] y[j]."""
    s: float = 0.0
    for j in range(n):
        s += A[j][i] * y[j]
    x[i] = x[i] + s


@pk.workunit
def add_matvec_rows(team: pk.TeamMember, x: pk.View1D[pk.double], A: pk.View2D[pk.double], y: pk.View1D[pk.double],
                    n: int):
    """x[r] += sum_j A[r][j] y[j] for the team's row r."""
    r: int = team.league_rank()

    def dot(j: int, acc: pk.Acc[pk.double]):
        acc += A[r][j] * y[j]

    s: float = pk.parallel_reduce(pk.TeamThreadRange(team, n), dot)

    def write():
        x[r] = x[r] + s

    pk.single(pk.PerTeam(team), write)


@pk.workunit
def add_matvec_transposed_blocks(t: int, x: pk.View1D[pk.double], A: pk.View2D[pk.double], y: pk.View1D[pk.double],
                                 n: int, rows: int):
    """x[i] += sum_j A[j][i] y[j] over the ``rows`` rows of block t // n, for column i = t % n."""
    i: int = t % n
    start: int = (t // n) * rows
    s: float = 0.0
    for j in range(start, min(start + rows, n)):
        s += A[j][i] * y[j]
    pk.atomic_add(x, [i], s)


#: rows a thread of add_matvec_transposed_blocks sums: 64 gives N = 5,000 about 400,000 threads
BLOCK_ROWS = 64


def mvt_gpu(A, x1, x2, y1, y2, n: int) -> None:
    """x1 += A y1 and x2 += A^T y2 on Views, in the GPU shapes (module docstring)."""
    pk.parallel_for(pk.TeamPolicy(n, pk.AUTO), add_matvec_rows, x=x1, A=A, y=y1, n=n)
    blocks = -(-n // BLOCK_ROWS)
    pk.parallel_for(n * blocks, add_matvec_transposed_blocks, x=x2, A=A, y=y2, n=n, rows=BLOCK_ROWS)


def initialize(size: str) -> dict:
    n = SIZES[size]["N"]
    return {"A": random_matrix(11, n, n), "x1": random_matrix(12, n), "x2": random_matrix(13, n),
            "y1": random_matrix(14, n), "y2": random_matrix(15, n)}


def run_kfuse(A: np.ndarray, x1: np.ndarray, x2: np.ndarray, y1: np.ndarray, y2: np.ndarray):
    n = A.shape[0]
    a, v1, v2 = pk.from_numpy(A), pk.from_numpy(y1), pk.from_numpy(y2)  # read only: no copy
    r1, r2 = pk.from_numpy(x1.copy()), pk.from_numpy(x2.copy())
    pk.parallel_for(n, add_matvec, x=r1, A=a, y=v1, n=n)
    pk.parallel_for(n, add_matvec_transposed, x=r2, A=a, y=v2, n=n)
    return results(r1, r2)


def run_kfuse_gpu(A: np.ndarray, x1: np.ndarray, x2: np.ndarray, y1: np.ndarray, y2: np.ndarray):
    a, v1, v2 = pk.from_numpy(A), pk.from_numpy(y1), pk.from_numpy(y2)
    r1, r2 = pk.from_numpy(x1.copy()), pk.from_numpy(x2.copy())
    mvt_gpu(a, r1, r2, v1, v2, A.shape[0])
    return results(r1, r2)


if __name__ == "__main__":
    main("mvt", SIZES, initialize, run_kfuse)
