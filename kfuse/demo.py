"""``python -m kfuse.demo``: kfuse in one minute — the PyFuser paper's add+mul example and two small subjects
(NSTREAM, NPBench mvt), each run eagerly and fused, checked against NumPy, with what the fuser did and the
time each took. Exits 1 if any result differs from NumPy."""
from __future__ import annotations

import statistics
import sys
import time

import numpy as np

import kfuse as pk

from .bench import fig2, numpy_refs, subjects
from .bench.measure import fusion_mode, settle

REPEAT = 15  # warm runs per case and mode: its smallest case takes a fraction of a millisecond


def _paper():
    A, B, C, _ = fig2.make("small")

    def go():
        fig2.run(A, B, C, 1)
        return np.array(C)
    return go, lambda: fig2.reference(np.array(B))


def _nstream():
    nstream = subjects.import_example("nstream", "run")
    n, iterations = 1 << 18, 50

    def want():
        A, B, C = np.zeros(n), np.full(n, 2.0), np.full(n, 2.0)
        for _ in range(iterations):
            A += B + nstream.SCALAR * C
        return A
    return lambda: nstream.run(n=n, iterations=iterations)["A"], want


def _mvt():
    mvt = subjects.import_example("examples.npbench.mvt", "initialize", "run_kfuse")
    inputs = mvt.initialize("medium")
    return lambda: mvt.run_kfuse(**inputs), lambda: numpy_refs.mvt(**inputs)


CASES = (("paper Fig. 2: add + mul", _paper), ("NSTREAM x50 (n=2^18)", _nstream), ("NPBench mvt (N=2500)", _mvt))


def _timed(go) -> dict:
    """Per mode ("eager", "o": fused), (its last result, median seconds, kernel launches per run). Fused is settled
    first (its fused kernels built, its profitability decided); then the two modes' runs alternate, so that the
    machine's speed drifting (a few shared cores) weighs on both alike; each mode's first run is a warm-up."""
    settle(go, "all")
    times: dict = {"eager": [], "o": []}
    last: dict = {}  # per mode, its last run's (result, launches)
    for _ in range(REPEAT + 1):
        for mode, taken in times.items():
            before = pk.stats()["kernels_launched"]
            start = time.perf_counter()
            with fusion_mode(mode, "all" if mode == "o" else None):
                out = go()
            taken.append(time.perf_counter() - start)
            last[mode] = out, pk.stats()["kernels_launched"] - before
    return {mode: (last[mode][0], statistics.median(taken[1:]), last[mode][1]) for mode, taken in times.items()}


def _same(got, want) -> bool:
    got, want = (got if isinstance(got, tuple) else (got,)), (want if isinstance(want, tuple) else (want,))
    return all(np.allclose(g, w, rtol=1e-10, atol=1e-12) for g, w in zip(got, want))


def main() -> int:
    rows, failed = [], False
    print("kfuse demo: each case runs eagerly (one kernel launch per call) and fused (calls traced, fused into\n"
          "one kernel per group, compiled once, cached on disk); results are checked against NumPy.\n")
    for title, make in CASES:
        go, want = make()
        reference = want()
        timed = _timed(go)
        (eager, t_eager, n_eager), (fused, t_fused, n_fused) = timed["eager"], timed["o"]
        ok = _same(eager, reference) and _same(fused, reference)
        failed |= not ok
        rows.append((title, t_eager, n_eager, t_fused, n_fused, ok))
        if title.startswith("paper"):
            print("What the fuser did with add + mul (pk.explain(), last flush):")
            print("  " + pk.explain(1).replace("\n", "\n  ") + "\n")
    print(f"{'case':26} {'eager s':>9} {'launches':>8} {'fused s':>9} {'launches':>8} {'speedup':>8}  check")
    for title, te, ne, tf, nf, ok in rows:
        print(f"{title:26} {te:9.4f} {ne:8d} {tf:9.4f} {nf:8d} {te / tf:7.2f}x  {'PASS' if ok else 'FAIL'}")
    print(f"\n(median of {REPEAT} warm runs each, eager and fused alternated, wall time including Python; "
          "'python -m kfuse.bench' measures more)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
