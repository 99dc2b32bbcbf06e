"""Row sums recorded with the array operations computing their rows (kfuse/ops/lazy.py ``rows_sum``): with fusion
on, ``pk.sum(expr, axis=-1)`` (and ``pk.mean``) of a pending 2-D (or contiguous n-D) result is one kernel, a thread
per row summing each element as it computes it, and the rows are stored only if the program keeps them. Checked
against the same program run eagerly (bit for bit: the same values added in the same order) and against NumPy;
and where a row sum cannot join (``out=``, another axis, integers), that it runs as its own kernel, right."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import kfuse as pk

RNG = np.random.default_rng(5)


@pytest.fixture(autouse=True)
def kernels_only(monkeypatch):
    monkeypatch.setenv("KFUSE_HOST_ELEMENTS", "0")  # small operations too go to kernels, as at scale


def _run(fused: bool, program, *arrays):
    """``program``'s results as NumPy arrays, eager or fused, and the run's counters."""
    views = [pk.array(a.copy()) for a in arrays]
    if fused:
        pk.enable_fusion()
    try:
        pk.reset_stats()
        results = program(*views)
        got = [np.asarray(r).copy() for r in (results if isinstance(results, tuple) else (results,))]
        return got, pk.stats()
    finally:
        pk.disable_fusion()


def _same_both_ways(program, *arrays):
    eager, _ = _run(False, program, *arrays)
    fused, stats = _run(True, program, *arrays)
    for e, f in zip(eager, fused):
        np.testing.assert_array_equal(f, e)
    return fused, stats


def gaussian_rows(x, theta, var):
    """GaussianNB's per-class term: a broadcast row, a 2-D chain, its row sums."""
    return pk.multiply(pk.sum(pk.divide(pk.square(pk.subtract(x, theta)), var), axis=1), -0.5)


@pytest.mark.parametrize("shape", [(1, 1), (5, 1), (1, 9), (37, 8), (300, 33)])
def test_a_chain_and_its_row_sums_are_one_kernel_and_numpys_values(shape):
    x, theta, var = RNG.standard_normal(shape), RNG.standard_normal((1, shape[1])), RNG.uniform(0.5, 2, (1, shape[1]))
    (got,), stats = _same_both_ways(gaussian_rows, x, theta, var)
    np.testing.assert_allclose(got, -0.5 * (((x - theta) ** 2) / var).sum(1), rtol=1e-13)
    assert stats["kernels_launched"] == 1  # the chain, its row sums and the multiply after them
    assert stats["unstored_arrays"] >= 3  # none of the 2-D intermediates reaches memory


def test_rows_the_program_keeps_are_stored_and_summed():
    x = RNG.standard_normal((40, 6))

    def program(v):
        squares = pk.square(pk.add(v, 1.0))
        return squares, pk.sum(squares, axis=1), pk.mean(squares, axis=-1)
    (squares, sums, means), _ = _same_both_ways(program, x)
    np.testing.assert_array_equal(squares, (x + 1.0) ** 2)
    np.testing.assert_allclose(sums, ((x + 1.0) ** 2).sum(1), rtol=1e-14)
    np.testing.assert_allclose(means, ((x + 1.0) ** 2).mean(1), rtol=1e-14)


def test_the_last_axes_of_a_contiguous_result_are_its_rows():
    x = RNG.standard_normal((4, 5, 6))
    (got,), stats = _same_both_ways(lambda v: pk.sum(pk.multiply(v, 3.0), axis=(1, 2)), x)
    np.testing.assert_allclose(got, (x * 3.0).sum(axis=(1, 2)), rtol=1e-14)
    assert stats["kernels_launched"] == 1


def test_row_sums_that_cannot_join_run_alone_and_right():
    x = RNG.standard_normal((30, 7))
    out = pk.zeros(30)

    def program(v):
        pk.sum(pk.multiply(v, 2.0), axis=1, out=out)  # into memory the program holds
        columns = pk.sum(pk.multiply(v, 2.0), axis=0)  # not rows of C order
        counts = pk.sum(pk.greater(v, 0.0), axis=1)  # integers
        return out, columns, counts
    (rows, columns, counts), _ = _same_both_ways(program, x)
    np.testing.assert_allclose(rows, (2 * x).sum(1), rtol=1e-14)
    np.testing.assert_allclose(columns, (2 * x).sum(0), rtol=1e-14)
    np.testing.assert_array_equal(counts, (x > 0).sum(1))


def test_steps_on_the_row_sums_run_in_the_rows_thread_and_others_start_a_new_kernel():
    """After a row sum, element-wise steps over one element per row (the sums, a broadcast number, a column of
    another array written through out=) join; a step over the rows' elements again starts a new kernel."""
    x = RNG.standard_normal((25, 4))
    table = pk.zeros((25, 3))

    quarter = pk.array(np.array([0.25]))  # (made before: making a View waits for what is pending)

    def program(v):
        total = pk.sum(pk.exp(pk.multiply(v, 0.5)), axis=1)
        pk.add(pk.multiply(total, 2.0), quarter, out=table[:, 1])
        return pk.add(total, 1.0), pk.sum(pk.multiply(v, v), axis=1), table
    (shifted, squares, written), stats = _same_both_ways(program, x)
    np.testing.assert_allclose(shifted, np.exp(0.5 * x).sum(1) + 1.0, rtol=1e-13)
    np.testing.assert_allclose(squares, (x * x).sum(1), rtol=1e-14)
    np.testing.assert_allclose(written[:, 1], 2.0 * np.exp(0.5 * x).sum(1) + 0.25, rtol=1e-13)
    np.testing.assert_array_equal(written[:, [0, 2]], 0.0)
    assert stats["kernels_launched"] == 2


