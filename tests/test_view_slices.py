"""Slicing a View (kfuse/views.py ``View.subview``): the fields its fast path sets directly equal those a View made
the general way over the same array has, for slices and integers of any sign and step, of contiguous and strided
Views; and a slice of an escaped array is escaped."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import kfuse as pk
from kfuse import views
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


def test_the_same_slice_of_a_view_is_the_same_view_until_a_resize():
    whole = pk.View([10])
    assert whole[1:-1] is whole[1:-1]
    assert whole[1:-1] is not whole[2:-1] and whole[::2] is not whole[::3]
    grid = pk.View((4, 6))
    assert grid[:, 2] is grid[:, 2] and grid[1:3, 2:] is grid[1:3, 2:] and grid[:, 2] is not grid[:, 3]
    kept = whole[1:-1]
    whole.resize(0, 12)
    assert whole[1:-1] is not kept and whole[1:-1].shape == (10,)  # the new memory's slice
    assert kept.shape == (8,) and kept.ptr == kept._array.__array_interface__["data"][0]  # the old one's, as Kokkos
    with pytest.raises(TypeError):
        whole[1.0:]  # only Python ints are kept: NumPy's error still comes


def test_kept_slices_see_writes_through_the_whole_and_equal_fresh_ones():
    whole = pk.array(np.arange(10.0).copy())
    part = whole[2:5]
    whole[3] = -1.0
    assert whole[2:5] is part
    np.testing.assert_array_equal(part, [2.0, -1.0, 4.0])
    for i in range(40):  # more slices than a View keeps: they are made again, equal
        for field in FIELDS:
            assert getattr(whole[i % 9:], field) == getattr(View.wrap(whole._array[i % 9:]), field)


def test_views_made_and_dropped_with_fusion_off_leave_no_escape_entries_behind():
    """Nothing asks whether memory escaped while fusion is off, so the entries of dead user arrays were never
    dropped: an eager loop making a View each step piled up one per step (3,000 after 3,000 steps, and the garbage
    collector walked them all: ``pk.from_numpy`` went from 32 to 241 us)."""
    from kfuse import escape
    pk.disable_fusion()
    before = len(escape._entries)
    for step in range(500):
        view = pk.from_numpy(np.full(16, float(step)))
        assert view[3] == float(step)
    del view
    pk.from_numpy(np.zeros(4))  # (a new entry drops the dead ones)
    assert len(escape._entries) <= before + 2 and len(escape._dead) <= 1


def test_an_array_the_program_lets_go_of_stops_being_checked_for_escapes():
    from kfuse import escape
    held = np.arange(6.0)
    view = pk.array(held)
    assert view.escaped(True)
    entries = len(escape._entries)
    del held
    assert not view.escaped(True) and not view[1:].escaped(True)
    escape.live()  # (drops what was found unreachable)
    assert len(escape._entries) == entries - 1  # its entry is gone: no later call checks it again
    exported = np.asarray(view)  # an export escapes again, for as long as it lives
    assert view.escaped(True) and escape.live()
    del exported
    assert not view.escaped(True)


@pytest.mark.parametrize("make", [lambda: np.arange(12.0), lambda: np.arange(24.0).reshape(4, 6),
                                  lambda: np.arange(24.0).reshape(4, 6)[:, ::2], lambda: np.arange(12.0)[::-1],
                                  lambda: np.asfortranarray(np.arange(24.0).reshape(4, 6)), lambda: np.zeros(0),
                                  lambda: np.arange(24.0).reshape(4, 6)[1:3]],
                         ids=["contiguous", "2-d", "strided", "reversed", "fortran", "empty", "rows"])
def test_a_view_of_a_users_array_has_its_pointer_and_byte_range(make):
    """``pk.from_numpy`` reads the array's pointer once and derives the byte range of a C-contiguous array from it;
    NumPy's own answers for every layout (the escape entry covers the same bytes)."""
    from kfuse import escape

    array = make()
    view = pk.from_numpy(array)
    ptr = array.__array_interface__["data"][0]
    assert view.ptr == ptr
    if array.size:
        assert view.bounds == tuple(escape.byte_bounds(array))
        assert [(e.lo, e.hi) for e in escape.covering(*view.bounds)] == [tuple(escape.byte_bounds(array))]
    else:
        assert view.bounds == (ptr, ptr)


def test_views_of_one_kind_share_one_sig_and_other_kinds_do_not():
    """A View's ``sig`` (what kernels specialise on) is one tuple per kind, however the View was made, so each call's
    comparison of sigs finds them identical at once; Views of another dtype, rank, layout or trait have another."""
    kinds = {
        "f64 1-d": [pk.from_numpy(np.zeros(4)), pk.View([7], pk.double), pk.zeros(3), pk.from_numpy(np.ones(9))[2:5]],
        "f64 2-d": [pk.from_numpy(np.zeros((2, 3))), pk.View([4, 4], pk.double)],
        "f64 2-d strided": [pk.from_numpy(np.zeros((4, 6))[:, ::2]), pk.from_numpy(np.zeros((3, 8))[:, 1::3])],
        "i32 1-d": [pk.from_numpy(np.zeros(4, dtype=np.int32)), pk.View([5], pk.int32)],
        "f64 1-d atomic": [pk.View([4], pk.double, trait=pk.Atomic), pk.View([6], pk.double, trait=pk.Atomic)],
    }
    firsts = []
    for name, made in kinds.items():
        assert all(view.sig is made[0].sig for view in made), name
        assert made[0].sig == views._sig_of(made[0].dtype, made[0].ndim, made[0].storage,
                                            made[0].trait is views.Trait.Atomic), name
        firsts.append(made[0].sig)
    assert len(set(firsts)) == len(firsts)
