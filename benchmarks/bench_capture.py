"""What ``pk.capture`` saves (kfuse/capturing.py): NSTREAM's loop (``--calls`` calls of ``A += B + 3 C`` over
``--n`` doubles, then ``pk.fence()``), or with ``--gaussian`` the Gaussian log-likelihood chain (nine array
operations ending in a sum over ``--n`` doubles, its value read), eager, fused (NSTREAM's runs rerun: their calls
compared with the kept flush's; the chain's recorded and analysed) and captured (each run one replay), or with
``--nb SIZE`` a GaussianNB prediction (examples/gaussian_nb_array.py's ``most_likely``: per-class array statements
into new arrays; ``--nb-kernels``: examples/gaussian_nb.py's hand-written kernels), in turns in one process after
each settles: each turn runs ``--block`` runs of one mode back to back, as a loop does (garbage
collected before the block); prints the median and best microseconds a run per mode, and whether each mode's
result is what it should be.

    KFUSE_NUM_THREADS=1 .venv/bin/python benchmarks/bench_capture.py [--gaussian | --nb small [--nb-kernels]]
        [--n 4096] [--calls 50] [--runs 300] [--block 20]
"""
from __future__ import annotations

import argparse
import gc
import statistics
import time

import numpy as np

import kfuse as pk
from kfuse.bench import measure, peers


@pk.workunit
def nstream(i: int, A: pk.View1D[pk.double], B: pk.View1D[pk.double], C: pk.View1D[pk.double], scalar: float):
    A[i] += B[i] + scalar * C[i]


def iterate(A, B, C, calls: int) -> None:
    for _ in range(calls):
        pk.parallel_for(A.shape[0], nstream, A=A, B=B, C=C, scalar=3.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=4096)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--runs", type=int, default=300, help="timed runs per mode")
    parser.add_argument("--block", type=int, default=20, help="runs of one mode in a row")
    parser.add_argument("--gaussian", action="store_true", help="the Gaussian chain of array operations instead")
    parser.add_argument("--nb", choices=["small", "medium", "large"], help="a GaussianNB prediction of this size")
    parser.add_argument("--nb-kernels", action="store_true", help="with --nb: the hand-written kernels' prediction")
    args = parser.parse_args()
    last: dict = {}
    if args.nb or args.gaussian:  # the peers' workloads (kfuse/bench/peers.py): their inputs are only read
        make, array_code = peers.WORKLOADS["gaussian" if args.gaussian else
                                           "gaussian_nb_kernels" if args.nb_kernels else "gaussian_nb"]
        go, inputs, go_captured = make(args.n if args.gaussian else args.nb)
        want = array_code(np, *inputs)

        def keep(mode, fn):  # a prediction is a View: each mode's last one is checked (the chain's sums, every one)
            return fn if args.gaussian else lambda: last.__setitem__(mode, fn())
        modes = {"eager": (False, keep("eager", go)), "fused": (True, keep("fused", go)),
                 "captured": (True, keep("captured", go_captured))}
        arrays, calls = dict.fromkeys(modes, ()), ()
    else:
        captured, calls = pk.capture(iterate), (args.calls,)
        modes = {"eager": (False, iterate), "fused": (True, iterate), "captured": (True, captured)}
        arrays = {m: (pk.zeros(args.n), pk.full(args.n, 2.0), pk.full(args.n, 2.0)) for m in modes}
    values: dict = {m: set() for m in modes}
    times: dict = {m: [] for m in modes}
    runs = dict.fromkeys(modes, 0)

    def block(mode: str, count: int) -> list:
        fused, fn = modes[mode]
        runs[mode] += count
        if fused:
            pk.enable_fusion()
        try:
            gc.collect()
            seconds = []
            for _ in range(count):
                start = time.perf_counter()
                values[mode].add(fn(*arrays[mode], *calls))
                pk.fence()
                seconds.append(time.perf_counter() - start)
            return seconds
        finally:
            if fused:
                pk.disable_fusion()

    for mode in modes:
        measure.until_settled(lambda mode=mode: block(mode, 1)[0])
    for r in range(-(-args.runs // args.block)):
        for mode in measure.turn_order(list(modes), r):
            times[mode] += block(mode, args.block)
    for mode, seconds in times.items():
        if args.nb:
            right = np.array_equal(np.asarray(last[mode]), want)
        elif args.gaussian:  # (summed in another order than NumPy's)
            right = all(abs(v - want) <= 1e-9 * abs(want) for v in values[mode])
        else:
            right = np.array_equal(np.asarray(arrays[mode][0]), np.full(args.n, 8.0 * args.calls * runs[mode]))
        print(f"{mode:9s} median {statistics.median(seconds) * 1e6:9.1f} us   best {min(seconds) * 1e6:9.1f} us   "
              f"result {'right' if right else 'WRONG'}")
    print(f"calls replayed by capture: {pk.stats()['calls_captured']}")


if __name__ == "__main__":
    main()
