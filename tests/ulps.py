"""Comparing floating-point results in units in the last place (ULPs), for results of math functions.

A GPU's math library is not glibc's or NumPy's: CUDA documents `sin`, `cos`, `tan`, `pow`, `hypot`, `atan2`... as
correct to 1-2 ULPs, so its results may differ from NumPy's in the last bits while both are right. Tests compare
such results with ``assert_ulps`` and a bound of a few ULPs (exactly, not with a loose relative tolerance); results
of exact arithmetic (integers, ``+ - * /`` in the same order, `sqrt`, `floor`...) stay compared bit for bit.
"""
from __future__ import annotations

import numpy as np

#: Two implementations each within 2 ULPs of the true value may be 4 apart; 4 is the default bound.
MATH_ULPS = 4


def _ordered(a: np.ndarray) -> np.ndarray:
    """Each float as an integer in the floats' own order (adjacent floats differ by 1; -0.0 and 0.0 are equal)."""
    bits = {np.float64: np.int64, np.float32: np.int32}[a.dtype.type]
    i = a.view(bits).astype(np.int64)
    return np.where(i < 0, np.iinfo(bits).min - i, i)


def ulps_apart(actual, desired) -> np.ndarray:
    """Per element, how many representable floats lie between ``actual`` and ``desired`` (both NaN: 0; NaN
    against a number, or infinities of different sign: the largest int64)."""
    actual, desired = np.broadcast_arrays(np.asarray(actual), np.asarray(desired))
    dtype = np.result_type(actual.dtype, desired.dtype)
    if dtype.kind != "f":
        raise TypeError(f"ulps_apart compares floats, got {actual.dtype} and {desired.dtype}")
    a, d = actual.astype(dtype), desired.astype(dtype)
    oa, od = _ordered(a), _ordered(d)
    high, low = np.maximum(oa, od).astype(np.uint64), np.minimum(oa, od).astype(np.uint64)
    top = np.iinfo(np.int64).max
    with np.errstate(over="ignore"):  # the unsigned difference wraps to the exact distance (< 2**64)
        apart = np.minimum(high - low, np.uint64(top)).astype(np.int64)
    nan_a, nan_d = np.isnan(a), np.isnan(d)
    apart = np.where(nan_a & nan_d, 0, apart)
    return np.where(nan_a ^ nan_d, top, apart)


def assert_ulps(actual, desired, max_ulps: int = MATH_ULPS, err_msg: str = "") -> None:
    """Fail unless every element of ``actual`` is within ``max_ulps`` ULPs of ``desired`` (same shape)."""
    actual, desired = np.asarray(actual), np.asarray(desired)
    assert actual.shape == desired.shape, f"{err_msg} shapes differ: {actual.shape} vs {desired.shape}"
    apart = ulps_apart(actual, desired)
    if apart.size and apart.max() > max_ulps:
        worst = tuple(int(i) for i in np.unravel_index(int(np.argmax(apart)), apart.shape))
        raise AssertionError(f"{err_msg} {int((apart > max_ulps).sum())} of {apart.size} elements more than "
                             f"{max_ulps} ULPs apart; worst at {worst}: {actual[worst]!r} vs {desired[worst]!r} "
                             f"({int(apart[worst])} ULPs)".strip())
