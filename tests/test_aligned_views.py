"""Different Views of one memory fused where their elements line up thread by thread (fuser/planner.py
``_aligned``, graph.py ``Frame``): a matrix's columns written, then its rows read, as GaussianNB's array code does.

First the proof's pieces as pure functions (frames, hand-written graphs), then real calls: on the null backend
(which decision, under which KFUSE_ALIGN_VIEWS), then compiled, eager against fused against NumPy, on the host
and on the stand-in GPU.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import kfuse as pk
from fusion_check import assert_same, run_eager_and_fused, view_of
from kfuse import context
from kfuse.fuser.graph import Frame, Graph, Node
from kfuse.fuser.planner import Split, plan
from kfuse.fuser.safety import KernelPattern, ParamPattern

ROWS, COLS = 40, 4
MATRIX = Frame(0, (ROWS, COLS), (8 * COLS, 8), 8)


def column(c: int) -> Frame:
    return Frame(8 * c, (ROWS,), (8 * COLS,), 8)


# --- frames ----------------------------------------------------------------------------------------------------
def test_a_frame_puts_every_element_of_an_index_in_one_row_only_where_its_other_dimensions_fit():
    assert MATRIX.row(0) == (32, 0)
    assert column(3).row(0) == (32, 0)  # a column's element i lies in the matrix's row i
    assert Frame(8, (ROWS, 2), (32, 8), 8).row(0) == (32, 0)  # columns 1 and 2 of each row
    assert Frame(800, (10,), (8,), 8).row(0) == (8, 100)  # a 1-D subview from element 100
    assert MATRIX.row(1) is None  # along a row, the other rows' elements lie 32 bytes on
    assert Frame(8, (ROWS, 4), (32, 8), 8).row(0) is None  # columns 1 to 4 reach into the next row
    assert Frame(0, (ROWS,), (-8,), 8).row(0) is None  # steps backward
    assert Frame(0, (ROWS, COLS), (0, 8), 8).row(0) is None  # one row repeated (a broadcast)


_layout = st.tuples(st.integers(0, 12), st.integers(1, 4), st.integers(-2, 6), st.integers(1, 4),
                    st.integers(-3, 3))  # first element, rows, row step, columns, column step (in doubles)


def _bytes(first, rows, row_step, cols, col_step, dim) -> dict:
    """Per index along ``dim``, the bytes (from the buffer's first) of the View's elements at that index."""
    found: dict = {}
    for r in range(rows):
        for c in range(cols):
            start = 8 * (first + r * row_step + c * col_step)
            found.setdefault((r, c)[dim], set()).update(range(start, start + 8))
    return found


@settings(max_examples=400, deadline=None, derandomize=True)
@given(layout=_layout)
def test_a_frame_row_holds_every_byte_of_its_index(layout):
    first, rows, row_step, cols, col_step = layout
    frame = Frame(8 * first, (rows, cols), (8 * row_step, 8 * col_step), 8)
    for dim in (0, 1):
        place = frame.row(dim)
        if place is None:
            continue
        stride, row = place
        for index, owned in _bytes(*layout, dim).items():
            assert {b // stride for b in owned} == {row + index}, (layout, dim, index)


def _side(stride: int):
    """A View of one buffer stepping ``stride`` doubles along the dimension its thread index reaches, with an offset:
    (layout as ``_layout``'s, that dimension, the offset). Pairs of them line up often enough to test the proof."""
    return st.tuples(st.integers(0, 12), st.integers(1, 4), st.integers(1, 4), st.integers(-3, 3), st.integers(0, 1),
                     st.integers(-2, 2)).map(
        lambda t: ((t[0], t[1], stride, t[2], t[3]) if t[4] == 0 else (t[0], t[2], t[3], t[1], stride), t[4], t[5]))


_pairs = st.integers(1, 6).flatmap(lambda stride: st.tuples(_side(stride), _side(stride)))


@settings(max_examples=600, deadline=None, derandomize=True)
@given(pair=_pairs)
def test_aligned_views_never_give_two_threads_one_byte(pair):
    """The proof's soundness: where two Views of one buffer line up (``_aligned``, thread t reaching index
    t + offset along the given dimension and anything along the other), no byte is in elements of two threads;
    and some pairs do line up."""
    from kfuse.fuser.planner import _aligned

    def side(layout, dim, offset):
        first, rows, row_step, cols, col_step = layout
        frame = Frame(8 * first, (rows, cols), (8 * row_step, 8 * col_step), 8)
        row = frozenset({(dim, ("c", offset))})
        pattern = ParamPattern(True, True, None, (((row,), "x[i + c]"),))
        return (Node(1, "k", "OpenMP", "RangePolicy", ((0, 8),), ()), pattern, frame), \
            {t: owned for index, owned in _bytes(*layout, dim).items() if 0 <= (t := index - offset) < 8}

    (first, reach), (second, reach2) = side(*pair[0]), side(*pair[1])
    aligned = _aligned(first, second)
    _ALIGNED_SEEN.append(aligned)
    if aligned:
        for t, owned in reach.items():
            for t2, owned2 in reach2.items():
                assert t == t2 or not owned & owned2, (pair, t, t2)


_ALIGNED_SEEN: list = []


def test_the_soundness_examples_include_pairs_that_line_up():
    """The property above is not vacuous: a good share of its pairs line up (it runs first, in file order)."""
    if not _ALIGNED_SEEN:
        test_aligned_views_never_give_two_threads_one_byte()
    assert sum(_ALIGNED_SEEN) >= 50, sum(_ALIGNED_SEEN)


# --- hand-written graphs -----------------------------------------------------------------------------------------
def at_thread(offset=0, dim=0) -> tuple:
    return ((frozenset({(dim, ("c", offset))}),), f"x[i + {offset}]")


def kernel(params: dict) -> KernelPattern:
    """``params``: View parameter -> (read, write, accesses)."""
    return KernelPattern({p: ParamPattern(r, w, None, tuple(acc)) for p, (r, w, acc) in params.items()}, None,
                         frozenset())


WRITE_X = kernel({"x": (False, True, [at_thread()])})
READ_ROWS = kernel({"m": (True, False, [at_thread()]), "out": (False, True, [at_thread()])})  # m[i][j]
READ_NEXT_ROWS = kernel({"m": (True, False, [at_thread(1)]), "out": (False, True, [at_thread()])})  # m[i + 1][j]
READ_SHIFTED = kernel({"m": (True, False, [at_thread(100)]), "out": (False, True, [at_thread()])})  # m[i + 100]
READ_ACROSS = kernel({"m": (True, False, [at_thread(0, dim=1)]), "out": (False, True, [at_thread()])})  # m[j][i]


def groups(write, read, frames, bounds=((0, ROWS),)) -> tuple:
    """(groups, split kinds) of a call writing storage 0, then one reading storage 1 into storage 2, where
    storages 0 and 1 share memory and lie as ``frames`` say (() : no frames, as without KFUSE_ALIGN_VIEWS)."""
    nodes = (Node(1, "w", "Cuda", "RangePolicy", bounds, (("x", 0),)),
             Node(2, "r", "Cuda", "RangePolicy", bounds, (("m", 1), ("out", 2))))
    overlaps = frozenset({(0, 0), (1, 1), (2, 2), (0, 1)})
    result = plan(Graph(nodes, overlaps, (write, read), frames=frames))
    return result.groups, [r.kind for _, r in result.boundaries]


def test_a_columns_writes_fuse_with_the_rows_read_at_the_same_thread():
    for c in range(COLS):
        assert groups(WRITE_X, READ_ROWS, (column(c), MATRIX, None)) == ([[0, 1]], [])


def test_views_that_do_not_line_up_stay_apart():
    apart = ([[0], [1]], [Split.ALIASED_VIEWS])
    assert groups(WRITE_X, READ_NEXT_ROWS, (column(1), MATRIX, None)) == apart  # thread i reads row i + 1
    assert groups(WRITE_X, READ_ACROSS, (column(1), MATRIX, None)) == apart  # thread i reads a column
    assert groups(WRITE_X, READ_ROWS, (Frame(8, (ROWS, 4), (32, 8), 8), MATRIX, None)) == apart  # rows overlap
    assert groups(WRITE_X, READ_ROWS, (column(1), MATRIX, None), bounds=((0, 8), (0, 5))) == apart  # rank 2
    assert groups(WRITE_X, READ_ROWS, ()) == apart  # no frames: alignment off


def test_a_subview_lines_up_with_its_whole_at_its_offset():
    """``lo = a[100:140]`` written at ``lo[i]``; ``a`` read at ``a[i + 100]`` lines up, ``a[i]`` does not."""
    frames = (Frame(800, (ROWS,), (8,), 8), Frame(0, (200,), (8,), 8), None)
    assert groups(WRITE_X, READ_SHIFTED, frames) == ([[0, 1]], [])
    assert groups(WRITE_X, READ_ROWS, frames) == ([[0], [1]], [Split.ALIASED_VIEWS])


# --- real calls on the null backend ----------------------------------------------------------------------------
@pk.workunit
def set_column(i: int, v: float, col: pk.View1D[pk.double]):
    col[i] = v * i - 1.5 * v


@pk.workunit
def row_best(i: int, m: pk.View2D[pk.double], best: pk.View1D[pk.int64]):
    at: int = 0
    for j in range(1, m.extent(1)):
        if m[i][j] > m[i][at]:
            at = j
    best[i] = at


def columns_then_rows(shift=0, n=ROWS):
    """Each column of a matrix written by a call of its own, then a call reading every row; with ``shift``, the
    columns' thread i writes row i + shift of the matrix, the rows' thread i reads row i."""
    m, best = pk.View((n, COLS)), pk.View(n - shift, pk.int64)
    for c in range(COLS):
        pk.parallel_for(n - shift, set_column, v=(-1.0) ** c * (c + 1), col=m[shift:, c])
    pk.parallel_for(n - shift, row_best, m=m[:n - shift, :] if shift else m, best=best)
    return m, best


def expected_rows(shift=0, n=ROWS) -> tuple:
    i = np.arange(n - shift)[:, None]
    v = np.array([(-1.0) ** c * (c + 1) for c in range(COLS)])[None, :]
    m = np.zeros((n, COLS))
    m[shift:] = v * i - 1.5 * v
    return m, np.argmax(m[:n - shift], axis=1)


def flushed_groups() -> tuple:
    runtime = context.current()
    runtime.flush_all()
    record = runtime.records[-1]
    return record.groups, [str(r) for _, r in record.boundaries]


@pytest.mark.backend("null")
@pytest.mark.parametrize("align, fused", [("all", True), ("device", False), ("none", False), ("", False)])
def test_which_setting_lines_up_views_on_the_host(monkeypatch, align, fused):
    monkeypatch.setenv("KFUSE_ALIGN_VIEWS", align)
    pk.enable_fusion()
    columns_then_rows()
    got, reasons = flushed_groups()
    if fused:
        assert got == [[0, 1, 2, 3, 4]] and reasons == []
    else:
        assert got == [[0, 1, 2, 3], [4]]
        assert reasons == ["'col/m' share memory through different views (e.g. a subview), lined up element by "
                           "element only where KFUSE_ALIGN_VIEWS allows (off by default)"]


@pytest.mark.backend("null")
def test_columns_written_one_row_on_from_the_rows_read_stay_apart(monkeypatch):
    monkeypatch.setenv("KFUSE_ALIGN_VIEWS", "all")
    pk.enable_fusion()
    columns_then_rows(shift=1)
    got, reasons = flushed_groups()
    assert got == [[0, 1, 2, 3], [4]]
    assert reasons == ["'col/m' share memory through different views (e.g. a subview), cannot align elements"]


def test_a_bad_setting_is_named():
    from kfuse import config

    with config.overridden(config.ALIGN_VIEWS, "sometimes"), pytest.raises(ValueError, match="KFUSE_ALIGN_VIEWS"):
        config.ALIGN_VIEWS.get()


# --- compiled: eager against fused against NumPy ----------------------------------------------------------------
def _program(shift=0):
    def program():
        m, best = columns_then_rows(shift)
        best = best.copy()  # first: reading m alone would run only the calls writing it
        return m.copy(), best
    return program


@pytest.mark.parametrize("shift", [0, 1])
def test_aligned_calls_compute_what_eager_and_numpy_compute(monkeypatch, shift):
    monkeypatch.setenv("KFUSE_ALIGN_VIEWS", "all")
    expected, got, stats, text = run_eager_and_fused(_program(shift))
    assert_same(expected, got)
    for g, e in zip(got, expected_rows(shift)):
        np.testing.assert_array_equal(g, e)
    assert stats["kernels_launched"] == (1 if shift == 0 else 2), text
    assert ("cannot align elements" in text) == bool(shift), text


def test_gaussian_nb_array_code_captured_fuses_its_columns_with_the_argmax_and_equals_numpy(monkeypatch):
    from kfuse.bench import peers

    monkeypatch.setenv("KFUSE_ALIGN_VIEWS", "all")
    pk.enable_fusion()
    _, arrays, captured = peers._gaussian_nb("small")
    expected = peers.gaussian_nb_xp(np, *arrays)
    for _ in range(6):  # recorded, then replayed
        np.testing.assert_array_equal(np.asarray(captured()), expected)
    text = pk.explain(1)
    assert "_add_vv + rows_best_k  [fused" in text and text.count("group ") == 2, text


def test_on_the_stand_in_gpu_device_lines_up_columns_and_rows(fake_gpu, monkeypatch):
    monkeypatch.setenv("KFUSE_ALIGN_VIEWS", "device")  # the stand-in's default space counts as a GPU's here too
    expected, got, stats, text = run_eager_and_fused(_program())
    assert_same(expected, got)
    np.testing.assert_array_equal(got[1], expected_rows()[1])
    assert stats["kernels_launched"] == 1 and stats["fused_kernels_launched"] == 1, text


def test_gaussian_log_likelihood_columns_on_the_stand_in_gpu_equal_numpy(fake_gpu, monkeypatch):
    """scikit-learn's per-class statements into columns of one result, then the argmax (the array example)."""
    monkeypatch.setenv("KFUSE_ALIGN_VIEWS", "device")
    from examples.gaussian_nb_array import most_likely

    rng = np.random.default_rng(3)
    X, theta, var = rng.standard_normal((64, 5)), rng.standard_normal((3, 5)), rng.uniform(0.5, 2.0, (3, 5))
    prior = np.array([0.2, 0.3, 0.5])
    expected = np.argmax(np.log(prior) - 0.5 * np.log(2 * math.pi * var).sum(1)
                         - 0.5 * ((X[:, None, :] - theta) ** 2 / var).sum(2), axis=1)
    pk.enable_fusion()
    got = most_likely(view_of(X), view_of(theta), view_of(var), view_of(prior))
    np.testing.assert_array_equal(np.asarray(got), expected)
    assert "lined up" not in pk.explain(1) and "cannot align" not in pk.explain(1), pk.explain(1)