def test_a_step_after_the_row_sums_writing_what_the_rows_read_does_not_join():
    """out= over the chain's own input (another row's elements than the thread's) must wait for every row."""
    x = RNG.standard_normal((6, 6))

    def program(v):
        sums = pk.sum(pk.multiply(v, 1.0), axis=1)
        pk.multiply(sums, 3.0, out=v[0, :])  # row 0 of the input, read by thread 0 only as [0][j]
        return v
    (got,), stats = _same_both_ways(program, x)
    want = x.copy()
    want[0, :] = 3.0 * x.sum(1)
    np.testing.assert_allclose(got, want, rtol=1e-14)
    assert stats["kernels_launched"] == 2


def test_lines_of_a_view_never_come_from_a_copy():
    """The reduced lines are the View's own memory or a gather kernel's output, on any NumPy (a reshape that would
    copy reads the memory past the barrier)."""
    from kfuse.ops import _lines

    a = np.arange(24.0).reshape(2, 3, 4)
    same = _lines._reshaped_in_place(a.transpose(0, 1, 2), (6, 4))
    assert same is not None and np.shares_memory(same, a)
    assert _lines._reshaped_in_place(a.transpose(1, 0, 2), (6, 4)) is None

    class OldArray(np.ndarray):  # NumPy < 2.1: reshape takes no copy=
        def reshape(self, *shape, **kwargs):
            if kwargs:
                raise TypeError("'copy' is an invalid keyword argument for this function")
            return np.ndarray.reshape(self, *shape)
    old = a.view(OldArray)
    assert np.shares_memory(_lines._reshaped_in_place(old, (6, 4)), a)
    assert _lines._reshaped_in_place(old.transpose(1, 0, 2), (6, 4)) is None


def test_a_repeated_prediction_looks_its_analysis_up(monkeypatch):
    """Broadcast statements make new results too (``elementwise(..., fresh)``): a loop repeating GaussianNB's term
    finds every step's analysis kept, and builds no group (it rebuilt one per statement when they did not)."""
    from kfuse.ops import group

    x, theta, var = RNG.standard_normal((40, 5)), RNG.standard_normal((1, 5)), RNG.uniform(0.5, 2, (1, 5))
    views = [pk.array(a.copy()) for a in (x, theta, var)]
    built = []
    add = group.Group.add
    pk.enable_fusion()
    try:
        for run in range(4):
            if run == 3:
                monkeypatch.setattr(group.Group, "add", lambda self, *a: built.append(1) or add(self, *a))
            got = np.asarray(gaussian_rows(*views)).copy()
    finally:
        pk.disable_fusion()
    np.testing.assert_allclose(got, -0.5 * (((x - theta) ** 2) / var).sum(1), rtol=1e-13)
    assert built == []


_OPS = {"exp": (lambda v: pk.exp(pk.multiply(v, 0.1)), lambda a: np.exp(a * 0.1)),
        "square": (pk.square, np.square),
        "minus_row": (None, None),  # v - the matrix's first row, broadcast (a zero-stride View)
        "scale": (lambda v: pk.multiply(v, 1.5), lambda a: a * 1.5)}


@settings(max_examples=30, deadline=None, derandomize=True)
@given(rows=st.integers(1, 30), columns=st.integers(1, 9), chain=st.lists(st.sampled_from(sorted(_OPS)), max_size=3),
       mean=st.booleans(), after=st.lists(st.sampled_from(["scale", "shift", "into_column"]), max_size=3))
def test_random_chains_row_sums_and_steps_after_them_equal_eager_and_numpy(rows, columns, chain, mean, after):
    x = RNG.standard_normal((rows, columns))
    shift = np.array([0.75])

    def program(v, s):
        table = pk.zeros((rows, 2))
        t = v
        for name in chain:
            t = pk.subtract(t, v.subview(slice(0, 1), slice(None))) if name == "minus_row" else _OPS[name][0](t)
        r = pk.mean(t, axis=1) if mean else pk.sum(t, axis=1)
        for name in after:
            if name == "scale":
                r = pk.multiply(r, -0.5)
            elif name == "shift":
                r = pk.add(r, s)
            else:
                pk.add(r, 1.0, out=table[:, 1])
        return r, table

    (got, table), _ = _same_both_ways(program, x, shift)
    t = x
    for name in chain:
        t = t - x[0:1, :] if name == "minus_row" else _OPS[name][1](t)
    want = t.mean(1) if mean else t.sum(1)
    column = np.zeros(rows)
    for name in after:
        if name == "scale":
            want = want * -0.5
        elif name == "shift":
            want = want + shift
        else:
            column = want + 1.0
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(table[:, 1], column, rtol=1e-12, atol=1e-12)
