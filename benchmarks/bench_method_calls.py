"""Per-call cost of launching a method kernel (obj.kernel: its fields are fetched and bound at each call) and a
lambda, against the same standalone workunit, eager, one thread: `KFUSE_NUM_THREADS=1 python benchmarks/bench_method_calls.py`."""
import statistics
import time

import kfuse as pk


@pk.workunit
def axpy(i: int, y: pk.View1D[pk.double], x: pk.View1D[pk.double], a: float):
    y[i] = y[i] + a * x[i]


@pk.functor
class F:
    def __init__(self, n):
        self.x: pk.View1D[pk.double] = pk.View([n], pk.double)
        self.y: pk.View1D[pk.double] = pk.View([n], pk.double)
        self.a: float = 0.5

    @pk.workunit
    def axpy(self, i: int):
        self.y[i] = self.y[i] + self.a * self.x[i]


f = F(16)


def standalone():
    pk.parallel_for(16, axpy, y=f.y, x=f.x, a=0.5)


def method():
    pk.parallel_for(16, f.axpy)


def lam():
    y, x = f.y, f.x
    pk.parallel_for(16, lambda i: y[i] + 0.5 * x[i], y)


for fn in (standalone, method, lam):
    fn()
times = {}
for _ in range(9):
    for fn in (standalone, method, lam):
        t = time.perf_counter()
        for _ in range(5000):
            fn()
        times.setdefault(fn.__name__, []).append((time.perf_counter() - t) / 5000 * 1e6)
print({k: round(statistics.median(v), 2) for k, v in times.items()}, "us per call (median of 9 x 5000)")
