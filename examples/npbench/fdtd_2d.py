"""fdtd_2d: TMAX steps of the 2-D finite-difference time-domain update of the fields ex, ey, hz (NX x NY).

Per step, one kernel per array statement:
  ey[0, :] = _fict_[t];  ey[1:, :] -= 0.5 (hz[1:, :] - hz[:-1, :]);  ex[:, 1:] -= 0.5 (hz[:, 1:] - hz[:, :-1]);
  hz[:-1, :-1] -= 0.7 (ex[:-1, 1:] - ex[:-1, :-1] + ey[1:, :-1] - ey[:-1, :-1]).
The field updates run over rows (thread i owns row i, walked contiguously); their row ranges differ (1..NX,
0..NX, 0..NX-1) and hz reads the next row of ey, so nothing here fuses: a subject where the trace must leave
every kernel alone. (Running ey over columns would let the two ey statements fuse, at several times the cost
of the strided column walk.)
"""
from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402

import kfuse as pk  # noqa: E402
from examples.npbench.common import main, random_matrix, read_only, results  # noqa: E402

SIZES = {"small": {"TMAX": 6, "NX": 30, "NY": 40}, "medium": {"TMAX": 100, "NX": 500, "NY": 600},
         "large": {"TMAX": 200, "NX": 1000, "NY": 1200}}


@pk.workunit
def ey_source(j: int, ey: pk.View2D[pk.double], fict: pk.View1D[pk.double], t: int):
    ey[0][j] = fict[t]


@pk.workunit
def ey_update(i: int, ey: pk.View2D[pk.double], hz: pk.View2D[pk.double], ny: int):
    for j in range(ny):
        ey[i][j] = ey[i][j] - 0.5 * (hz[i][j] - hz[i - 1][j])


@pk.workunit
def ex_update(i: int, ex: pk.View2D[pk.double], hz: pk.View2D[pk.double], ny: int):
    for j in range(1, ny):
        ex[i][j] = ex[i][j] - 0.5 * (hz[i][j] - hz[i][j - 1])


@pk.workunit
def hz_update(i: int, hz: pk.View2D[pk.double], ex: pk.View2D[pk.double], ey: pk.View2D[pk.double], ny: int):
    for j in range(ny - 1):
        hz[i][j] = hz[i][j] - 0.7 * (ex[i][j + 1] - ex[i][j] + ey[i + 1][j] - ey[i][j])


def initialize(size: str) -> dict:
    p = SIZES[size]
    nx, ny = p["NX"], p["NY"]
    return {"TMAX": p["TMAX"], "ex": random_matrix(51, nx, ny), "ey": random_matrix(52, nx, ny),
            "hz": random_matrix(53, nx, ny), "_fict_": read_only(np.arange(p["TMAX"], dtype=np.float64))}


def run_kfuse(TMAX: int, ex: np.ndarray, ey: np.ndarray, hz: np.ndarray, _fict_: np.ndarray):
    """Returns (ex, ey, hz) after TMAX steps."""
    nx, ny = ex.shape
    vx, vy, vz = (pk.from_numpy(a.copy()) for a in (ex, ey, hz))
    fict = pk.from_numpy(_fict_)
    for t in range(TMAX):
        pk.parallel_for(ny, ey_source, ey=vy, fict=fict, t=t)
        pk.parallel_for(pk.RangePolicy(1, nx), ey_update, ey=vy, hz=vz, ny=ny)
        pk.parallel_for(nx, ex_update, ex=vx, hz=vz, ny=ny)
        pk.parallel_for(nx - 1, hz_update, hz=vz, ex=vx, ey=vy, ny=ny)
    return results(vx, vy, vz)


if __name__ == "__main__":
    main("fdtd_2d", SIZES, initialize, run_kfuse)
