"""Slicing a View (kfuse/views.py ``View.subview``): the fields its fast path sets directly equal those a View made
the general way over the same array has, for slices and integers of any sign and step, of contiguous and strided
Views; and a slice of an escaped array is escaped."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import kfuse as pk
from kfuse.views import View

pytestmark = pytest.mark.backend("python")

FIELDS = ("shape", "ndim", "strides", "storage", "ptr", "bounds", "sig", "dtype", "trait")


def item(n: int):
    """An index item for an extent of ``n``: an int in range, or a slice of any bounds and step."""
    bound = st.one_of(st.none(), st.integers(-n - 2, n + 2))
    return st.one_of(st.integers(-n, n - 1) if n else st.nothing(),
                     st.builds(slice, bound, bound, st.one_of(st.none(), st.sampled_from([1, 2, 3, -1, -2]))))


@st.composite
def parents_and_indices(draw):
    base = View((5, 6, 4), pk.float32 if draw(st.booleans()) else pk.float64)
    parent = base[draw(st.sampled_from([(slice(None),), (slice(1, None), slice(None, None, 2)),
                                         (slice(None, None, -1), slice(2, 5)), (2, slice(None))]))]
    index = tuple(draw(item(n)) for n in parent.shape[:draw(st.integers(1, parent.ndim))])
    return parent, index


@settings(max_examples=300, deadline=None)
@given(parents_and_indices())
def test_a_slice_has_the_fields_of_a_view_made_over_its_array(case):
    parent, index = case
    try:
        expected = View.wrap(parent._array[index])
    except (IndexError, ValueError):
        return
    if not any(type(i) is slice for i in index) or expected.ndim == 0:
        return
    got = parent[index]
    for field in FIELDS:
        assert getattr(got, field) == getattr(expected, field), field


def test_a_slice_of_an_array_the_program_holds_is_escaped():
    data = np.arange(12.0)
    whole = pk.array(data)  # ``data`` stays the program's: escaped
    assert whole.escaped(False) and whole[2:5].escaped(False) and whole[::3].escaped(True)
    kept = pk.array(np.arange(12.0))  # handed over
    assert not kept.escaped(True) and not kept[2:5].escaped(True)
