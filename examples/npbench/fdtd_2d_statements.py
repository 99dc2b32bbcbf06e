"""fdtd_2d as a PyKokkos port writes it: one workunit per NumPy statement, the time-step loop in Python.

NPBench's four statements per step, each a kernel over the columns j of its slice (walking the rows inside):
  ey[0, :] = _fict_[t]                                    -> ey_top       over j = 0..NY-1
  ey[1:, :] -= 0.5 * (hz[1:, :] - hz[:-1, :])             -> ey_update    over j = 0..NY-1
  ex[:, 1:] -= 0.5 * (hz[:, 1:] - hz[:, :-1])             -> ex_update    over j = 1..NY-1
  hz[:-1, :-1] -= 0.7 * (ex[:-1, 1:] - ex[:-1, :-1]
                         + ey[1:, :-1] - ey[:-1, :-1])    -> hz_update    over j = 0..NY-2
Group F (2 kernels, as in the paper): the two ey statements share the column range and touch only column j of
ey. ex_update has a range of its own but touches neither ey nor what they read and write, so it joins them
horizontally (one launch, the threads split between the two ranges); hz_update reads ex[:, j+1], ex_update's
next thread's column, and runs alone; the next step's ey_top starts a new group after hz_update. Columns, not rows, are
the thread index because the first statement is a row of ey: over rows, no two statements share a range
(fdtd_2d.py runs over rows and fuses nothing).
"""
from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402

import kfuse as pk  # noqa: E402
from examples.npbench.common import main, results  # noqa: E402
from examples.npbench.fdtd_2d import SIZES, initialize  # noqa: E402,F401


@pk.workunit
def ey_top(j: int, ey: pk.View2D[pk.double], fict: pk.View1D[pk.double], t: int):
    ey[0][j] = fict[t]


@pk.workunit
def ey_update(j: int, ey: pk.View2D[pk.double], hz: pk.View2D[pk.double], nx: int):
    for i in range(1, nx):
        ey[i][j] = ey[i][j] - 0.5 * (hz[i][j] - hz[i - 1][j])


@pk.workunit
def ex_update(j: int, ex: pk.View2D[pk.double], hz: pk.View2D[pk.double], nx: int):
    for i in range(nx):
        ex[i][j] = ex[i][j] - 0.5 * (hz[i][j] - hz[i][j - 1])


@pk.workunit
def hz_update(j: int, hz: pk.View2D[pk.double], ex: pk.View2D[pk.double], ey: pk.View2D[pk.double], nx: int):
    for i in range(nx - 1):
        hz[i][j] = hz[i][j] - 0.7 * (ex[i][j + 1] - ex[i][j] + ey[i + 1][j] - ey[i][j])


def run_kfuse(TMAX: int, ex: np.ndarray, ey: np.ndarray, hz: np.ndarray, _fict_: np.ndarray):
    """Returns (ex, ey, hz) after TMAX steps."""
    nx, ny = ex.shape
    vx, vy, vz = (pk.from_numpy(a.copy()) for a in (ex, ey, hz))
    fict = pk.from_numpy(_fict_)
    for t in range(TMAX):
        pk.parallel_for(ny, ey_top, ey=vy, fict=fict, t=t)
        pk.parallel_for(ny, ey_update, ey=vy, hz=vz, nx=nx)
        pk.parallel_for(pk.RangePolicy(1, ny), ex_update, ex=vx, hz=vz, nx=nx)
        pk.parallel_for(ny - 1, hz_update, hz=vz, ex=vx, ey=vy, nx=nx)
    return results(vx, vy, vz)


if __name__ == "__main__":
    main("fdtd_2d (one kernel per statement)", SIZES, initialize, run_kfuse)
