"""The NPBench subjects written as array code (examples/npbench/*_array.py): kfuse's array statements, eager and
fused, equal the NPBench NumPy kernel next to them, which itself equals the hand-written kernels' results."""
import sys
from pathlib import Path

import numpy as np
import pytest

import kfuse as pk

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # the examples are imported as a package from the repository root
    sys.path.insert(0, str(ROOT))

from examples.npbench import (adi, adi_array, covariance, covariance_array, fdtd_2d, fdtd_2d_array,  # noqa: E402
                              jacobi_1d, jacobi_1d_array, mvt, mvt_array, syr2k, syr2k_array, syrk, syrk_array)
from examples.npbench.common import random_matrix  # noqa: E402

# Eager runs interpret the kernels (no compiler); fused runs compile them, fused or left alone.
MODES = pytest.mark.parametrize("fused", [pytest.param(False, id="eager", marks=pytest.mark.backend("python")),
                                       pytest.param(True, id="fused")])

# Inputs smaller than the "small" size: the array code is one statement per grid line or per (i, k) pair.
INPUTS = {
    adi_array: lambda: {"TSTEPS": 2, "N": 10, "u": random_matrix(61, 10, 10)},
    covariance_array: lambda: {"float_n": 12.0, "data": random_matrix(41, 12, 9)},
    fdtd_2d_array: lambda: {"TMAX": 3, "ex": random_matrix(51, 7, 9), "ey": random_matrix(52, 7, 9),
                            "hz": random_matrix(53, 7, 9), "_fict_": np.arange(3.0)},
    jacobi_1d_array: lambda: {"TSTEPS": 4, "A": random_matrix(1, 30), "B": random_matrix(2, 30)},
    mvt_array: lambda: mvt.initialize("small"),
    syrk_array: lambda: {"alpha": 1.5, "beta": 1.2, "C": random_matrix(21, 8, 8), "A": random_matrix(22, 8, 5)},
    syr2k_array: lambda: {"alpha": 1.5, "beta": 1.2, "C": random_matrix(31, 8, 8), "A": random_matrix(32, 8, 5),
                          "B": random_matrix(33, 8, 5)},
}
HAND = {adi_array: adi, covariance_array: covariance, fdtd_2d_array: fdtd_2d, jacobi_1d_array: jacobi_1d,
        mvt_array: mvt, syrk_array: syrk, syr2k_array: syr2k}
SUBJECTS = pytest.mark.parametrize("module", list(INPUTS), ids=lambda m: m.__name__.rsplit(".", 1)[-1])


def as_tuple(out) -> tuple:
    return out if isinstance(out, tuple) else (out,)


def assert_close(got, want):
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13 * np.abs(want).max())


@SUBJECTS
@MODES
def test_array_code_equals_numpy(module, fused):
    inputs = INPUTS[module]()
    before = {k: v.copy() for k, v in inputs.items() if isinstance(v, np.ndarray)}
    want = as_tuple(module.run_numpy(**inputs))
    pk.reset_stats()
    if fused:
        with pk.fusion():
            got = as_tuple(module.run_array(**inputs))
        assert pk.stats()["ops_traced"] + pk.stats()["array_ops_recorded"] > 0
    else:
        got = as_tuple(module.run_array(**inputs))
        assert pk.stats()["ops_traced"] == pk.stats()["array_ops_recorded"] == 0
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert_close(g, w)
    for k, v in before.items():
        np.testing.assert_array_equal(inputs[k], v, err_msg=f"{module.__name__} changed its input '{k}'")


@SUBJECTS
@pytest.mark.backend("python")
def test_numpy_original_equals_hand_written_kernels(module):
    """The three versions compute the same program: NPBench's NumPy kernel against the kernels of
    examples/npbench (whose tests check them against independent formulations)."""
    inputs = INPUTS[module]()
    for g, w in zip(as_tuple(HAND[module].run_kfuse(**inputs)), as_tuple(module.run_numpy(**inputs))):
        assert_close(g, w)
