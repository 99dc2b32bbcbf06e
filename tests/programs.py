"""Small kernel programs run in several execution modes, for differential tests of the tracer (and fuser).

A *program* is a list of steps over a fixed set of named arrays: kernel calls from a small workunit
library, reductions whose results feed later calls, host reads and host writes through every View
access path, and re-allocation of an array. :func:`run_program` runs it in one mode and returns what the
host observed (every read, every scalar use, the final arrays), so two modes can be compared exactly:
every mode runs the same kernels in the same order, so results must be bit-identical.

Memory aliasing is part of the fixture: ``lo``/``hi`` are subviews of ``a``; ``d`` and ``d2`` are two
Views over one NumPy buffer, which kernels may also receive directly as the NumPy array ``buf``.

Modes live in :data:`MODES` (name -> context manager around a run); add fusing variants there and every
differential test picks them up.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np

import kfuse as pk

N = 32  # length of the 1-D arrays
K = 4  # columns of the 2-D array M (rows: N)


# --- the workunit library (module level: one specialisation each, compiled once per cache) --------------
@pk.workunit
def k_scale(i: int, x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    y[i] = 0.5 * x[i] + 1.0


@pk.workunit
def k_axpy(i: int, alpha: float, x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    y[i] = 0.5 * (y[i] + x[i] / (1.0 + pk.fabs(alpha)))


@pk.workunit
def k_stencil(i: int, x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    n: int = x.extent(0)
    left: float = x[i]
    right: float = x[i]
    if i > 0:
        left = x[i - 1]
    if i + 1 < n:
        right = x[i + 1]
    y[i] = (left + x[i] + right) / 3.0


@pk.workunit
def k_sin(i: int, x: pk.View1D[pk.double]):
    x[i] = pk.sin(x[i]) + 0.25


@pk.workunit
def k_dot(i: int, acc: pk.Acc[pk.double], x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    acc += x[i] * y[i]


@pk.workunit
def k_rowsum(i: int, m: pk.View2D[pk.double], out: pk.View1D[pk.double]):
    s: float = 0.0
    for j in range(m.extent(1)):
        s += m[i][j]
    out[i] = s / m.extent(1)


@pk.workunit
def k_rank1(i: int, x: pk.View1D[pk.double], y: pk.View1D[pk.double], m: pk.View2D[pk.double]):
    for j in range(m.extent(1)):
        m[i][j] = 0.5 * m[i][j] + x[i] * y[j]


@pk.workunit
def k_scan(i: int, acc: pk.Acc[pk.double], last_pass: bool, x: pk.View1D[pk.double], y: pk.View1D[pk.double]):
    acc += x[i]
    if last_pass:
        y[i] = acc / (i + 1)


#: name -> (workunit, op, View parameter names in order, takes the scalar ``alpha``)
KERNELS = {
    "scale": (k_scale, "for", ("x", "y"), False),
    "axpy": (k_axpy, "for", ("x", "y"), True),
    "stencil": (k_stencil, "for", ("x", "y"), False),
    "sin": (k_sin, "for", ("x",), False),
    "rowsum": (k_rowsum, "for", ("m", "out"), False),
    "rank1": (k_rank1, "for", ("x", "y", "m"), False),
    "dot": (k_dot, "reduce", ("x", "y"), False),
    "scan": (k_scan, "scan", ("x", "y"), False),
}

ONE_D = ("a", "b", "c", "lo", "hi", "d", "d2", "buf")
#: arrays that share memory (kernels must not read a neighbour of an element another thread writes)
GROUPS = {"a": "a", "lo": "a", "hi": "a", "d": "d", "d2": "d", "buf": "d", "b": "b", "c": "c", "M": "M"}
HOST_NAMES = ("a", "b", "c", "lo", "hi", "d", "d2", "M")  # names the host reads/writes through (Views)


# --- program steps -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Call:
    """A kernel call; ``arrays`` maps the kernel's View parameters to array names; ``alpha`` is a number or
    ``("r", k)``: the k-th reduction/scan result of the program."""

    kernel: str
    arrays: tuple
    alpha: object = None


@dataclass(frozen=True)
class Read:
    name: str
    how: str  # see READS


@dataclass(frozen=True)
class Write:
    name: str
    how: str  # see WRITES
    value: float
    at: int = 0


@dataclass(frozen=True)
class UseResult:
    """A host use of the k-th reduction/scan result."""

    k: int
    how: str  # see USES


@dataclass(frozen=True)
class Realloc:
    """Drop an array and make a fresh one under the same name (its old pending work must not leak)."""

    name: str


def _read_slice(v):
    return np.array(v[1:5] if v.ndim == 1 else v[1:3])  # a slice shares the View's memory: keep a copy


READS = {
    "asarray": lambda v: np.asarray(v).copy(),
    "item": lambda v: v[3] if v.ndim == 1 else v[3, 1],
    "slice": _read_slice,
    "iter": lambda v: [np.asarray(row).copy() for row in v] if v.ndim > 1 else list(v),
    "repr": repr,
    "str": str,
    "copy": lambda v: v.copy(),
    "npsum": np.sum,
    "tolist": lambda v: v.tolist(),
}


def _write_setitem(v, value, at):
    if v.ndim == 1:
        v[at % v.shape[0]] = value
    else:
        v[at % v.shape[0], at % v.shape[1]] = value


def _write_slice(v, value, at):
    start = at % v.shape[0]
    v[start:start + 3] = value


def _write_asarray(v, value, at):
    np.asarray(v).reshape(-1)[at % v.size] = value


WRITES = {
    "setitem": _write_setitem,
    "slice": _write_slice,
    "fill": lambda v, value, at: v.fill(value),
    "asarray": _write_asarray,
}

USES = {
    "float": float,
    "int": int,
    "bool": bool,
    "add": lambda r: r + 1.5,
    "radd": lambda r: 1.5 + r,
    "rsub": lambda r: 10.0 - r,
    "mul": lambda r: r * 3,
    "rtruediv": lambda r: 1.0 / (1.0 + abs(r)),
    "neg": lambda r: -r,
    "cmp": lambda r: (r > 0.5, r <= 2.0, r == r, r != 0),
    "format": lambda r: f"{r:.3f}",
    "np_float64": np.float64,
    "np_sqrt": lambda r: np.sqrt(abs(r)),
    "np_array": lambda r: np.array([r, 2 * r]),
    "round": lambda r: round(r, 2),
}


# --- running --------------------------------------------------------------------------------------------
def make_arrays() -> dict:
    """Fresh arrays with distinct, deterministic contents (the same in every mode)."""
    a = pk.View(N)
    a[:] = np.linspace(-1.0, 1.0, N)
    b = pk.View(N)
    b[:] = np.cos(np.arange(N))
    c = pk.View(N)
    c[:] = 0.1 * np.arange(N)
    buf = np.sin(np.arange(N) * 0.3) + 0.5
    m = pk.View((N, K))
    m[:] = np.arange(N * K).reshape(N, K) / (N * K)
    return {"a": a, "b": b, "c": c, "lo": a.subview(slice(0, N // 2)), "hi": a.subview(slice(N // 2, N)),
            "buf": buf, "d": pk.array(buf), "d2": pk.array(buf), "M": m}


def _range(views) -> int:
    return min(v.shape[0] for v in views)


def _call(step: Call, arrays: dict, results: list):
    wu, op, params, scalar = KERNELS[step.kernel]
    views = [arrays[n] for n in step.arrays]
    kwargs = dict(zip(params, views))
    if scalar:
        alpha = step.alpha
        kwargs["alpha"] = results[alpha[1]] if isinstance(alpha, tuple) else alpha
    n = _range(views)
    if op == "for":
        pk.parallel_for(n, wu, **kwargs)
    elif op == "reduce":
        results.append(pk.parallel_reduce(n, wu, **kwargs))
    else:
        results.append(pk.parallel_scan(n, wu, **kwargs))


def _fresh(name: str, arrays: dict) -> None:
    if name == "M":
        m = pk.View((N, K))
        m[:] = 0.25
        arrays["M"] = m
    else:
        v = pk.View(N)
        v[:] = np.arange(N) * -0.05
        arrays[name] = v


def execute(program, arrays: dict) -> list:
    """Run ``program`` on ``arrays`` in whatever mode is active; returns the host's observations in order."""
    results: list = []
    seen: list = []
    for step in program:
        if isinstance(step, Call):
            _call(step, arrays, results)
        elif isinstance(step, Read):
            seen.append(("read", step.name, step.how, READS[step.how](arrays[step.name])))
        elif isinstance(step, Write):
            WRITES[step.how](arrays[step.name], step.value, step.at)
        elif isinstance(step, UseResult):
            seen.append(("use", step.k, step.how, USES[step.how](results[step.k])))
        elif isinstance(step, Realloc):
            _fresh(step.name, arrays)
        else:  # pragma: no cover - a malformed test program
            raise TypeError(f"unknown step {step!r}")
    seen.extend(("result", k, float(r)) for k, r in enumerate(results))
    seen.extend(("final", name, np.asarray(arrays[name]).copy()) for name in HOST_NAMES)
    return seen


