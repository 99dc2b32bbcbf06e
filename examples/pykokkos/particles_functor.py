"""Particles in a harmonic well, PyKokkos functor style: a ``@pk.functor`` object whose workunit methods move
the particles (velocity Verlet) and a lambda that sums the kinetic energy. ``python -m kfuse run [--fusion]
particles_functor.py [n] [steps]``.

Prints one line ``RESULT {json}`` for the tests to compare with NumPy.
"""
import json
import sys

import numpy as np

import pykokkos as pk


@pk.functor
class Particles:
    def __init__(self, x0: np.ndarray, v0: np.ndarray, dt: float, k: float):
        n = len(x0)
        self.x: pk.View1D[pk.double] = pk.View([n], pk.double)
        self.v: pk.View1D[pk.double] = pk.View([n], pk.double)
        self.x[:] = x0
        self.v[:] = v0
        self.dt: float = dt
        self.k: float = k

    @pk.workunit
    def half_kick(self, i: int):
        self.v[i] = self.v[i] + 0.5 * self.dt * self.force(self.x[i])

    @pk.workunit
    def drift(self, i: int):
        self.x[i] = self.x[i] + self.dt * self.v[i]

    @pk.function
    def force(self, position: float) -> float:
        return -self.k * position


def initial(n: int) -> tuple:
    rng = np.random.default_rng(7)
    return rng.uniform(-1.0, 1.0, n), rng.uniform(-0.5, 0.5, n)


def run(n: int, steps: int) -> dict:
    p = Particles(*initial(n), dt=0.01, k=4.0)
    energies = []
    for _ in range(steps):
        pk.parallel_for(n, p.half_kick)
        pk.parallel_for(n, p.drift)
        pk.parallel_for(n, p.half_kick)
        v = p.v
        energies.append(pk.parallel_reduce(n, lambda i, acc: acc + 0.5 * v[i] * v[i]))
    return {"x": np.asarray(p.x).tolist(), "v": np.asarray(p.v).tolist(), "kinetic": [float(e) for e in energies]}


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 32
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    print("RESULT", json.dumps(run(n, steps)))
