"""Groups of recorded array operations (kfuse/ops/group.py, plans.py, lazy.py): strided 2-D Views read and written
in place by 2-D kernels, ``out=`` overlapping an operand at other elements, a group run at once when a step cannot
join it, and what to launch kept per group form. Every program runs on NumPy, eager kfuse and fused kfuse: the
fused results equal the eager ones bit for bit, and NumPy's (these operations are correctly rounded, so bit for
bit too; sums within rounding).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import kfuse as pk
from kfuse.ops import plans

pytestmark = pytest.mark.backend("python")

BINARY = ("add", "subtract", "multiply", "divide", "maximum", "minimum")
UNARY = ("negative", "absolute", "square")


def grid(seed: int, shape=(6, 7)) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0.5, 2.0, shape)


def outcomes(program, *arrays):
    """``program(xp, *arrays)`` (a list of arrays or numbers) with NumPy, eager kfuse and fused kfuse."""
    def numbers(results):
        return [np.array(pk.value(r) if isinstance(r, pk.Future) else r) for r in results]

    want = numbers(program(np, *(a.copy() for a in arrays)))
    eager = numbers(program(pk, *(pk.array(a.copy()) for a in arrays)))
    with pk.fusion():
        fused = numbers(program(pk, *(pk.array(a.copy()) for a in arrays)))
    return want, eager, fused


def assert_same(program, *arrays, rtol=0.0):
    """Fused equals eager bit for bit, and NumPy within ``rtol`` (sums: within rounding)."""
    want, eager, fused = outcomes(program, *arrays)
    assert len(want) == len(eager) == len(fused)
    for w, e, f in zip(want, eager, fused):
        np.testing.assert_array_equal(f, e)
        np.testing.assert_allclose(f, w, rtol=rtol if w.ndim else 1e-13, atol=0)


# --- strided 2-D Views in place ---------------------------------------------------------------------------
def fdtd_step(xp, ex, ey, hz):
    """fdtd_2d's statements: row blocks are contiguous, column slices strided."""
    xp.subtract(ey[1:, :], xp.multiply(xp.subtract(hz[1:, :], hz[:-1, :]), 0.5), out=ey[1:, :])
    xp.subtract(ex[:, 1:], xp.multiply(xp.subtract(hz[:, 1:], hz[:, :-1]), 0.5), out=ex[:, 1:])
    xp.subtract(hz[:-1, :-1], xp.multiply(xp.subtract(xp.add(xp.subtract(ex[:-1, 1:], ex[:-1, :-1]), ey[1:, :-1]),
                                                      ey[:-1, :-1]), 0.7), out=hz[:-1, :-1])
    return [ex, ey, hz]


def test_column_slices_are_computed_in_place_by_one_kernel_per_statement(fresh_stats):
    assert_same(lambda xp, *a: fdtd_step(xp, *a), grid(1), grid(2), grid(3))
    pk.reset_stats()
    with pk.fusion():
        fdtd_step(pk, *(pk.array(grid(s)) for s in (1, 2, 3)))
        pk.fence()
    stats = pk.stats()
    assert stats["kernels_launched"] == 3 and stats["ops_traced"] == 0  # no copy kernels, nothing traced


def test_a_strided_copy_and_a_transpose_are_element_wise_kernels(fresh_stats):
    def program(xp, a, b):
        xp.copyto(b[1:, 1:4], a[:-1, 2:5])
        at = xp.transpose(a)  # a strided 2-D View of another layout
        t = xp.multiply(at[1:, :], 2.0)
        return [b, t, xp.add(t, at[:-1, :]), xp.copy(at)]

    assert_same(program, grid(4), grid(5))


