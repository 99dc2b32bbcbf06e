"""``python -m kfuse.bench --peers``: kfuse against the array libraries a user would pick instead, same workloads,
same data, each workload in a process of its own (kfuse and its peers in one: ``_isolated``).

Workloads (issue 17): the NSTREAM loop, BabelStream, the Gaussian log-likelihood chain (element-wise operations ending
in a sum), GaussianNB's prediction and NPBench's mvt. kfuse runs the repository's own code for each (examples/nstream.py
and babelstream.py's loops, benchmarks/bench_array_api.py's chain as array operations, examples/gaussian_nb_array.py's
model, examples/npbench/mvt.py's kernels, on a GPU its GPU-shaped ones), fused and eager. The peers run one array-code
version per workload, written once for any NumPy-like module ``xp`` (NPBench's NumPy mvt as it is): on a GPU space CuPy
as it is, torch under ``torch.compile`` and JAX under ``jax.jit`` (float64), each when it is installed and sees a GPU
(else the JSON says why it is missing); on a host space NumPy. Every run ends with its results computed on the device
(kfuse: ``pk.fence()``, which copies nothing back; peers: their synchronize). Median of at least ``repeat`` runs after
a warm-up that compiles, and of enough runs to fill ``measure.SAMPLE_S`` (up to ``measure.MOST_REPEATS``) except under
``--smoke``: a sub-millisecond workload's median of 7 moved by up to 45% between two timings of one peer's same code
on one host (torch.compile's GaussianNB, 0.100 and 0.145 ms, stop 47); kfuse's first run is checked against NumPy
running the peers' array code on the same inputs (``checks``; the command fails if one differs).
"""
from __future__ import annotations

import functools
import json
import math
import multiprocessing
import re
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

import kfuse as pk

from .. import config, spaces
from . import numpy_refs, report, subjects
from .measure import SAMPLE_S, repeats_for, until_settled

ITERATIONS = 50  # NSTREAM
BABEL_ITERATIONS = 10
#: elements (or rows) per workload: on a GPU, the issue's sizes; on the host, small ones; smoke: tiny
SIZES = {"gpu": {"nstream": 1 << 25, "babelstream": 1 << 25, "gaussian": 1 << 26, "gaussian_nb": "medium",
                 "gaussian_nb_kernels": "medium", "mvt": 5000},
         "host": {"nstream": 1 << 20, "babelstream": 1 << 20, "gaussian": 1 << 22, "gaussian_nb": "small",
                  "gaussian_nb_kernels": "small", "mvt": 1000},
         "smoke": {"nstream": 4096, "babelstream": 4096, "gaussian": 4096, "gaussian_nb": "small",
                   "gaussian_nb_kernels": "small", "mvt": 64}}


# --- the peers ------------------------------------------------------------------------------------------------
@dataclass
class Peer:
    """An array library: ``asarray`` puts a NumPy array where it computes, ``compile`` gives a function as the
    library runs it best, ``sync`` waits until a result is computed."""

    name: str
    xp: object
    asarray: Callable
    compile: Callable
    sync: Callable


def _cupy() -> Peer:
    import cupy

    cupy.cuda.runtime.getDeviceCount()  # raises without a usable GPU
    return Peer("cupy", cupy, cupy.asarray, lambda fn: fn, lambda _: cupy.cuda.Device().synchronize())


def _torch() -> Peer:
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("torch sees no CUDA device")
    return Peer("torch_compile", torch, lambda a: torch.from_numpy(a).cuda(), torch.compile,
                lambda _: torch.cuda.synchronize())


