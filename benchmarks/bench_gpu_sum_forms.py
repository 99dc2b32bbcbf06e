"""Which form a single sum should take on the GPU: the peers bench's Gaussian chain (one captured kernel, a sum over
three Views with a log and a division an element) in the prelude's block form (the default), with Views asked for
ahead and the elements a thread takes an iteration varied, against Kokkos's reducer (``SINGLE_SUM_SPACES`` without
"Cuda") and torch.compile of the same chain where installed. Each form runs in a process of its own, in the order
given and then the first two again (the host's clock drifts); medians of the captured replay with its fence, and
of its kernel timed in C++ (launch and fence included).

    KFUSE_DEFAULT_SPACE=Cuda python benchmarks/bench_gpu_sum_forms.py [--n 67108864] [--runs 300]
"""
from __future__ import annotations

import argparse
import functools
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: form -> (Views asked for ahead, KFUSE_OPT_FLAGS); None: Kokkos's reducer
FORMS = {"kokkos": None, "blocks": (0, "-O3"), "blocks_ahead1": (1, "-O3"), "blocks_ahead2": (2, "-O3"),
         "blocks_unroll2": (0, "-O3 -DKF_UNROLL=2"), "blocks_unroll8": (0, "-O3 -DKF_UNROLL=8")}


def _torch_ms(n: int, runs: int) -> str:
    import numpy as np

    from bench_gpu_reductions import walls_and_kernels
    from kfuse.bench import peers
    found, _ = peers.find_peers(on_gpu=True)
    torch = next((p for p in found if p.name.startswith("torch")), None)
    if torch is None:
        return "torch.compile not installed"
    rng = np.random.default_rng(0)
    arrays = (rng.standard_normal(n), rng.standard_normal(n), rng.uniform(0.5, 2.0, n))
    fn = torch.compile(functools.partial(peers.gaussian_xp, torch.xp))
    inputs = [torch.asarray(a) for a in arrays]
    run = lambda: torch.sync(fn(*inputs))  # noqa: E731
    _warm(run)
    times, _, _ = walls_and_kernels(run, runs)
    return f"replay {statistics.median(times) * 1e3:.4f} ms (min {min(times) * 1e3:.4f})"


def _warm(run) -> None:
    for _ in range(30):
        run()


def _kfuse_ms(form: str, n: int, runs: int) -> str:
    import numpy as np

    import kfuse as pk
    from kfuse.bench import peers
    from kfuse.bench.measure import until_settled
    from kfuse.codegen import blocks
    from bench_gpu_reductions import walls_and_kernels
    if FORMS[form] is None:
        blocks.SINGLE_SUM_SPACES = frozenset()
    else:
        ahead = FORMS[form][0]
        blocks.views_ahead = lambda spec, kernel, index: blocks.sure_thread_loads(kernel, index)[:ahead]
    make, array_code = peers.WORKLOADS["gaussian"]
    _, arrays, captured = make(n)
    want = float(array_code(np, *arrays))
    pk.enable_fusion()

    def run():
        captured()
        pk.fence()
    until_settled(run)
    error = abs(float(captured()) - want) / abs(want)
    _warm(run)
    walls, kernels, launches = walls_and_kernels(run, runs)
    return (f"replay {statistics.median(walls) * 1e3:.4f} ms (min {min(walls) * 1e3:.4f}), kernel "
            f"{statistics.median(kernels) * 1e3:.4f}, launches {launches}, relative error {error:.1e}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1 << 26)
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--forms", default="torch," + ",".join(FORMS))
    parser.add_argument("--one", help=argparse.SUPPRESS)  # the child process's form
    args = parser.parse_args()
    if args.one:
        print(_torch_ms(args.n, args.runs) if args.one == "torch" else _kfuse_ms(args.one, args.n, args.runs))
        return
    forms = args.forms.split(",")
    unknown = [f for f in forms if f != "torch" and f not in FORMS]
    if unknown:
        parser.error(f"--forms: unknown {', '.join(unknown)}; known: torch, {', '.join(FORMS)}")
    print(f"Gaussian chain, n = {args.n}, medians of {args.runs}; load average {os.getloadavg()[0]:.2f}")
    for form in forms + forms[:2]:
        flags = {} if form == "torch" or FORMS[form] is None else {"KFUSE_OPT_FLAGS": FORMS[form][1]}
        done = subprocess.run([sys.executable, __file__, "--n", str(args.n), "--runs", str(args.runs), "--one", form],
                              capture_output=True, text=True, env={**os.environ, **flags})
        lines = done.stdout.strip().splitlines() or ["failed: " + (done.stderr.strip().splitlines() or ["no output"])[-1]]
        print(f"{form:24s} {lines[-1]}", flush=True)


if __name__ == "__main__":
    main()
