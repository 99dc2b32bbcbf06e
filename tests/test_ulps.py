"""The ULP comparison GPU-facing tests use for math-function results (tests/ulps.py)."""
import numpy as np
import pytest

from ulps import assert_ulps, ulps_apart


def test_adjacent_floats_are_one_ulp_apart_across_zero_and_in_both_precisions():
    x = np.array([1.0, -1.0, 0.0, 5e-324, 1e308])
    assert ulps_apart(x, np.nextafter(x, np.inf)).tolist() == [1, 1, 1, 1, 1]
    assert ulps_apart(np.float32(1.0), np.nextafter(np.float32(1.0), np.float32(2.0))) == 1
    assert ulps_apart(-0.0, 0.0) == 0 and ulps_apart(-5e-324, 5e-324) == 2


def test_nan_matches_only_nan_and_infinities_of_opposite_sign_are_far_apart():
    assert ulps_apart(np.nan, np.nan) == 0 and ulps_apart(np.inf, np.inf) == 0
    top = np.iinfo(np.int64).max
    assert ulps_apart(np.nan, 1.0) == top and ulps_apart(np.inf, -np.inf) == top


def test_assert_ulps_names_the_worst_element():
    x = np.linspace(0.1, 1.0, 10)
    assert_ulps(np.nextafter(np.nextafter(x, 2), 2), x, max_ulps=2)
    y = x.copy()
    y[3] *= 1 + 1e-12
    with pytest.raises(AssertionError, match=r"1 of 10 elements more than 4 ULPs apart; worst at \(3,\)"):
        assert_ulps(y, x, err_msg="sin")
    with pytest.raises(TypeError):
        ulps_apart(np.arange(3), np.arange(3))
