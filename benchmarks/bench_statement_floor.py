"""The floor under array code that issues one NumPy statement per loop iteration, for any Python layer above NumPy.

NPBench's syrk, syr2k and adi (and covariance, jacobi_1d) are loops of small NumPy statements; a layer between the
program and NumPy (kfuse's array operations) adds Python to every statement. This script runs each subject's array
code (examples/npbench/*_array.py, unchanged) against three stand-ins for ``kfuse``, same inputs, one process:

- ``thin``: an array wrapper with no checks, no tracing and no fusion: slicing wraps NumPy's slice, each operation
  unwraps its operands and calls the NumPy ufunc (``out=`` as given). The least any wrapping layer can cost.
- ``record``: a layer that computes nothing: each operation appends a tuple to a list and returns a new wrapper
  (results are wrong: it only prices recording the statements, the least a deferring, fusing layer can cost
  before it runs a single kernel).
- ``kfuse``: kfuse's array operations, fused.

Each time is over NumPy's (NPBench's own kernel). Where ``thin`` or ``record`` is above 1.00, no layer of that kind
can make the subject as fast as NumPy: the statements are too small for their work to pay for one Python call.

    KFUSE_NUM_THREADS=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_statement_floor.py \
        [--subjects syrk,syr2k,adi,covariance,jacobi_1d] [--size small|medium] [--npbench-inputs] [--without-kfuse] \
        [--repeats 7]
"""
from __future__ import annotations

import argparse
import importlib
import os
import statistics
import sys
import time
import types
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the examples are imported as a package from the repository root
sys.path.insert(0, str(ROOT / "benchmarks"))

import kfuse as pk  # noqa: E402
from bench_array_api import REDUCED  # noqa: E402 - the statement-per-pair subjects' inputs, as that bench runs them
from examples.npbench import common  # noqa: E402


class Wrapped:
    """An ndarray behind an attribute: the one indirection every wrapping layer has."""

    __slots__ = ("a",)

    def __init__(self, a):
        self.a = a

    def __getitem__(self, index):
        item = self.a[index]
        return Wrapped(item) if type(item) is np.ndarray else item

    def __array__(self, dtype=None, copy=None):
        return self.a

    @property
    def shape(self):
        return self.a.shape


def _raw(x):
    return x.a if type(x) is Wrapped else x


def _thin_binary(ufunc):
    def op(x, y, out=None):
        if out is None:
            return Wrapped(ufunc(_raw(x), _raw(y)))
        ufunc(_raw(x), _raw(y), out=out.a)
        return out
    return op


def _thin() -> types.SimpleNamespace:
    def copyto(dst, src):
        np.copyto(dst.a, _raw(src))

    def fill(view, value):
        view.a.fill(value)

    def matmul(x, y, out=None):
        return _thin_binary(np.matmul)(x, y, out)

    return types.SimpleNamespace(
        from_numpy=lambda a: Wrapped(a), zeros=lambda shape: Wrapped(np.zeros(shape)),
        add=_thin_binary(np.add), subtract=_thin_binary(np.subtract), multiply=_thin_binary(np.multiply),
        divide=_thin_binary(np.divide), matmul=matmul, copyto=copyto, fill=fill,
        mean=lambda v, axis=None: Wrapped(np.mean(v.a, axis=axis)), fence=lambda: None)


def _record() -> tuple[types.SimpleNamespace, list]:
    log: list = []

    def binary(name):
        def op(x, y, out=None):
            result = Wrapped(None) if out is None else out
            log.append((name, x, y, result))
            return result
        return op

    def copyto(dst, src):
        log.append(("copyto", dst, src))

    def fill(view, value):
        log.append(("fill", view, value))

    def mean(view, axis=None):
        log.append(("mean", view, axis))
        return Wrapped(None)

    class Recorded(Wrapped):
        """Slices of the inputs are real (the scalar reads ``A[i, k]`` need numbers); results are placeholders."""

        __slots__ = ()

        def __getitem__(self, index):
            if self.a is None:
                return Recorded(None)
            item = self.a[index]
            return Recorded(item) if type(item) is np.ndarray else item

        def __array__(self, dtype=None, copy=None):
            return np.zeros(1) if self.a is None else self.a

    namespace = types.SimpleNamespace(
        from_numpy=lambda a: Recorded(a), zeros=lambda shape: Recorded(np.zeros(shape)),
        add=binary("add"), subtract=binary("subtract"), multiply=binary("multiply"), divide=binary("divide"),
        matmul=binary("matmul"), copyto=copyto, fill=fill, mean=mean, fence=log.clear)
    return namespace, log


def _with_layer(module, layer):
    """``module.run_array`` with ``pk`` (there and in examples/npbench/common.py's ``results``) standing for
    ``layer``."""
    def run(**inputs):
        saved = module.pk, common.pk
        module.pk = common.pk = layer
        try:
            return module.run_array(**inputs)
        finally:
            module.pk, common.pk = saved
    return run


def _fused(run):
    def go(**inputs):
        with pk.fusion():
            return run(**inputs)
    return go


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subjects", default="syrk,syr2k,adi,covariance,jacobi_1d")
    parser.add_argument("--size", default="small", choices=("small", "medium"),
                        help="NPBench inputs of the subjects not in bench_array_api.py's REDUCED")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--npbench-inputs", action="store_true",
                        help="NPBench's inputs of --size for syrk, syr2k and adi too (bench_array_api.py reduces them)")
    parser.add_argument("--without-kfuse", action="store_true", help="time NumPy, thin and record only")
    args = parser.parse_args(argv)
    print(f"load average {os.getloadavg()[0]:.2f}; medians of {args.repeats} runs, variants taking turns; "
          "time over NumPy's")
    print(f"{'subject':12s} {'NumPy ms':>9s} {'thin':>6s} {'record':>7s} {'kfuse':>6s}  statements")
    for name in args.subjects.split(","):
        array = importlib.import_module(f"examples.npbench.{name}_array")
        hand = importlib.import_module(f"examples.npbench.{name}")
        inputs = REDUCED[name]() if name in REDUCED and not args.npbench_inputs else hand.initialize(args.size)
        recorder, log = _record()
        variants = {"numpy": array.run_numpy, "thin": _with_layer(array, _thin()),
                    "record": _with_layer(array, recorder)}
        if not args.without_kfuse:
            variants["kfuse"] = _fused(array.run_array)
        reference = array.run_numpy(**inputs)
        thin = variants["thin"](**inputs)
        for got, want in zip(thin if isinstance(thin, tuple) else (thin,),
                             reference if isinstance(reference, tuple) else (reference,)):
            assert np.allclose(np.asarray(got), want), f"{name}: the thin layer's result differs from NumPy's"
        saved_fence, recorder.fence = recorder.fence, lambda: None
        variants["record"](**inputs)
        statements = len(log)
        recorder.fence = saved_fence
        for run in variants.values():
            run(**inputs)  # warm-up: kfuse compiles or loads its kernels
        times = {label: [] for label in variants}
        for _ in range(args.repeats):
            for label, run in variants.items():
                start = time.perf_counter()
                run(**inputs)
                times[label].append(time.perf_counter() - start)
        median = {label: statistics.median(t) for label, t in times.items()}
        base = median["numpy"]
        kfuse = f"{median['kfuse'] / base:6.2f}" if "kfuse" in median else f"{'-':>6s}"
        print(f"{name:12s} {base * 1e3:9.3f} {median['thin'] / base:6.2f} {median['record'] / base:7.2f} {kfuse}  "
              f"{statements}")


if __name__ == "__main__":
    main()
