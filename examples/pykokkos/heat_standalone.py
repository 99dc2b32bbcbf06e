"""1-D heat equation, PyKokkos standalone style: explicit Euler steps of u_t = alpha u_xx with fixed ends, then the
total heat (a reduction). Run it as PyKokkos code: ``python -m kfuse run [--fusion] heat_standalone.py [n] [steps]``.

Prints one line ``RESULT {json}`` (the final field and its total) for the tests to compare with NumPy.
"""
import json
import sys

import numpy as np

import pykokkos as pk


@pk.workunit
def step(i: int, u: pk.View1D[pk.double], u_new: pk.View1D[pk.double], alpha: float):
    if i == 0 or i == u.extent(0) - 1:
        u_new[i] = u[i]
    else:
        u_new[i] = u[i] + alpha * (u[i - 1] - 2.0 * u[i] + u[i + 1])


@pk.workunit
def copy_back(i: int, u: pk.View1D[pk.double], u_new: pk.View1D[pk.double]):
    u[i] = u_new[i]


@pk.workunit
def heat(i: int, acc: pk.Acc[pk.double], u: pk.View1D[pk.double]):
    acc += u[i]


def initial(n: int) -> np.ndarray:
    x = np.linspace(0.0, 1.0, n)
    return np.exp(-100.0 * (x - 0.3) ** 2)


def run(n: int, steps: int, alpha: float = 0.25) -> dict:
    u = pk.View([n], pk.double)
    u_new = pk.View([n], pk.double)
    u[:] = initial(n)
    for _ in range(steps):
        pk.parallel_for("step", n, step, u=u, u_new=u_new, alpha=alpha)
        pk.parallel_for("copy_back", n, copy_back, u=u, u_new=u_new)
    total = pk.parallel_reduce("heat", n, heat, u=u)
    return {"u": np.asarray(u).tolist(), "total": float(total)}


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 64
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    print("RESULT", json.dumps(run(n, steps)))