@contextlib.contextmanager
def _eager():
    if pk.fusion_enabled():
        raise RuntimeError("eager mode needs tracing off at the start")
    yield


def _tracing(fuse: bool):
    @contextlib.contextmanager
    def mode():
        pk.enable_fusion(trace_only=not fuse)
        if not pk.fusion_enabled():
            raise RuntimeError("tracing did not turn on (is KFUSE_FUSION=0 set?)")
        try:
            yield
        finally:
            pk.disable_fusion()
    return mode


#: mode name -> context manager that runs a program in that mode. Add fusing variants here; every
#: differential test compares each mode but "eager" against "eager".
MODES = {"eager": _eager, "traced": _tracing(fuse=False), "fused": _tracing(fuse=True)}


def run_program(program, mode: str) -> list:
    arrays = make_arrays()
    with MODES[mode]():
        return execute(program, arrays)


def assert_same(expected: list, got: list, context: str = "") -> None:
    """Exact equality of two observation lists (same kernels in the same order: bit-identical)."""
    assert len(expected) == len(got), f"{context}: {len(expected)} vs {len(got)} observations"
    for e, g in zip(expected, got):
        assert e[:-1] == g[:-1], f"{context}: observation {e[:-1]} vs {g[:-1]}"
        _assert_value_equal(e[-1], g[-1], f"{context}: {e[:-1]}")


def _assert_value_equal(e, g, where: str) -> None:
    if isinstance(e, (list, tuple)):
        assert isinstance(g, (list, tuple)) and len(e) == len(g), f"{where}: {e!r} vs {g!r}"
        for x, y in zip(e, g):
            _assert_value_equal(x, y, where)
        return
    if isinstance(e, np.ndarray) or isinstance(g, np.ndarray):
        e_arr, g_arr = np.asarray(e), np.asarray(g)
        assert e_arr.dtype == g_arr.dtype and e_arr.shape == g_arr.shape, f"{where}: {e_arr!r} vs {g_arr!r}"
        assert np.array_equal(e_arr, g_arr, equal_nan=e_arr.dtype.kind == "f"), \
            f"{where}: arrays differ:\n{e_arr}\n{g_arr}"
        return
    assert type(e) is type(g), f"{where}: {type(e).__name__} vs {type(g).__name__}"
    assert e == g or (e != e and g != g), f"{where}: {e!r} vs {g!r}"  # NaN only where the other has NaN
