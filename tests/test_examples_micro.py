"""The microbenchmark subjects (BabelStream, GUPS, GUPS-atomic, NSTREAM, Transpose) against NumPy.

Each subject runs eagerly and with fusion on (its calls traced inside ``pk.fusion()`` and run when the
results are read); the references below are written from the benchmarks' definitions, independently
of the subjects' kernels.
"""
import importlib.util
from pathlib import Path

import numpy as np
import pytest

import kfuse as pk
from kfuse import spaces

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"kfuse_example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


babelstream, gups, nstream, transpose = (load(n) for n in ("babelstream", "gups", "nstream", "transpose"))
# Eager runs check the program against NumPy on the reference interpreter (no compiler); fused runs compile
# every kernel, fused or left alone, so the C++ of these programs is still built and checked end to end.
MODES = pytest.mark.parametrize("fusion", [pytest.param(False, id="eager", marks=pytest.mark.backend("python")),
                                       pytest.param(True, id="fusion")])
# GUPS's 2^16 random updates take the interpreter longer than compiling them, and its racy updates are the point.
COMPILED_MODES = pytest.mark.parametrize("fusion", [False, True], ids=["eager", "fusion"])


def traced_during(fn, fusion: bool, calls: int):
    """fn's result, after checking that the tracer logged all ``calls`` kernel calls with fusion, none without."""
    before = pk.stats()["ops_traced"]
    result = fn()
    assert pk.stats()["ops_traced"] - before == (calls if fusion else 0)
    return result


# --- BabelStream ------------------------------------------------------------------------------------
def babelstream_reference(n, iterations, scalar=0.4):
    a, b, c = np.full(n, 0.1), np.full(n, 0.2), np.zeros(n)
    dots = []
    for _ in range(iterations):
        c = a.copy()
        b = scalar * c
        c = a + b
        a = b + scalar * c
        dots.append(float(np.dot(a, b)))
    return a, b, c, dots


@MODES
def test_babelstream(fusion):
    res = traced_during(lambda: babelstream.run(n=1003, iterations=4, fusion=fusion), fusion, 5 * 4)
    a, b, c, dots = babelstream_reference(1003, 4)
    np.testing.assert_allclose(res["a"], a, rtol=1e-14)
    np.testing.assert_allclose(res["b"], b, rtol=1e-14)
    np.testing.assert_allclose(res["c"], c, rtol=1e-14)
    np.testing.assert_allclose(res["dot"], dots, rtol=1e-12)


# --- GUPS ---------------------------------------------------------------------------------------------
def gups_indices(log_size, batches):
    """The table index of every update, one array per batch (one launch)."""
    size = 1 << log_size
    i = np.arange(size, dtype=np.uint64)
    for r in range(batches):
        x = np.uint64(r * size) + i
        x = x * np.uint64(6364136223846793005) + np.uint64(1442695040888963407)
        x ^= x >> np.uint64(33)
        x = x * np.uint64(3935559000370003845)
        x ^= x >> np.uint64(29)
        yield (x & np.uint64(size - 1)).astype(np.int64)


def gups_reference(log_size, batches):
    size = 1 << log_size
    table = np.arange(size, dtype=np.int64)
    for idx in gups_indices(log_size, batches):
        np.add.at(table, idx, 1 + (np.arange(size) & 7))
    return table


def test_gups_reference_is_random_access():
    """The reference really scatters: repeated indices and untouched entries, as random updates give."""
    size = 1 << 12
    table = gups_reference(12, 1)
    hits = table - np.arange(size)
    assert (hits == 0).sum() > size // 10 and (hits > 8).sum() > size // 20


@COMPILED_MODES
@pytest.mark.parametrize("log_size", [12, 16])
def test_gups_atomic_is_exact(fusion, log_size):
    res = traced_during(lambda: gups.run(log_size=log_size, batches=3, atomic=True, fusion=fusion), fusion, 2 * 3)
    np.testing.assert_array_equal(res["table"], gups_reference(log_size, 3))


@COMPILED_MODES
def test_gups_non_atomic_within_hpcc_error_bound(fusion):
    """Racy updates may be lost when two threads of one launch hit one entry at once, and only then: wrong
    entries are entries some batch updated twice or more, never above the right value. On the host, HPCC's bound
    holds too (at most 1% of the table wrong); a GPU runs every update of a batch at once and loses far more."""
    res = traced_during(lambda: gups.run(log_size=16, batches=3, fusion=fusion), fusion, 2 * 3)
    want = gups_reference(16, 3)
    wrong = res["table"] != want
    collided = np.zeros(want.size, dtype=bool)
    for idx in gups_indices(16, 3):
        collided |= np.bincount(idx, minlength=want.size) > 1
    assert not np.any(wrong & ~collided)
    assert np.all(res["table"] <= want)  # an update can be lost, never invented
    if not spaces.on_device(pk.get_default_space().value):
        assert np.count_nonzero(wrong) <= 0.01 * want.size


# --- NSTREAM ------------------------------------------------------------------------------------------
@MODES
def test_nstream(fusion):
    res = traced_during(lambda: nstream.run(n=999, iterations=7, fusion=fusion), fusion, 7)
    A, B, C = np.zeros(999), np.full(999, 2.0), np.full(999, 2.0)
    for _ in range(7):
        A += B + 3.0 * C
    np.testing.assert_array_equal(res["A"], A)


# --- Transpose ----------------------------------------------------------------------------------------
@MODES
def test_transpose(fusion):
    order, iterations = 37, 5
    res = traced_during(lambda: transpose.run(order=order, iterations=iterations, fusion=fusion), fusion,
                        iterations)
    A = np.arange(order * order, dtype=np.float64).reshape(order, order)
    B = np.zeros((order, order))
    for _ in range(iterations):
        B += A.T
        A += 1.0
    np.testing.assert_array_equal(res["A"], A)
    np.testing.assert_array_equal(res["B"], B)


@pytest.mark.parametrize("module", [babelstream, gups, nstream, transpose], ids=lambda m: m.__name__)
def test_scripts_run_from_the_command_line(module, capsys):
    assert set(module.SIZES) == {"small", "medium", "large"}
    module.main(["--size", "small", "--repeat", "1"])
    out = capsys.readouterr().out
    assert out.startswith("run 0: ") and "fusion=False" in out
