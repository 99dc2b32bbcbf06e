"""Element-wise operations recorded while fusing and run as one kernel (kfuse/ops/lazy.py, ops/expressions.py).

Every test compares fused runs with NumPy and with eager kfuse, and checks what the batch decided: one kernel
for a chain, intermediates the program dropped never stored, anything the program can still reach stored,
shifted Views of one array split, host accesses and kernel calls ordered after the operations they follow.
Most run on the python backend (the generated kernels interpreted, no compiler); a few compile them.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import kfuse as pk
from kfuse import views
from kfuse.ops import expressions, kernels as k
from kfuse.types import DType

pytestmark = pytest.mark.backend("python")


def arr(seed: int, n: int = 33, low: float = 0.5, high: float = 2.0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(low, high, n)


def fused(fn):
    """fn() with fusion on, its View results copied out after the flush."""
    pk.enable_fusion()
    try:
        out = fn()
        pk.fence()
    finally:
        pk.disable_fusion()
    return out


# --- the generated kernel ---------------------------------------------------------------------------------
def test_a_chain_inlines_each_kernel_body_and_stores_only_the_marked_steps():
    steps = ((k.multiply_vs, (("v", 0), ("s", 0)), DType.float64, None),
             (k.log_k, (("t", 0),), DType.float64, 0),
             (k.subtract_vv, (("t", 1), ("v", 1)), DType.float64, 1))
    wu = expressions.kernel_for(steps)
    assert wu.parsed.param_names == ["i", "o0", "o1", "v0", "v1", "s0"]
    a, b, o0, o1 = pk.array(arr(1)), pk.array(arr(2)), pk.View([33]), pk.View([33])
    pk.parallel_for(33, wu, o0=o0, o1=o1, v0=a, v1=b, s0=3.0)
    np.testing.assert_array_equal(o0, np.log(arr(1) * 3.0))
    np.testing.assert_array_equal(o1, np.log(arr(1) * 3.0) - arr(2))
    assert expressions.kernel_for(steps) is wu  # one workunit per chain: compiled and specialised once


def test_a_reduction_ends_the_kernel():
    steps = ((k.square_k, (("v", 0),), DType.float64, None), (k.sum_k, (("t", 0), ("s", 0)), None, None))
    wu = expressions.kernel_for(steps)
    got = pk.parallel_reduce(33, wu, v0=pk.array(arr(3)), s0=0.5)
    assert got == pytest.approx(np.sum(arr(3) ** 2) * 0.5, rel=1e-14)


def test_kernels_not_of_the_form_out_i_equals_expression_are_not_inlined():
    assert expressions.template(k.matvec_k) is None  # loops, 2-D reads
    assert expressions.template(k.chunk_best_k) is None
    assert expressions.template(k.add_vs) is not None


# --- one kernel, intermediates in registers -------------------------------------------------------------
def chain(x, mu, var):
    return pk.sum(pk.subtract(pk.multiply(pk.log(pk.multiply(var, 2 * math.pi)), -0.5),
                              pk.divide(pk.square(pk.subtract(x, mu)), pk.multiply(var, 2.0))))


def test_a_chain_with_a_sum_is_one_launch_and_stores_nothing(fresh_stats):
    x, mu, var = pk.array(arr(1)), pk.array(arr(2)), pk.array(arr(3))
    eager = float(chain(x, mu, var))
    got = fused(lambda: float(chain(x, mu, var)))
    assert got == eager
    assert got == pytest.approx(np.sum(-0.5 * np.log(2 * math.pi * arr(3)) - (arr(1) - arr(2)) ** 2 / (2 * arr(3))),
                                rel=1e-13)
    stats = pk.stats()
    assert stats["kernels_launched"] == 9 + 1 and stats["unstored_arrays"] == 8  # eager 9, fused 1


def test_a_named_intermediate_is_stored_and_a_dropped_one_is_not(fresh_stats):
    x = pk.array(arr(4))

    def program():
        kept = pk.multiply(x, 2.0)
        total = pk.sum(pk.exp(kept))  # exp(kept) is dropped at once
        return kept, total

    kept, total = fused(program)
    np.testing.assert_array_equal(kept, arr(4) * 2.0)
    assert float(total) == pytest.approx(np.sum(np.exp(arr(4) * 2.0)), rel=1e-14)
    assert pk.stats()["unstored_arrays"] == 1


def test_a_result_nobody_reads_is_not_computed(fresh_stats):
    x = pk.array(arr(5))

    def program():
        pk.sqrt(x)  # the result is dropped at once

    fused(program)
    assert pk.stats()["kernels_launched"] == 0


def test_a_slice_of_a_dropped_result_keeps_its_store():
    x = pk.array(arr(6))

    def program():
        t = pk.multiply(x, 3.0)
        head = t[0:5]  # a View over t's memory: t can be dropped, its values cannot
        del t
        return pk.add(head, 1.0)

    np.testing.assert_array_equal(fused(program), arr(6)[:5] * 3.0 + 1.0)


def test_numpy_of_a_pending_result_sees_its_values():
    x = pk.array(arr(7))
    got = fused(lambda: np.asarray(pk.add(pk.multiply(x, 2.0), x)).copy())
    np.testing.assert_array_equal(got, arr(7) * 2.0 + arr(7))


# --- order with everything else ----------------------------------------------------------------------
def test_a_host_write_after_an_operation_does_not_change_its_result():
    x = pk.array(arr(8))

    def program():
        t = pk.multiply(x, 2.0)
        x[0] = 100.0
        return t

    want = arr(8) * 2.0
    np.testing.assert_array_equal(fused(program), want)


def test_an_array_the_program_writes_through_numpy_is_read_when_the_operation_is_called():
    data = arr(9)
    x = pk.array(data)  # data stays writable: the program can change x behind kfuse's back

    def program():
        t = pk.multiply(x, 2.0)
        data[1] = -1.0
        return t

    np.testing.assert_array_equal(fused(program), arr(9) * 2.0)


@pk.workunit
def double_in_place(i, v):
    v[i] = v[i] * 2.0


def test_kernel_calls_see_the_operations_before_them_and_not_after():
    x = pk.array(arr(10))

    def program():
        t = pk.add(x, 1.0)
        pk.parallel_for(33, double_in_place, v=t)  # reads and writes t: the operation must have run
        pk.parallel_for(33, double_in_place, v=x)  # writes x: the next operation reads the doubled x
        return pk.subtract(t, x)

    np.testing.assert_array_equal(fused(program), (arr(10) + 1.0) * 2.0 - arr(10) * 2.0)


def test_a_sum_feeds_a_later_operation_as_a_scalar():
    x = pk.array(arr(11))

    def program():
        m = pk.mean(pk.multiply(x, 2.0))
        return pk.subtract(x, m)

    np.testing.assert_allclose(fused(program), arr(11) - np.mean(arr(11) * 2.0), rtol=0, atol=1e-14)


def test_out_accumulates_over_a_loop():
    def program():
        a, b, c = pk.zeros(33), pk.array(arr(12)), pk.array(arr(13))
        for _ in range(5):
            pk.add(a, pk.add(b, pk.multiply(c, 3.0)), out=a)
        return a

    want = np.zeros(33)
    for _ in range(5):
        want += arr(12) + arr(13) * 3.0
    np.testing.assert_array_equal(fused(program), want)


def test_shifted_views_of_one_array_split_the_kernel():
    def program():
        y = pk.array(arr(14))
        pk.multiply(y[1:], 2.0, out=y[:-1].copy())  # another array: no conflict
        pk.add(y[:-1], 1.0, out=y[:-1])  # writes y[0:32]
        pk.multiply(y[1:], 0.5, out=y[1:])  # writes y[1:33], overlapping the last write one element over
        return y

    want = arr(14)
    want[:-1] += 1.0
    want[1:] *= 0.5
    np.testing.assert_array_equal(fused(program), want)


# --- the general path, Hypothesis ----------------------------------------------------------------------
UNARY = [("sqrt", np.sqrt), ("exp", np.exp), ("log", np.log), ("absolute", np.abs), ("negative", np.negative),
         ("square", np.square)]
BINARY = [("add", np.add), ("subtract", np.subtract), ("multiply", np.multiply), ("divide", np.divide),
          ("maximum", np.maximum), ("minimum", np.minimum)]


@st.composite
def programs(draw):
    """A chain of operations over three arrays: each step a unary op of an earlier value, or a binary op of two
    earlier values (or one and a scalar, either side), sometimes written into an earlier value (out=); some
    values kept by the program."""
    steps = []
    for _ in range(draw(st.integers(1, 8))):
        count = 3 + len(steps)
        if draw(st.booleans()):
            steps.append(("u", draw(st.sampled_from(range(len(UNARY)))), draw(st.integers(0, count - 1))))
        else:
            a, b = draw(st.integers(0, count - 1)), draw(st.one_of(st.integers(0, count - 1),
                                                                   st.floats(-3, 3, allow_nan=False)))
            swap = draw(st.booleans())
            out = draw(st.one_of(st.none(), st.integers(0, count - 1)))
            steps.append(("b", draw(st.sampled_from(range(len(BINARY)))), a, b, swap, out))
    kept = draw(st.sets(st.integers(0, 2 + len(steps))))
    total = draw(st.booleans())
    return steps, kept, total


def interpret(program, values, unary, binary, total_fn):
    steps, kept, total = program
    for step in steps:
        if step[0] == "u":
            values.append(unary(step[1], values[step[2]]))
        else:
            _, op, a, b, swap, out = step
            left, right = values[a], (values[b] if isinstance(b, int) else b)
            if swap:
                left, right = right, left
            values.append(binary(op, left, right, None if out is None else values[out]))
    result = [values[i] for i in sorted(kept) if i < len(values)]
    return result, (total_fn(values[-1]) if total else None)


def run_kfuse(program, fusion: bool):
    values = [pk.array(arr(s, 17, 0.25, 3.0)) for s in (20, 21, 22)]

    def unary(op, v):
        return getattr(pk, UNARY[op][0])(v)

    def binary(op, a, b, out):
        return getattr(pk, BINARY[op][0])(a, b, out=out)

    if fusion:
        pk.enable_fusion()
    try:
        with np.errstate(all="ignore"):
            result, total = interpret(program, values, unary, binary, pk.sum)
        pk.fence()
        return [np.array(v) for v in result], (None if total is None else float(total))
    finally:
        pk.disable_fusion()


def run_numpy(program):
    values = [arr(s, 17, 0.25, 3.0) for s in (20, 21, 22)]

    def unary(op, v):
        return UNARY[op][1](v)

    def binary(op, a, b, out):
        result = BINARY[op][1](a, b)
        if out is not None:
            out[...] = result
            return out
        return result

    with np.errstate(all="ignore"):
        result, total = interpret(program, values, unary, binary, np.sum)
    return [np.array(v, dtype=np.float64) for v in result], total


@settings(max_examples=60, deadline=None)
@given(programs())
def test_fused_chains_equal_eager_and_numpy(program):
    eager, eager_total = run_kfuse(program, False)
    got, total = run_kfuse(program, True)
    want, want_total = run_numpy(program)
    for e, g, w in zip(eager, got, want):
        np.testing.assert_array_equal(g, e)
        np.testing.assert_allclose(g, w, rtol=1e-13, atol=0, equal_nan=True)
    if total is not None:
        assert total == eager_total or (math.isnan(total) and math.isnan(eager_total))
        assert total == pytest.approx(want_total, rel=1e-12, nan_ok=True)


@pytest.mark.backend("kokkos")
def test_compiled_chain_equals_eager(fresh_stats):
    x, mu, var = pk.array(arr(1, 1000)), pk.array(arr(2, 1000)), pk.array(arr(3, 1000))
    eager = float(chain(x, mu, var))
    assert fused(lambda: float(chain(x, mu, var))) == eager
    assert pk.stats()["unstored_arrays"] == 8


@pk.workunit
def fails_at_3(i: int, v: pk.View1D[pk.double]):
    v[i] = 1.0 * (7 // (i - 3))  # integer division by zero at i == 3


def test_operations_on_what_a_failed_call_lost_report_it_where_their_result_is_read(monkeypatch):
    """Recorded operations reading memory a failed delayed call lost are logged, not run at once: the tracer
    poisons their results, an unrelated read raises nothing, and reading their result names the failed call."""
    monkeypatch.setenv("KFUSE_MAX_TRACE", "1")  # the failing call runs (and fails) as soon as it is logged
    a, b = pk.array(arr(15)), pk.array(arr(16))
    pk.enable_fusion()
    try:
        pk.parallel_for(33, fails_at_3, v=a)
        t = pk.multiply(a, 2.0)
        np.testing.assert_array_equal(np.asarray(b), arr(16))
        with pytest.raises(pk.DeferredError, match="fails_at_3"):
            np.asarray(t)
    finally:
        pk.disable_fusion()  # the failure was reported at the read: nothing left to raise


@pk.workunit
def team_total(team: pk.TeamMember, acc: pk.Acc[pk.double], m: pk.View2D[pk.double]):
    if team.team_rank() == 0:
        acc += m[team.league_rank()][0]


@pytest.mark.backend("kokkos")  # (Kokkos refuses the team size; the python backend would run it)
@pytest.mark.parametrize("host_elements", ["0", "4096"])
def test_a_recorded_sum_of_a_failed_reductions_result_names_the_failed_call(monkeypatch, host_elements):
    """A reduction refused at its launch (a team too large) delivers no number: array operations scaled by its
    Future, summed, raise a DeferredError naming it where their sum is read (the sum's kernel call is refused as it
    is logged, so its Future has failed before the operations' own Future takes it over). Fuzz case 2009 of seed
    6663, whose sum said "never delivered" (an InternalError) instead."""
    monkeypatch.setenv("KFUSE_MAX_TRACE", "1")
    monkeypatch.setenv("KFUSE_HOST_ELEMENTS", host_elements)
    m, x, y = pk.array(arr(20, 4 * 5).reshape(4, 5)), pk.array(arr(21, 8)), pk.array(arr(22, 8))
    pk.enable_fusion()
    try:
        total = pk.parallel_reduce(pk.TeamPolicy(4, 100000), team_total, m=m)
        result = pk.sum(pk.multiply(pk.subtract(x, y), total))
        with pytest.raises(pk.DeferredError, match="team_total"):
            float(result)
        np.testing.assert_array_equal(np.asarray(x), arr(21, 8))  # unrelated data stays readable
    finally:
        pk.disable_fusion()  # the failure was reported at the read: nothing left to raise


def _analyses(monkeypatch) -> list:
    """Counts the groups analysed from scratch (kfuse/ops/lazy.py ``Batch.analysed``)."""
    from kfuse.ops import lazy
    made = []
    real = lazy.Batch.analysed

    def counted(batch):
        if batch.group is None:
            made.append(len(batch.steps))
        return real(batch)
    monkeypatch.setattr(lazy.Batch, "analysed", counted)
    return made


def test_a_loop_of_statements_is_analysed_once_and_still_drops_its_intermediates(monkeypatch, fresh_stats):
    made = _analyses(monkeypatch)
    a, b = pk.array(arr(20)), pk.array(arr(21))

    def program():
        for _ in range(30):  # jacobi_1d's two statements: neighbours of the last store split them
            pk.multiply(pk.add(pk.add(a[:-2], a[1:-1]), a[2:]), 0.33333, out=b[1:-1])
            pk.multiply(pk.add(pk.add(b[:-2], b[1:-1]), b[2:]), 0.33333, out=a[1:-1])
        return a, b

    got = fused(program)
    want_a, want_b = arr(20), arr(21)
    for _ in range(30):
        want_b[1:-1] = (want_a[:-2] + want_a[1:-1] + want_a[2:]) * 0.33333
        want_a[1:-1] = (want_b[:-2] + want_b[1:-1] + want_b[2:]) * 0.33333
    np.testing.assert_array_equal(got[0], want_a)
    np.testing.assert_array_equal(got[1], want_b)
    assert len(made) <= 4  # the first iterations (a slice made after a statement's first result is not looked up)
    assert pk.stats()["unstored_arrays"] == 2 * 2 * 30  # looked-up groups drop their intermediates too


def test_a_view_made_after_a_groups_first_result_is_not_looked_up_as_that_result():
    """``s`` is a slice of the first iteration's result: there it is that step's value; in later iterations the
    same View still holds the first result, not the new one (a lookup keyed by its uid would read the new one)."""
    def program():
        a = pk.array(arr(22))
        s, outs = None, []
        for i in range(4):
            t = pk.add(a, float(i))
            if s is None:
                s = t[:]
            outs.append(np.asarray(pk.multiply(s, 2.0)).copy())  # the host read runs the group
        return outs

    for got in (program(), fused(program)):
        for out in got:
            np.testing.assert_array_equal(out, arr(22) * 2.0)


@pytest.mark.parametrize("known_contents", [False, True], indirect=True)  # (these kernels run off the GPU)
def test_a_planned_group_launch_binds_once(monkeypatch, fresh_stats, known_contents):
    from kfuse.ops import lazy, plans
    monkeypatch.setattr(plans, "_PLANS", {})  # (plans of earlier tests keep their bindings)
    binds = []
    real = lazy.bind
    monkeypatch.setattr(lazy, "bind", lambda *args: binds.append(args[0]) or real(*args))
    a, b = pk.array(arr(23)), pk.array(arr(24))

    def program():
        outs = []
        for i in range(5):
            outs.append(pk.sum(pk.multiply(pk.add(a, b), float(i))))
        return [float(x) for x in outs]

    binds.clear()
    got = fused(program)
    assert got == program() and got == pytest.approx([np.sum((arr(23) + arr(24)) * i) for i in range(5)], rel=1e-14)
    assert len(binds) == 1  # later runs of the same plan launch through the first one's binding


def test_a_kept_binding_still_drops_known_contents_for_a_kernel_off_the_gpu():
    """Launching through the kept binding does what ``bind`` does: a kernel that runs on the host drops what kfuse
    knew of its Views' contents (the host side may change them)."""
    from kfuse.ops import lazy, plans
    plan = plans.Plan(wu=k.multiply_vs, names=("out", "a", "s"))
    values = arr(23)
    a, out = pk.array(values), pk.zeros(values.size)
    root = views.memory_owner(a._array)
    lazy._at_once(plan, "for", values.size, {"out": out, "a": a, "s": 2.0})  # bound, the binding kept
    assert plan.binding is not None
    views.mark_constant(root)
    lazy._at_once(plan, "for", values.size, {"out": out, "a": a, "s": 3.0})  # through the kept binding
    assert views.take_constant(root) is None
    np.testing.assert_array_equal(out.copy(), values * 3.0)


def test_a_full_plan_table_starts_anew_and_keeps_planning_once(monkeypatch, fresh_stats):
    """A long program (or test run) fills the plan table with other groups' forms: the table starts anew, so
    later runs of a group still launch through the first one's binding (as in a fresh process)."""
    from kfuse.ops import lazy, plans
    monkeypatch.setattr(plans, "_MAX_PLANS", 3)
    monkeypatch.setattr(plans, "_PLANS", {("other form", False, (k,)): None for k in range(3)})
    binds = []
    real = lazy.bind
    monkeypatch.setattr(lazy, "bind", lambda *args: binds.append(args[0]) or real(*args))
    a, b = pk.array(arr(23)), pk.array(arr(24))
    got = fused(lambda: [float(pk.sum(pk.multiply(pk.add(a, b), float(i)))) for i in range(5)])
    assert got == pytest.approx([np.sum((arr(23) + arr(24)) * i) for i in range(5)], rel=1e-14)
    assert len(binds) == 1 and len(plans._PLANS) == 1


def test_a_full_form_table_starts_anew_without_reusing_a_number(monkeypatch, fresh_stats):
    """Group forms key the plans: when the form table starts anew, new forms get numbers never given before, so
    a plan kept for an old form is never launched for another group (two chains alternating over a table of
    two forms: each restart would hand the other chain's numbers out again if numbers were reused)."""
    from kfuse.ops import group, recorded
    monkeypatch.setattr(group, "_MAX_FORMS", 2)
    monkeypatch.setattr(recorded._State, "LIMIT", 1)  # no looked-up analyses: every run numbers its forms
    a, b = arr(27), np.abs(arr(28)) + 1.0
    va, vb = pk.array(a), pk.array(b)

    def program():
        return [float(pk.sum(pk.multiply(pk.add(va, vb), 3.0))), float(pk.sum(pk.divide(pk.subtract(va, vb), vb)))]

    want = [np.sum((a + b) * 3.0), np.sum((a - b) / b)]
    for _ in range(4):
        assert fused(program) == pytest.approx(want, rel=1e-13)


def test_form_numbers_are_never_given_twice_when_the_table_starts_anew(monkeypatch):
    from kfuse.ops import group
    monkeypatch.setattr(group, "_MAX_FORMS", 2)
    monkeypatch.setattr(group, "_FORMS", {})
    numbers = [group._number(-1, part) for part in ["a", "b", "c", "d", "a", "e", "b"]]
    assert len(set(numbers)) == len(numbers)  # each restart forgot "a" and "b": they are numbered anew
    assert group._number(-1, "b") == numbers[-1]  # while the table keeps a sequence, it keeps its number


def test_new_arrays_of_each_run_look_up_what_the_first_run_found(monkeypatch, fresh_stats):
    made = _analyses(monkeypatch)

    def program():  # NSTREAM in array operations, on arrays of its own each run (as a benchmark's runs are)
        a, b, c = pk.zeros(33), pk.full(33, 2.0), pk.array(arr(26))
        for _ in range(10):
            pk.add(a, pk.add(b, pk.multiply(c, 3.0)), out=a)
        return a

    want = np.zeros(33)
    for _ in range(10):
        want += 2.0 + arr(26) * 3.0
    for run in range(4):
        np.testing.assert_array_equal(fused(program), want)
        if run == 0:
            first = len(made)
    assert first >= 1 and len(made) == first  # later runs: every step looked up
    assert pk.stats()["unstored_arrays"] == 4 * 20


def test_where_views_lie_in_their_memory_is_part_of_what_is_looked_up():
    """Run 1 writes ``y`` in another part of ``x``'s array, run 2 one element over ``x``: then reading ``x`` after
    the write must see it, so the steps split. Keyed without the offset, run 2 would take run 1's single kernel."""
    def program(x, y):
        t = pk.add(x, 1.0)
        pk.multiply(t, 2.0, out=y)
        return pk.add(x, 3.0)

    def numpy(x, y):
        y[...] = (x + 1.0) * 2.0
        return x + 3.0

    for split in (33, 1, 33, 1):
        base = arr(27, 66)
        views = pk.array(base.copy())
        got = fused(lambda: np.asarray(program(views[0:32], views[split:split + 32])).copy())
        want = numpy(base[0:32], base[split:split + 32])
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(views, base)


def test_which_array_views_lie_in_is_part_of_what_is_looked_up():
    """Run 1 reads ``x`` and writes ``y`` in two arrays, run 2 writes ``y`` one element over ``x`` in the same array
    (at the same offsets): there the write must wait for every read of ``x`` before it, and the last step reads
    what it wrote."""
    def program(x, y):
        pk.multiply(pk.add(x, 1.0), 2.0, out=y)
        return pk.multiply(x, pk.add(x, 3.0))

    for same in (False, True, False, True):
        base_p, base_q = arr(28), arr(29)
        p, q = pk.array(base_p.copy()), pk.array(base_q.copy())
        got = fused(lambda: np.asarray(program(p[0:32], (p if same else q)[1:33])).copy())
        (base_p if same else base_q)[1:33] = (base_p[0:32] + 1.0) * 2.0
        np.testing.assert_array_equal(got, base_p[0:32] * (base_p[0:32] + 3.0))


def _fdtd(ex, ey, hz, steps: int):
    """fdtd_2d's statements in array operations (examples/npbench/fdtd_2d_array.py): 2-D windows, statements
    split where one reads neighbours of what another wrote, intermediates carried across the splits."""
    for t in range(steps):
        pk.fill(ey[0, :], float(t))
        pk.subtract(ey[1:, :], pk.multiply(pk.subtract(hz[1:, :], hz[:-1, :]), 0.5), out=ey[1:, :])
        pk.subtract(ex[:, 1:], pk.multiply(pk.subtract(hz[:, 1:], hz[:, :-1]), 0.5), out=ex[:, 1:])
        pk.subtract(hz[:-1, :-1], pk.multiply(pk.subtract(pk.add(pk.subtract(ex[:-1, 1:], ex[:-1, :-1]),
                                                                 ey[1:, :-1]), ey[:-1, :-1]), 0.7), out=hz[:-1, :-1])


def test_looked_up_groups_store_exactly_what_analysed_groups_store(monkeypatch, fresh_stats):
    """The lookups keep no reference of their own to a View's memory: a dropped result stays unstored."""
    from kfuse.ops import lazy

    def run() -> tuple:
        pk.reset_stats()
        views = [pk.array(arr(40 + k, 6 * 7).reshape(6, 7)) for k in range(3)]
        fused(lambda: _fdtd(*views, 4))
        return [np.asarray(v).copy() for v in views], pk.stats()["unstored_arrays"]

    looked_up = run()
    looked_up = run()  # (the second run finds the first one's sequences)
    monkeypatch.setattr(lazy.Batch, "_pattern", lambda batch, step: None)  # every step analysed
    analysed = run()
    for got, want in zip(looked_up[0], analysed[0]):
        np.testing.assert_array_equal(got, want)
    assert looked_up[1] == analysed[1] > 0


def test_the_table_of_sequences_starts_anew_when_full(monkeypatch):
    from kfuse.ops import recorded
    monkeypatch.setattr(recorded._State, "LIMIT", 8)
    monkeypatch.setattr(recorded._State, "count", 0)

    def program():
        a = pk.array(arr(31, 60))
        for i in range(12):  # a new window each time: new keys, new sequences
            pk.multiply(pk.add(a[i:i + 20], 1.0), 0.5, out=a[i + 20:i + 40])
        return a

    want = arr(31, 60)
    for i in range(12):
        want[i + 20:i + 40] = (want[i:i + 20] + 1.0) * 0.5
    np.testing.assert_array_equal(fused(program), want)
    assert recorded._State.count <= 8
