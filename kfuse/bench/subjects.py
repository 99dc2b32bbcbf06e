"""The benchmark subjects: one small adapter per example, all with the same shape.

``Subject.prepare(size)`` makes the inputs once and returns ``go()``, which runs the subject under
whatever fusion mode is set globally and returns its end-to-end seconds (the example's own timer when
it has one, else wall time of the call). NPBench subjects also give a NumPy baseline on the same inputs.
A subject whose example is missing, or lacks the function we call, is skipped with the reason.
"""
from __future__ import annotations

import importlib
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from . import fig2, numpy_refs

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
NPBENCH = ("adi", "covariance", "fdtd_2d", "jacobi_1d", "mvt", "syrk", "syr2k")
#: the same subjects as one kernel per NumPy statement (examples/npbench/<name>_statements.py), as PyKokkos ports
NPBENCH_STATEMENTS = tuple(f"{name}_statements" for name in NPBENCH)
ORDER = ("paper_fig2", "babelstream", "gups", "gups_atomic", "nstream", "transpose", *NPBENCH, *NPBENCH_STATEMENTS,
         "gaussian_nb", "examinimd")
#: transform sets of the ablation, in the order the manager runs them
ABLATION = (("none", "none"), ("args", "args"), ("args+loops", "args,loops"),
            ("args+loops+restrict", "args,loops,restrict"), ("all", "all"))


@dataclass
class Subject:
    name: str
    prepare: Callable  # size -> go() -> seconds
    numpy: Callable | None = None  # size -> (go() -> seconds)
    check: Callable | None = None  # size -> error message or None (kfuse result vs NumPy, run under current mode)
    ablation: bool = False


def _path() -> None:
    for p in (str(ROOT), str(EXAMPLES)):
        if p not in sys.path:
            sys.path.insert(0, p)


def import_example(name: str, *needs: str):
    """The example module (examples/ and the repository root on sys.path), checked for the functions we call."""
    _path()
    mod = importlib.import_module(name)
    missing = [f for f in needs if not hasattr(mod, f)]
    if missing:
        raise AttributeError(f"{name} has no {', '.join(missing)}")
    return mod


# --- adapters ----------------------------------------------------------------------------------------
#: smoke sizes: tiny, but every kernel still runs
_SMOKE = {"babelstream": {"n": 4096, "iterations": 2}, "gups": {"log_size": 10, "batches": 2},
          "nstream": {"n": 4096, "iterations": 5}, "transpose": {"order": 32, "iterations": 3},
          "gaussian_nb": {"n_train": 300, "n_test": 200, "features": 4, "classes": 3}}
_MD = {"smoke": (3, 4), "small": (4, 20), "medium": (6, 40), "large": (10, 100)}  # cells, steps


def _example(module: str, **fixed):
    def make() -> Subject:
        mod = import_example(module, "run")

        def prepare(size):
            kw = dict(fixed, **_SMOKE.get(module, {})) if size == "smoke" else dict(fixed, size=size)
            return lambda: float(mod.run(**kw)["seconds"])
        return prepare
    return make


#: the sizes the statement subjects run at: their loops launch a kernel per NumPy statement (syrk: per row and k),
#: so at the hand-fused examples' medium size a run is 150,000-300,000 launches; they run one size down
_ONE_SIZE_DOWN = {"medium": "small", "large": "medium"}


def npbench_name(subject: str) -> str:
    """The NPBench subject a subject runs ('adi' for 'adi' and 'adi_statements'): its NumPy baseline and paper rows."""
    return subject.removesuffix("_statements")


def _npbench(module: str):
    """examples/npbench/<module>.py, timed and checked against NumPy's version of its NPBench subject."""
    def make():
        mod = import_example(f"examples.npbench.{module}", "initialize", "run_kfuse")
        ref = getattr(numpy_refs, npbench_name(module))

        def sized(size):
            if module in NPBENCH_STATEMENTS:  # a kernel per (row, k) pair: 300,000 launches a run at medium
                size = _ONE_SIZE_DOWN.get(size, size)
            return mod.initialize("small" if size == "smoke" else size)

        def prepare(size):
            inputs = sized(size)
            return lambda: _timed(mod.run_kfuse, inputs)

        def numpy(size):
            inputs = sized(size)
            return lambda: _timed(ref, inputs)

        def check(size):
            inputs = sized(size)
            got, want = mod.run_kfuse(**inputs), ref(**inputs)
            got, want = (got if isinstance(got, tuple) else (got,)), (want if isinstance(want, tuple) else (want,))
            for k, (g, w) in enumerate(zip(got, want)):
                if not np.allclose(g, w, rtol=1e-8, atol=1e-12 * max(1.0, float(np.abs(w).max()))):
                    return f"output {k} differs from NumPy (max abs diff {float(np.abs(g - w).max()):.3g})"
            return None
        return prepare, numpy, check
    return make


def _timed(fn, inputs) -> float:
    start = time.perf_counter()
    fn(**inputs)
    return time.perf_counter() - start


def _examinimd():
    mod = import_example("examinimd", "run_simulation")

    def prepare(size):
        cells, steps = _MD[size]

        def go():
            start = time.perf_counter()
            mod.run_simulation(None, cells=cells, steps=steps)
            return time.perf_counter() - start
        return go
    return prepare


def _fig2():
    def prepare(size):
        A, B, C, pairs = fig2.make(size)
        return lambda: _timed(fig2.run, {"A": A, "B": B, "C": C, "pairs": pairs})

    def check(size):
        A, B, C, pairs = fig2.make(size)
        fig2.run(A, B, C, 1)
        ok = np.allclose(np.array(C), fig2.reference(np.array(B)), rtol=1e-14)
        return None if ok else "C differs from (S + B) * B"
    return prepare, check


def load(name: str) -> Subject:
    """The subject, or an exception saying why it cannot run (missing example or function)."""
    if name == "paper_fig2":
        prepare, check = _fig2()
        return Subject(name, prepare, check=check, ablation=True)
    if name in NPBENCH or name in NPBENCH_STATEMENTS:
        prepare, numpy, check = _npbench(name)()
        return Subject(name, prepare, numpy=numpy, check=check)
    if name == "examinimd":
        return Subject(name, _examinimd())
    makers = {"babelstream": _example("babelstream"), "gups": _example("gups"),
              "gups_atomic": _example("gups", atomic=True), "nstream": _example("nstream"),
              "transpose": _example("transpose"), "gaussian_nb": _example("gaussian_nb")}
    if name not in makers:
        raise KeyError(f"unknown subject '{name}' (choose from {', '.join(ORDER)})")
    return Subject(name, makers[name](), ablation=name == "nstream")