@settings(max_examples=int(__import__("os").environ.get("KFUSE_GROUP_EXAMPLES", 40)), deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_statements_over_windows_of_grids_equal_eager_and_numpy(data):
    """Random statements over same-shaped windows of three grids (strided column windows, contiguous row
    blocks, strided or contiguous lines): operations of windows, earlier results, results made inside the
    statement and dropped, and scalars, written into new Views or ``out=`` windows that may overlap their
    operands; host reads and sums in between."""
    kind = data.draw(st.sampled_from(["cols", "rows", "col line", "row line"]))

    def window(arrays, n):
        a, r, c = arrays[n % 3], (n // 3) % 2, (n // 6) % 2
        return {"cols": lambda: a[r:r + 5, c:c + 6], "rows": lambda: a[r:r + 5, :],
                "col line": lambda: a[r:r + 5, c + 2], "row line": lambda: a[r + 2, c:c + 6]}[kind]()

    leaf = st.one_of(st.tuples(st.just("w"), st.integers(0, 11)), st.tuples(st.just("r"), st.integers(0, 7)),
                     st.floats(0.5, 2.0))
    operand = st.one_of(leaf, st.tuples(st.just("u"), st.sampled_from(UNARY), leaf))
    out = st.one_of(st.none(), st.integers(0, 11))
    statements = data.draw(st.lists(st.one_of(
        st.tuples(st.just("bin"), st.sampled_from(BINARY), operand, operand, out),
        st.tuples(st.just("un"), st.sampled_from(UNARY), operand, out),
        st.tuples(st.just("sum"), st.integers(0, 7)), st.tuples(st.just("read"), st.integers(0, 2))),
        min_size=1, max_size=10))

    def program(xp, *arrays):
        results, sums = [], []

        def value(x):
            if isinstance(x, float):
                return x
            if x[0] == "u":  # an operation inside the statement: its result is dropped
                return getattr(xp, x[1])(value(x[2]) if not isinstance(x[2], float) else window(arrays, 0))
            if x[0] == "w" or not results:
                return window(arrays, x[1])
            return results[x[1] % len(results)]

        for statement in statements:
            if statement[0] == "read":
                np.asarray(arrays[statement[1]])[0, 0]  # a host read: whatever is pending runs first
            elif statement[0] == "sum":
                sums.append(xp.sum(value(("r", statement[1]))))
            else:
                args = [value(x) for x in statement[2:-1]]
                if all(isinstance(x, float) for x in args):
                    args[0] = window(arrays, 0)
                target = None if statement[-1] is None else window(arrays, statement[-1])
                results.append(getattr(xp, statement[1])(*args, out=target))
        return [*arrays, *results, *sums]

    assert_same(program, grid(6), grid(7), grid(8))


# --- out= overlapping an operand ------------------------------------------------------------------------
@pytest.mark.parametrize("case", ["shift up", "shift down", "reversed", "column into row", "2-D shifted"])
def test_an_out_overlapping_its_operand_at_other_elements_reads_the_operand_first(case):
    def program(xp, a, m):
        if case == "shift up":
            xp.add(a[:-1], 1.0, out=a[1:])
        elif case == "shift down":
            xp.multiply(a[1:], a[:-1], out=a[:-1])
        elif case == "reversed":
            xp.subtract(a[::-1], a, out=a)
        elif case == "column into row":
            xp.copyto(m[2, 2:], m[2:, 2])
        else:
            xp.add(m[1:, 1:], m[:-1, :-1], out=m[:-1, 1:])
        return [a, m]

    assert_same(program, np.random.default_rng(9).uniform(0.5, 2.0, 12), grid(10, (6, 6)))


# --- groups run at once ---------------------------------------------------------------------------------
def test_statements_that_cannot_join_run_at_once_one_kernel_each(fresh_stats):
    def program(xp, a, b):
        for _ in range(4):  # jacobi_1d: each statement reads its neighbours of what the other wrote
            xp.multiply(xp.add(xp.add(a[:-2], a[1:-1]), a[2:]), 0.33333, out=b[1:-1])
            xp.multiply(xp.add(xp.add(b[:-2], b[1:-1]), b[2:]), 0.33333, out=a[1:-1])
        return [a, b]

    ones = np.random.default_rng(11).uniform(0.5, 2.0, 20)
    assert_same(program, ones, ones + 1.0)
    pk.reset_stats()
    with pk.fusion():
        program(pk, pk.array(ones.copy()), pk.array(ones + 1.0))
        pk.fence()
        text = pk.explain()
    stats = pk.stats()
    assert stats["kernels_launched"] == stats["fused_kernels_launched"] == 8 and stats["ops_traced"] == 0
    assert "array operations run at once" in text


@pk.workunit
def halve(i, v):
    v[i] = v[i] * 0.5


def test_groups_after_a_pending_kernel_call_are_logged_behind_it(fresh_stats):
    def program(xp, a, b):
        if xp is pk:
            pk.parallel_for(a.shape[0], halve, v=a)  # pending: the groups after it wait in the trace
        else:
            a *= 0.5
        xp.add(a[1:], 1.0, out=b[1:])
        xp.multiply(b[:-1], a[:-1], out=a[1:])
        return [a, b]

    ones = np.random.default_rng(12).uniform(0.5, 2.0, 16)
    assert_same(program, ones, ones * 3.0)


# --- plans kept per form --------------------------------------------------------------------------------
def test_a_repeated_loop_body_looks_its_plan_up():
    a, b = pk.array(grid(13)), pk.array(grid(14))
    with pk.fusion():
        for _ in range(2):
            pk.add(pk.multiply(a, 2.0), b, out=b)
            pk.fence()
        before = dict(plans.counts)
        for _ in range(5):
            pk.add(pk.multiply(a, 2.0), b, out=b)
            pk.fence()
    assert plans.counts["made"] == before["made"] and plans.counts["hits"] == before["hits"] + 5
    want = grid(14)
    for _ in range(7):
        want += grid(13) * 2.0
    np.testing.assert_array_equal(np.asarray(b), want)


def test_a_plan_is_not_reused_where_anything_it_decides_differs():
    """One loop body with what its plan depends on changed between the rounds: shapes, dtypes, which operands
    are the same View, where results go, which intermediates the program keeps, a host write between the
    statements, a reduction's Future as a scalar."""
    def program(xp, a, b):
        results = []
        for round_ in range(6):
            x, y = (a, b) if round_ != 1 else (a[1:, :], b[1:, :])  # another shape
            if round_ == 2:
                x = x.astype(np.float32) if xp is np else pk.copy(pk.array(np.asarray(x).astype(np.float32)))
            second = y if round_ != 3 else x  # the same View twice
            t = xp.multiply(x, 2.0)
            if round_ == 4:
                results.append(t)  # kept: stored this time
            u = xp.add(t, second, out=None if round_ != 5 else b)  # into an input
            if round_ == 5:
                np.asarray(a)[0, 0]  # a host read between two statements
                a[0, 0] = 3.0  # and a host write
            s = xp.sum(u)
            results += [xp.subtract(u, s), xp.add(a, 1.0)]
        return [a, b, *results]

    assert_same(program, grid(15), grid(16), rtol=1e-13)


@settings(max_examples=3000, deadline=None)
@given(st.integers(-40, 40), st.integers(-12, 12), st.integers(-40, 40), st.integers(-12, 12), st.integers(1, 12))
def test_progressions_meet_at_other_indices_exactly_when_enumeration_says(start_a, step_a, start_b, step_b, n):
    """overlap.meets_apart against listing every address of both progressions."""
    from kfuse.ops import overlap

    where_b = {}
    for j in range(n):
        where_b.setdefault(start_b + j * step_b, set()).add(j)
    brute = any(j != i for i in range(n) for j in where_b.get(start_a + i * step_a, ()))
    assert overlap.meets_apart(start_a, step_a, start_b, step_b, n) == brute
