"""Jacobi iterations for the 2-D Laplace equation, PyKokkos workload style: a ``@pk.workload`` class whose
``@pk.main`` sweeps an MDRangePolicy over the interior and measures the change (a reduction) each sweep, and whose
``@pk.callback`` reports. ``python -m kfuse run [--fusion] jacobi_workload.py [n] [sweeps]``.

Prints one line ``RESULT {json}`` for the tests to compare with NumPy.
"""
import json
import sys

import numpy as np

import pykokkos as pk


@pk.workload
class Jacobi:
    def __init__(self, n: int, sweeps: int):
        self.n: int = n
        self.sweeps: int = sweeps
        self.grid: pk.View2D[pk.double] = pk.View([n, n], pk.double)
        self.next: pk.View2D[pk.double] = pk.View([n, n], pk.double)
        self.changes: list = []
        self.grid[0, :] = 1.0  # the top edge is held at 1, the others at 0
        self.next[0, :] = 1.0

    @pk.main
    def run(self):
        interior = pk.MDRangePolicy([1, 1], [self.n - 1, self.n - 1])
        for _ in range(self.sweeps):
            pk.parallel_for("sweep", interior, self.sweep)
            change = pk.parallel_reduce("change", interior, self.change)
            pk.parallel_for("accept", interior, self.accept)
            self.changes.append(change)

    @pk.workunit
    def sweep(self, i: int, j: int):
        self.next[i][j] = 0.25 * (self.grid[i - 1][j] + self.grid[i + 1][j] + self.grid[i][j - 1] +
                                  self.grid[i][j + 1])

    @pk.workunit
    def change(self, i: int, j: int, acc: pk.Acc[pk.double]):
        acc += abs(self.next[i][j] - self.grid[i][j])

    @pk.workunit
    def accept(self, i: int, j: int):
        self.grid[i][j] = self.next[i][j]

    @pk.callback
    def report(self):
        result = {"grid": np.asarray(self.grid).tolist(), "changes": [float(c) for c in self.changes]}
        print("RESULT", json.dumps(result))


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 16
    sweeps = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    pk.execute(pk.ExecutionSpace.Default, Jacobi(n, sweeps))
