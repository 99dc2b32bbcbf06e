"""mvt: x1 += A y1 and x2 += A^T y2, one kernel each over the N entries of the result.

Both kernels write only their own entry (x1[i], x2[i]) and read A, y1, y2, which neither writes: a fusible pair.

On a GPU a thread per entry is a poor shape: N threads are too few to fill the card, and the threads of
``add_matvec`` each walk a row of their own, N doubles apart. ``run_kfuse_gpu`` writes the products as a GPU
programmer would, in one pass over A (``add_matvecs_tiles``): a team per tile of rows and columns, a thread per
column reading the tile's rows side by side; each thread adds its column's share of A^T y2 to x2 with an atomic and
leaves its products with y1 in the team's scratch memory, where a thread per row sums them and adds the row's share
of A y1 to x1 with an atomic. Both add in another order than NumPy (rounding differs in the last bits); the kernel
does not fuse (a team kernel with atomics), so fusion runs it as it is.
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
def add_matvecs_tiles(team: pk.TeamMember, x1: pk.View1D[pk.double], x2: pk.View1D[pk.double],
                      A: pk.View2D[pk.double], y1: pk.View1D[pk.double], y2: pk.View1D[pk.double], n: int,
                      rows: int, width: int, blocks: int):
    """Both products over one tile of A: ``rows`` rows by ``width - 1`` columns (the tile's row of products in
    scratch is ``width`` long, one more than the columns, so the threads summing a row each read another bank);
    ``blocks`` tiles across a row of A. Its divisions divide by that argument and its scratch extents are arguments,
    so the host can tell it cannot fault: on a GPU a replay queues it without waiting (kfuse/codegen/kernel.py)."""
    tile: int = width - 1
    k: int = team.team_rank()
    r0: int = (team.league_rank() // blocks) * rows
    c0: int = (team.league_rank() % blocks) * tile
    r_end: int = min(r0 + rows, n)
    part: pk.ScratchView2D[pk.double] = pk.ScratchView2D(team.team_scratch(0), rows, width)
    for c in range(c0 + k, c0 + tile, team.team_size()):
        if c < n:
            yc: float = y1[c]
            s2: float = 0.0
            for j in range(r0, r_end):
                a: float = A[j][c]
                s2 += a * y2[j]
                part[j - r0][c - c0] = a * yc
            pk.atomic_add(x2, [c], s2)
        else:
            for j2 in range(r0, r_end):
                part[j2 - r0][c - c0] = 0.0
    team.team_barrier()
    for r in range(k, r_end - r0, team.team_size()):
        s1: float = 0.0
        for m in range(tile):
            s1 += part[r][m]
        pk.atomic_add(x1, [r0 + r], s1)


#: the GPU tile: 16 rows by 256 columns, a thread per column. On an H200 (README, "Peers") both products took
#: 0.085-0.091 ms in this one pass over A, against 0.143 in a team per row plus blocks of rows (two passes); 8 rows
#: 0.123 (twice the atomics on x2), 32 rows 0.099; tiles of 4 x 16 rows reusing the column sums, with the rows summed
#: in two steps, 0.113-0.155.
TILE_ROWS, TILE_COLUMNS = 16, 256


def mvt_gpu(A, x1, x2, y1, y2, n: int) -> None:
    """x1 += A y1 and x2 += A^T y2 on Views, in the GPU shape (module docstring). A team has a thread per column of
    its tile on a GPU; elsewhere as many as the space gives (each thread then takes every team_size-th column)."""
    width = TILE_COLUMNS + 1
    team = TILE_COLUMNS if pk.get_default_space().value in ("Cuda", "HIP") else pk.AUTO
    blocks = -(-n // TILE_COLUMNS)
    policy = pk.TeamPolicy(-(-n // TILE_ROWS) * blocks, team).set_scratch_size(
        0, pk.PerTeam(pk.ScratchView2D[pk.double].shmem_size(TILE_ROWS, width)))
    pk.parallel_for(policy, add_matvecs_tiles, x1=x1, x2=x2, A=A, y1=y1, y2=y2, n=n, rows=TILE_ROWS, width=width,
                    blocks=blocks)


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