def _jax() -> Peer:
    config.put_foreign_default("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # else JAX takes 75% of the GPU's memory
    import jax

    jax.config.update("jax_enable_x64", True)  # the workloads are float64, as kfuse's
    if not any(d.platform == "gpu" for d in jax.devices()):
        raise RuntimeError("jax sees no GPU")
    return Peer("jax", jax.numpy, jax.device_put, jax.jit, jax.block_until_ready)


def find_peers(on_gpu: bool) -> tuple[list, dict]:
    """The peers that can run here, and for each missing one why (``{name: reason}``)."""
    if not on_gpu:
        return [Peer("numpy", np, np.asarray, lambda fn: fn, lambda _: None)], {}
    found, missing = [], {}
    for name, make in (("cupy", _cupy), ("torch_compile", _torch), ("jax", _jax)):
        try:
            found.append(make())
        except Exception as exc:  # ImportError, no device, a broken install: reported, never faked
            missing[name] = f"{type(exc).__name__}: {exc}"
    return found, missing


# --- the workloads as array code, for any NumPy-like module xp -------------------------------------------------
def nstream_xp(xp, A, B, C):
    SCALAR = subjects.import_example("examples.nstream", "SCALAR").SCALAR
    for _ in range(ITERATIONS):
        A = A + B + SCALAR * C
    return A


def babelstream_xp(xp, a, b, c):
    SCALAR = subjects.import_example("examples.babelstream", "SCALAR").SCALAR
    sums = []
    for _ in range(BABEL_ITERATIONS):
        c = a + 0.0  # copy (the libraries spell a copy differently; this moves the same bytes)
        b = SCALAR * c
        c = a + b
        a = b + SCALAR * c
        sums.append(xp.sum(a * b))
    return a, b, c, sums


def gaussian_xp(xp, x, mu, var):
    return xp.sum(-0.5 * xp.log(2 * math.pi * var) - (x - mu) ** 2 / (2 * var))


def gaussian_nb_xp(xp, X, theta, var, log_prior):
    """GaussianNB's joint log likelihood of every sample and class, and the most likely class."""
    jll = log_prior - 0.5 * xp.log(2.0 * math.pi * var).sum(-1) - 0.5 * ((X[:, None, :] - theta) ** 2 / var).sum(-1)
    return jll.argmax(-1)


def mvt_xp(xp, A, x1, x2, y1, y2):
    return numpy_refs.mvt(A, x1, x2, y1, y2)


# --- the same workloads in kfuse: size -> (go, the peers' inputs, go captured or None); go() returns what the
# array code returns; go captured runs the same code through ``pk.capture`` (kfuse/capturing.py), as the peers
# compile theirs, where it is a function of Views and constants (GaussianNB's prediction from its model's Views)
def _nstream(n):
    nstream = subjects.import_example("examples.nstream", "iterate")
    A, B, C = np.zeros(n), np.full(n, 2.0), np.full(n, 2.0)
    views = [pk.array(a.copy()) for a in (A, B, C)]
    iterate = pk.capture(nstream.iterate)

    def go():
        nstream.iterate(*views, ITERATIONS)
        return views[0]

    def go_captured():
        iterate(*views, ITERATIONS)
        return views[0]
    return go, (A, B, C), go_captured


def _babelstream(n):
    bs = subjects.import_example("examples.babelstream", "iterate")
    arrays = (np.full(n, bs.START_A), np.full(n, bs.START_B), np.full(n, bs.START_C))
    views = [pk.array(a.copy()) for a in arrays]
    iterate = pk.capture(bs.iterate)
    return (lambda: (*views, bs.iterate(*views, BABEL_ITERATIONS)), arrays,
            lambda: (*views, iterate(*views, BABEL_ITERATIONS)))


def _gaussian(n):
    benchmarks = str(subjects.ROOT / "benchmarks")
    if benchmarks not in sys.path:
        sys.path.insert(0, benchmarks)
    from bench_array_api import gaussian_ops

    rng = np.random.default_rng(0)
    arrays = (rng.standard_normal(n), rng.standard_normal(n), rng.uniform(0.5, 2.0, n))
    x, mu, var = (pk.array(a.copy()) for a in arrays)
    captured = pk.capture(gaussian_ops)
    return lambda: float(gaussian_ops(x, mu, var)), arrays, lambda: float(captured(x, mu, var))


def _gaussian_nb(size, example: str = "examples.gaussian_nb_array"):
    """GaussianNB's prediction: scikit-learn's per-class array statements (``gaussian_nb``), or the hand-written
    kernels of examples/gaussian_nb.py, one thread per sample and class (``gaussian_nb_kernels``)."""
    data = subjects.import_example("examples.gaussian_nb", "SIZES", "make_data")
    nb = subjects.import_example(example, "GaussianNB", "most_likely")
    n_train, n_test, features, classes = data.SIZES[size]
    X, y = data.make_data(n_train + n_test, features, classes)
    model = nb.GaussianNB().fit(X[:n_train], y[:n_train])
    test = np.array(X[n_train:])
    fitted = (np.asarray(model.theta_).copy(), np.asarray(model.var_).copy(), np.log(np.asarray(model.class_prior_)))
    on_device = pk.array(test.copy())  # made once, as each peer's own array is: its data stay on the GPU
    captured = pk.capture(nb.most_likely)  # the model's prediction as a function of its fitted Views
    return (lambda: nb.most_likely(on_device, model.theta_, model.var_, model.class_prior_), (test, *fitted),
            lambda: captured(on_device, model.theta_, model.var_, model.class_prior_))


def _mvt(n):
    """On a GPU the example's GPU-shaped kernels (a team per row; blocks of rows with atomics): the peers' BLAS
    products are shaped for the card too. On the host, NPBench's thread per entry."""
    mvt = subjects.import_example("examples.npbench.mvt", "add_matvec", "add_matvec_transposed", "mvt_gpu")
    rng = np.random.default_rng(11)
    arrays = (rng.random((n, n)), rng.random(n), rng.random(n), rng.random(n), rng.random(n))
    A, x1, x2, y1, y2 = (pk.array(a.copy()) for a in arrays)
    on_gpu = spaces.on_device(pk.get_default_space().value)

    def products(A, x1, x2, y1, y2, n):
        if on_gpu:
            mvt.mvt_gpu(A, x1, x2, y1, y2, n)
        else:
            pk.parallel_for(n, mvt.add_matvec, x=x1, A=A, y=y1, n=n)
            pk.parallel_for(n, mvt.add_matvec_transposed, x=x2, A=A, y=y2, n=n)
        return x1, x2
    captured = pk.capture(products)
    return lambda: products(A, x1, x2, y1, y2, n), arrays, lambda: captured(A, x1, x2, y1, y2, n)


#: in the order they run: fewest kernels to compile first (with nvcc, about 7 s each)
WORKLOADS = {"nstream": (_nstream, nstream_xp), "babelstream": (_babelstream, babelstream_xp), "mvt": (_mvt, mvt_xp),
             "gaussian": (_gaussian, gaussian_xp), "gaussian_nb": (_gaussian_nb, gaussian_nb_xp),
             "gaussian_nb_kernels": (functools.partial(_gaussian_nb, example="examples.gaussian_nb"), gaussian_nb_xp)}


# --- timing ---------------------------------------------------------------------------------------------------
def median_ms(run: Callable, repeat: int, sample: bool = True) -> float:
    """Median ms of ``run`` over ``repeat`` timed runs, and with ``sample`` as many more as ``repeats_for`` asks
    from their median (enough to fill SAMPLE_S, at most MOST_REPEATS)."""
    def timed() -> float:
        start = time.perf_counter()
        run()
        return time.perf_counter() - start
    run()  # warm-up: compiles, allocates
    times = [timed() for _ in range(repeat)]
    if sample:
        times += [timed() for _ in range(repeats_for(repeat, statistics.median(times)) - repeat)]
    return statistics.median(times) * 1e3


def _kfuse_ms(go: Callable, fused: bool, repeat: int, sample: bool) -> float:
    """Median ms of ``go`` and a ``pk.fence()``; fused, after runs until nothing is being timed for profitability
    (measure.until_settled), so the timed runs follow settled decisions (and are rerun, kfuse/rerun.py)."""
    def run():
        go()
        pk.fence()  # everything computed; nothing copied back
    if fused:
        pk.enable_fusion()
    try:
        if fused:
            until_settled(run)
        return median_ms(run, repeat, sample)
    finally:
        pk.disable_fusion()


def _leaves(result) -> list:
    if isinstance(result, (tuple, list)):
        return [leaf for part in result for leaf in _leaves(part)]
    return [np.asarray(pk.value(result) if isinstance(result, pk.Future) else result, dtype=np.float64)]


def check(go: Callable, want) -> str:
    """"PASS" when kfuse's first run (fused, from the inputs the peers get) gives NumPy's results, else how not
    (sums may add in another order: 1e-10 relative)."""
    pk.enable_fusion()
    try:
        got = _leaves(go())
    finally:
        pk.disable_fusion()
    want = _leaves(want)
    for k, (g, w) in enumerate(zip(got, want)):
        if g.shape != w.shape or not np.allclose(g, w, rtol=1e-10, atol=0.0):
            return f"output {k} differs from NumPy's (largest difference {float(np.abs(g - w).max()):.3g})"
    return "PASS" if len(got) == len(want) else f"{len(got)} outputs, NumPy has {len(want)}"


def _peer_ms(peer: Peer, array_code: Callable, arrays: tuple, repeat: int, sample: bool) -> float:
    fn = peer.compile(functools.partial(array_code, peer.xp))
    inputs = [peer.asarray(np.ascontiguousarray(a)) for a in arrays]
    return median_ms(lambda: peer.sync(fn(*inputs)), repeat, sample)


def card() -> str:
    """A short name for the GPU ("h100", "h200"), or "cpu"."""
    name = (report.machine().get("gpu") or "").split(";")[0]
    match = re.search(r"\b([A-Z]{1,2}\d{2,4})\b", name)
    return match.group(1).lower() if match else ("gpu" if name else "cpu")


def measure(repeat: int, smoke: bool = False, names=None, save: Callable = lambda data: None) -> dict:
    """``{"card", "space", "peers", "missing", "checks": {name: "PASS" or why not}, "workloads": {name:
    {"kfuse_fused_ms", "kfuse_eager_ms", "<peer>_ms", ...}}, "repeat", "sample_s": the timed runs' least number
    and seconds (``median_ms``), "isolated": true}`` for the default space, each workload measured in a process of
    its own (``_isolated``); ``save(data)`` after each workload (a run cut short keeps what it measured)."""
    data = None
    for name in names or WORKLOADS:
        part = _isolated(repeat, smoke, name)
        if data is None:
            data = {**part, "checks": {}, "workloads": {}, "isolated": True}
        data["checks"].update(part["checks"])
        data["workloads"].update(part["workloads"])
        save(data)
    return data


def _isolated(repeat: int, smoke: bool, name: str) -> dict:
    """One workload's ``measure_here`` in a fresh Python process (spawned: no GPU context or library state comes
    along). Why: what ran before in a process moves a workload's timings. On an H200 (stop 52) kfuse's captured
    BabelStream took 0.454 ms run first in its process and 0.589 after NSTREAM's peers had run there (the cause is
    not pinned down; by then CuPy's pool and torch's allocator hold device memory). A user's program runs one
    workload."""
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(measure_here, repeat, smoke, [name]).result()


def measure_here(repeat: int, smoke: bool, names: list) -> dict:
    """``measure``'s result for ``names``, measured one after another in this process."""
    on_gpu = spaces.on_device(pk.get_default_space().value)
    sizes = SIZES["smoke" if smoke else "gpu" if on_gpu else "host"]
    found, missing = find_peers(on_gpu)
    sample = not smoke
    data = {"card": card() if on_gpu else "cpu", "space": pk.get_default_space().value, "repeat": repeat,
            "sample_s": SAMPLE_S if sample else 0.0, "sizes": sizes, "peers": [p.name for p in found],
            "missing": missing, "checks": {}, "workloads": {}}
    for name in names:
        make, array_code = WORKLOADS[name]
        go, arrays, go_captured = make(sizes[name])
        data["checks"][name] = check(go, array_code(np, *arrays))
        row = {"kfuse_fused_ms": _kfuse_ms(go, True, repeat, sample),
               "kfuse_eager_ms": _kfuse_ms(go, False, repeat, sample)}
        if go_captured is not None:
            row["kfuse_captured_ms"] = _kfuse_ms(go_captured, True, repeat, sample)
        for peer in found:
            row[f"{peer.name}_ms"] = _peer_ms(peer, array_code, arrays, repeat, sample)
        data["workloads"][name] = row
        print(f"[bench] {name}: " + ", ".join(f"{k} {v:.3f}" for k, v in row.items()), file=sys.stderr, flush=True)
    return data


def markdown(data: dict) -> str:
    columns = ["kfuse_fused_ms", "kfuse_captured_ms", "kfuse_eager_ms"] + [f"{p}_ms" for p in data["peers"]]
    runs = f"at least {data['repeat']} runs filling {data['sample_s']} s" if data.get("sample_s") else data["repeat"]
    lines = [f"# kfuse and its peers ({data['card']}, space {data['space']}, median of {runs}, ms)", "",
             "| workload | " + " | ".join(c[:-3] for c in columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for name, row in data["workloads"].items():
        lines.append(f"| {name} | " + " | ".join(f"{row[c]:.3f}" if c in row else "-" for c in columns) + " |")
    for name, verdict in data["checks"].items():
        if verdict != "PASS":
            lines.append(f"\n{name}: kfuse's result is WRONG: {verdict}")
    for peer, why in data["missing"].items():
        lines.append(f"\n{peer}: missing ({why})")
    return "\n".join(lines) + "\n"


def main(repeat: int, smoke: bool, json_path: str | None, names=None) -> int:
    on_gpu = spaces.on_device(pk.get_default_space().value)
    path = Path(json_path or subjects.ROOT / "bench_results" / (f"gpu_{card()}_peers.json" if on_gpu else
                                                                "cpu_peers.json"))
    path.parent.mkdir(parents=True, exist_ok=True)
    data = measure(repeat, smoke, names, lambda data: path.write_text(json.dumps(data, indent=1) + "\n"))
    sys.stdout.write(markdown(data))
    print(f"[bench] wrote {path}", file=sys.stderr)
    return 0 if all(v == "PASS" for v in data["checks"].values()) else 1
